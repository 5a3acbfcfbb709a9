"""An OpenAI-compatible HTTP gateway in front of a policy, recording every call with its tokens.

Agents that run elsewhere, or inside another framework (AutoGen, the OpenAI Agents SDK, anything
with an OpenAI client), reach the model by pointing their base URL at the gateway; nothing else
in the agent changes. The gateway:

* serves ``POST /v1/chat/completions``, ``GET /v1/models`` and ``GET /health``;
* batches concurrent requests into one call of the policy (the batching window is
  ``batch_wait_s``), so many agents share the model's batch;
* returns, always, ``prompt_token_ids`` and, per choice, ``token_ids`` and per-token
  ``logprobs`` beside the standard fields (as vLLM's ``return_token_ids`` does);
* records each call once, attributed to a session (an episode) and an agent: by the path
  ``/sessions/{session}/v1/...`` or ``/sessions/{session}/agents/{agent}/v1/...``, or by the
  headers ``X-Boltzoo-Session`` / ``X-Boltzoo-Agent``; plain ``/v1`` is session ``"default"``;
* renders OpenAI ``tools`` for the model (a system-prompt section) and parses the model's
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks into ``tool_calls``.

Sampling is the policy's: a request's ``temperature``, ``max_tokens`` and the like are ignored,
so every recorded call was sampled as the learner assumes. Unknown request fields are ignored.
Bad requests get a 4xx JSON error (malformed JSON, no messages, an unknown model, an oversized
body or prompt, a wrong API key), never a crash. Loopback only unless ``host`` says otherwise.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from boltzoo.agents.base import Policy, Turn, as_policy
from boltzoo.episode import Completion
from boltzoo.errors import BoltzooError

DEFAULT_SESSION = "default"
_ROUTE = re.compile(
    r"^(?:/sessions/(?P<session>[^/]+)(?:/agents/(?P<agent>[^/]+))?)?/v1/(?P<endpoint>[\w/.-]+)$"
)
_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


@dataclass
class RecordedCall:
    """One chat completion served: who asked, what they sent, what the model wrote."""

    call_id: str
    session: str
    agent: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    completion: Completion
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    created: float = field(default_factory=time.time)


class GatewayError(BoltzooError):
    """A request the gateway refuses; ``status`` is the HTTP status it answers with."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.kind = status, kind


# --- the chat the model sees ---------------------------------------------------------------


def render_tools(tools: Sequence[dict[str, Any]]) -> str:
    """Return the system-prompt section that shows OpenAI-format ``tools`` to the model."""
    lines = [
        "You can call these tools. To call one, write exactly:",
        '<tool_call>{"name": "<tool name>", "arguments": {<arguments as JSON>}}</tool_call>',
        "Tools:",
    ]
    for tool in tools:
        spec = tool.get("function", tool)
        lines.append(
            json.dumps(
                {
                    "name": spec.get("name"),
                    "description": spec.get("description", ""),
                    "parameters": spec.get("parameters", {}),
                }
            )
        )
    return "\n".join(lines)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise GatewayError(
        400, f"message content must be a string or a list of parts, got {content!r:.80}"
    )


def to_model_chat(
    messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
) -> list[dict[str, str]]:
    """Return the plain role/content chat the policy sees for an OpenAI request."""
    chat: list[dict[str, str]] = []
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise GatewayError(400, f"each message needs a role: {str(message)[:80]}")
        role = message["role"]
        text = _content_text(message.get("content"))
        if role == "developer":
            role = "system"
        if role == "assistant" and message.get("tool_calls"):
            calls = [
                "<tool_call>"
                + json.dumps(
                    {
                        "name": c.get("function", {}).get("name"),
                        "arguments": _arguments(c.get("function", {}).get("arguments")),
                    }
                )
                + "</tool_call>"
                for c in message["tool_calls"]
            ]
            text = "\n".join([text, *calls]) if text else "\n".join(calls)
        if role not in ("system", "user", "assistant", "tool"):
            raise GatewayError(400, f"unknown message role {role!r}")
        chat.append({"role": role, "content": text})
    if tools:
        section = render_tools(tools)
        if chat and chat[0]["role"] == "system":
            chat[0] = {"role": "system", "content": f"{chat[0]['content']}\n\n{section}"}
        else:
            chat.insert(0, {"role": "system", "content": section})
    return chat


