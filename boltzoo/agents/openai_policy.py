"""Any OpenAI-compatible server (``/v1/chat/completions``) as a batched policy.

A batch of turns becomes concurrent requests, sent with the ``openai`` SDK (its timeouts, and its
retries with backoff on connection errors, 408, 429 and 5xx answers). Token ids and logprobs
are recorded when the server returns them: ``prompt_token_ids`` and per-choice ``token_ids`` (vLLM's
``return_token_ids``, which boltzoo's gateway always returns) and ``logprobs.content[].logprob``.
Against a server that does not know ``return_token_ids`` (OpenAI's own API rejects unknown
fields), pass ``request_token_ids=False``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from boltzoo.agents.base import SamplingParams, Turn
from boltzoo.episode import Completion
from boltzoo.errors import BoltzooError


class ServerError(BoltzooError, RuntimeError):
    """The server answered with an error, or not at all."""


class OpenAICompatiblePolicy:
    """Chats sent to ``{base_url}/chat/completions``; Completions with the server's tokens back.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        model: the model name the server knows.
        api_key: sent as a bearer token when given.
        max_new_tokens: new tokens per response at most.
        temperature: the sampling temperature.
        top_p: nucleus sampling's probability mass.
        stop: strings that end a response.
        request_token_ids: ask for ``return_token_ids`` (vLLM and boltzoo's gateway know it).
        max_concurrency: requests in flight at once.
        timeout_s: per request attempt.
        max_retries: attempts after the first, for the errors worth retrying.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        request_token_ids: bool = True,
        max_concurrency: int = 32,
        timeout_s: float = 300.0,
        max_retries: int = 2,
    ):
        import openai

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.sampling = SamplingParams(max_new_tokens, temperature, top_p, stop)
        self.request_token_ids = request_token_ids
        self.max_concurrency = int(max_concurrency)
        self.timeout_s = float(timeout_s)
        self.client = openai.OpenAI(
            base_url=self.base_url,
            api_key=api_key or "none",  # the SDK needs one; servers without keys ignore it
            timeout=self.timeout_s,
            max_retries=max_retries,
        )
        self.version = 0

    @property
    def sampling_params(self) -> dict[str, Any]:
        """Return the sampling parameters every Completion records."""
        return self.sampling.to_dict()

    def act(self, turns: Sequence[Turn]) -> list[Completion]:
        """Return one Completion per turn, the requests sent concurrently."""
        chats = [turn.observation["messages"] for turn in turns]
        if len(chats) == 1:
            return [self.complete(chats[0])]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(chats))) as pool:
            return list(pool.map(self.complete, chats))

    def request_body(self, messages: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Return the JSON body of one chat completion request."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "max_tokens": self.sampling.max_new_tokens,
            "temperature": self.sampling.temperature,
            "top_p": self.sampling.top_p,
            "logprobs": True,
        }
        if self.sampling.stop:
            body["stop"] = list(self.sampling.stop)
        if self.request_token_ids:
            body["return_token_ids"] = True
        return body

    def complete(self, messages: Sequence[dict[str, Any]]) -> Completion:
        """Return the Completion of one chat: one request (retried as the SDK retries)."""
        import openai

        body = self.request_body(messages)
        extra = {k: body.pop(k) for k in ("return_token_ids",) if k in body}
        try:
            response = self.client.chat.completions.create(**body, extra_body=extra or None)
        except openai.APIStatusError as error:
            detail = error.response.text[:500]
            raise ServerError(f"{self.base_url} answered {error.status_code}: {detail}") from None
        except openai.APIConnectionError as error:  # timeouts included
            raise ServerError(f"no answer from {self.base_url}: {error}") from None
        # the server's extra fields (token ids) are kept by the SDK's models
        return self.parse_response(response.model_dump())

    def parse_response(self, data: dict[str, Any]) -> Completion:
        """Return the Completion in a chat completion response (its first choice)."""
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"not a chat completion response: {str(data)[:300]}") from None
        token_ids = choice.get("token_ids")
        content = (choice.get("logprobs") or {}).get("content") or []
        logprobs = [float(item["logprob"]) for item in content]
        if token_ids is None or len(logprobs) != len(token_ids):
            logprobs = None  # logprobs without their token ids cannot be paired: drop them
        return Completion(
            text=message.get("content") or "",
            prompt_token_ids=data.get("prompt_token_ids"),
            response_token_ids=token_ids,
            logprobs=logprobs,
            sampling_params=self.sampling_params,
            model=data.get("model", self.model),
            policy_version=self.version,
            finish_reason=choice.get("finish_reason"),
        )

    def __repr__(self) -> str:
        return f"OpenAICompatiblePolicy({self.base_url!r}, {self.model!r})"