def _arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Return ``(content, tool_calls)``: the model's text without its tool-call blocks, and the
    blocks as OpenAI ``tool_calls`` (blocks that are not valid JSON stay in the content)."""
    calls, kept = [], text
    for match in _TOOL_CALL.finditer(text):
        try:
            payload = json.loads(match.group(1))
        except json.JSONDecodeError:
            continue
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            continue
        arguments = payload.get("arguments", {})
        calls.append(
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": payload["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
        kept = kept.replace(match.group(0), "")
    return kept.strip(), calls


# --- the batcher ---------------------------------------------------------------------------


@dataclass
class _Pending:
    chat: list[dict[str, str]]
    agent: str | None
    future: Future = field(default_factory=Future)


class _Batcher(threading.Thread):
    """Collects requests for ``wait_s`` after the first, then calls the policy once for all."""

    def __init__(self, policy: Policy, max_batch_size: int, wait_s: float):
        super().__init__(daemon=True, name="boltzoo-gateway-batcher")
        self.policy, self.max_batch_size, self.wait_s = policy, max_batch_size, wait_s
        self.requests: queue.Queue[_Pending | None] = queue.Queue()
        self.batch_sizes: list[int] = []

    def run(self) -> None:
        while True:
            first = self.requests.get()
            if first is None:
                return
            batch, deadline = [first], time.monotonic() + self.wait_s
            while len(batch) < self.max_batch_size:
                try:
                    item = self.requests.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    self.requests.put(None)  # stop after this batch
                    break
                batch.append(item)
            self._serve(batch)

    def _serve(self, batch: list[_Pending]) -> None:
        self.batch_sizes.append(len(batch))
        turns = [Turn(agent=p.agent or "agent", observation={"messages": p.chat}) for p in batch]
        try:
            results: list[Any] = list(self.policy.act(turns))
            if len(results) != len(batch):
                raise RuntimeError(f"the policy returned {len(results)} for {len(batch)} chats")
        except Exception:
            results = []  # one by one, so that one bad prompt fails only its own request
            for turn in turns:
                try:
                    results.append(self.policy.act([turn])[0])
                except Exception as error:
                    results.append(error)
        for pending, result in zip(batch, results, strict=True):
            if isinstance(result, BaseException):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)


# --- the server ----------------------------------------------------------------------------


class Gateway:
    """An OpenAI-compatible server in front of ``policy``, recording every call (a context
    manager: entering starts it, leaving stops it).

    Args:
        policy: any policy; a model backend gives token ids and logprobs.
        host, port: where to listen (loopback; port 0 picks a free one).
        model_name: the model id clients send (default: the policy's ``name``).
        api_key: when given, requests must carry ``Authorization: Bearer <api_key>``.
        max_batch_size, batch_wait_s: batching of concurrent requests.
        max_body_bytes: larger request bodies get 413.
    """

    def __init__(
        self,
        policy: Policy | Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        model_name: str | None = None,
        api_key: str | None = None,
        max_batch_size: int = 64,
        batch_wait_s: float = 0.01,
        max_body_bytes: int = 4_000_000,
    ):
        self.policy = as_policy(policy)
        self.model_name = model_name or getattr(policy, "name", None) or "boltzoo"
        # what a copy of this gateway in another process is made with (see __reduce__)
        self._options = dict(
            host=host,
            model_name=self.model_name,
            api_key=api_key,
            max_batch_size=max_batch_size,
            batch_wait_s=batch_wait_s,
            max_body_bytes=max_body_bytes,
        )
        self.api_key = api_key
        self.max_body_bytes = int(max_body_bytes)
        self._batcher = _Batcher(self.policy, max_batch_size, batch_wait_s)
        self._calls: list[RecordedCall] = []
        self._calls_lock = threading.Lock()
        self._server = _Server((host, port), _handler_for(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, daemon=True, name="boltzoo-gateway"
        )
        self._started = False

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """Return the ``(host, port)`` the gateway listens on."""
        return self._server.server_address[:2]

    @property
    def base_url(self) -> str:
        """Return the OpenAI base URL of session ``"default"``: ``http://host:port/v1``."""
        host, port = self.address
        return f"http://{host}:{port}/v1"

    def session_url(self, session: str, agent: str | None = None) -> str:
        """Return the base URL whose calls are recorded under ``session`` (and ``agent``)."""
        host, port = self.address
        agent_part = f"/agents/{agent}" if agent else ""
        return f"http://{host}:{port}/sessions/{session}{agent_part}/v1"

    def start(self) -> Gateway:
        """Start serving (in background threads); return the gateway."""
        if not self._started:
            self._batcher.start()
            self._thread.start()
            self._started = True
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._started:
            self._server.shutdown()
            self._batcher.requests.put(None)
            self._batcher.join(timeout=10)
            self._started = False
        self._server.server_close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Shipped to another process (a Ray rollout worker), a gateway comes back serving the
        # copy of its policy there, started, on a free port: framework agents pickled with it
        # call the worker's model. Pickled together with that policy, the copy is the same
        # object the worker's other references hold (weights loaded there reach the gateway).
        return (_serving_gateway, (self.policy, self._options))

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- records ---------------------------------------------------------------------------

    def calls(self, session: str | None = None) -> list[RecordedCall]:
        """Return the recorded calls (of one session), in the order they were answered."""
        with self._calls_lock:
            return [c for c in self._calls if session is None or c.session == session]

    def pop_calls(self, session: str) -> list[RecordedCall]:
        """Return and forget the recorded calls of ``session``."""
        with self._calls_lock:
            mine = [c for c in self._calls if c.session == session]
            self._calls = [c for c in self._calls if c.session != session]
        return mine

    @property
    def batch_sizes(self) -> list[int]:
        """Return how many requests each policy call served so far, in order."""
        return list(self._batcher.batch_sizes)

    @property
    def mean_batch_size(self) -> float:
        """Return the mean number of requests served per policy call so far."""
        sizes = self.batch_sizes
        return sum(sizes) / len(sizes) if sizes else 0.0

    # --- one request -----------------------------------------------------------------------

    def chat_completion(
        self, body: dict[str, Any], session: str, agent: str | None
    ) -> dict[str, Any]:
        """Serve one chat completion request; return the response body."""
        if not isinstance(body, dict):
            raise GatewayError(400, "the request body must be a JSON object")
        model = body.get("model")
        if model is not None and model != self.model_name:
            raise GatewayError(
                404,
                f"unknown model {str(model)[:80]!r}; this gateway serves {self.model_name!r}",
                "model_not_found",
            )
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise GatewayError(400, "'messages' must be a non-empty list of chat messages")
        tools = body.get("tools") or []
        if not isinstance(tools, list):
            raise GatewayError(400, "'tools' must be a list")
        chat = to_model_chat(messages, tools)
        pending = _Pending(chat=chat, agent=agent)
        self._batcher.requests.put(pending)
        try:
            completion: Completion = pending.future.result()
        except ValueError as error:  # e.g. a prompt over the policy's length limit
            raise GatewayError(400, str(error), "context_length_exceeded") from None
        if isinstance(completion, str):
            completion = Completion(text=completion)
        content, tool_calls = parse_tool_calls(completion.text) if tools else (completion.text, [])
        call = RecordedCall(
            call_id=f"chatcmpl-{uuid.uuid4().hex}",
            session=session,
            agent=agent,
            messages=messages,
            tools=tools,
            completion=completion,
            tool_calls=tool_calls,
        )
        with self._calls_lock:
            self._calls.append(call)
        return self._response(call, content)

    def _response(self, call: RecordedCall, content: str) -> dict[str, Any]:
        completion = call.completion
        token_ids = completion.response_token_ids
        logprobs = None
        if completion.logprobs is not None and token_ids is not None:
            tokenizer = getattr(self.policy, "tokenizer", None)
            logprobs = {
                "content": [
                    {
                        "token": tokenizer.decode([t]) if tokenizer is not None else str(t),
                        "logprob": lp,
                        "bytes": None,
                        "top_logprobs": [],
                    }
                    for t, lp in zip(token_ids, completion.logprobs, strict=True)
                ]
            }
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        if call.tool_calls:
            message["tool_calls"] = call.tool_calls
        else:
            message["content"] = content
        finish = "tool_calls" if call.tool_calls else (completion.finish_reason or "stop")
        prompt_tokens = completion.num_prompt_tokens or 0
        response_tokens = completion.num_response_tokens or 0
        return {
            "id": call.call_id,
            "object": "chat.completion",
            "created": int(call.created),
            "model": self.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish,
                    "logprobs": logprobs,
                    "token_ids": token_ids,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": response_tokens,
                "total_tokens": prompt_tokens + response_tokens,
            },
            "prompt_token_ids": completion.prompt_token_ids,
        }


def _serving_gateway(policy: Policy, options: dict[str, Any]) -> Gateway:
    return Gateway(policy, **options).start()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default listen backlog (5) resets connections under load


def _handler_for(gateway: Gateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet by default
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str) -> None:
            self._send(status, {"error": {"message": message, "type": kind, "code": status}})

        def _route(self) -> tuple[str, str, str | None] | None:
            match = _ROUTE.match(self.path.split("?", 1)[0])
            if not match:
                return None
            session = match["session"] or self.headers.get("X-Boltzoo-Session") or DEFAULT_SESSION
            agent = match["agent"] or self.headers.get("X-Boltzoo-Agent")
            return match["endpoint"], session, agent

        def _authorized(self) -> bool:
            if gateway.api_key is None:
                return True
            return self.headers.get("Authorization", "") == f"Bearer {gateway.api_key}"

        def do_GET(self) -> None:  # noqa: N802 (the http.server name)
            if self.path in ("/health", "/healthz"):
                self._send(200, {"status": "ok", "model": gateway.model_name})
                return
            route = self._route()
            if route is None or route[0] != "models":
                self._error(404, f"no route {self.path[:100]}", "not_found")
                return
            if not self._authorized():
                self._error(401, "a valid API key is needed (Authorization: Bearer ...)", "auth")
                return
            self._send(
                200,
                {
                    "object": "list",
                    "data": [{"id": gateway.model_name, "object": "model", "owned_by": "boltzoo"}],
                },
            )

        def do_POST(self) -> None:  # noqa: N802
            try:
                self._post()
            except GatewayError as error:
                self._error(error.status, str(error), error.kind)
            except Exception as error:  # never a crash: the client gets a 500 with the reason
                self._error(500, f"{type(error).__name__}: {error}"[:500], "server_error")

        def _post(self) -> None:
            route = self._route()
            if route is None or route[0] != "chat/completions":
                raise GatewayError(404, f"no route {self.path[:100]}", "not_found")
            if not self._authorized():
                raise GatewayError(
                    401, "a valid API key is needed (Authorization: Bearer ...)", "auth"
                )
            length = int(self.headers.get("Content-Length") or 0)
            if length > gateway.max_body_bytes:
                self.close_connection = True
                raise GatewayError(
                    413,
                    f"the request body has {length} bytes, over the limit of "
                    f"{gateway.max_body_bytes}",
                    "request_too_large",
                )
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise GatewayError(400, f"the request body is not valid JSON: {error}") from None
            _, session, agent = route
            response = gateway.chat_completion(body, session, agent)
            if isinstance(body, dict) and body.get("stream"):
                self._stream(response)
            else:
                self._send(200, response)

        def _stream(self, response: dict[str, Any]) -> None:
            # Server-sent events: the whole answer in one delta, then the end marker.
            choice = response["choices"][0]
            delta = {k: v for k, v in choice["message"].items() if v is not None}
            if "tool_calls" in delta:
                delta["tool_calls"] = [
                    dict(call, index=i) for i, call in enumerate(delta["tool_calls"])
                ]
            chunks = [
                {
                    "id": response["id"],
                    "object": "chat.completion.chunk",
                    "created": response["created"],
                    "model": response["model"],
                    "choices": [
                        {
                            "index": 0,
                            "delta": delta,
                            "finish_reason": choice["finish_reason"],
                            "token_ids": choice["token_ids"],
                        }
                    ],
                    "prompt_token_ids": response["prompt_token_ids"],
                    "usage": response["usage"],
                }
            ]
            payload = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
            payload += b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler
