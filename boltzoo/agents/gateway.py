"""An OpenAI-compatible HTTP gateway in front of a policy, recording every call with its tokens.

Agents that run elsewhere, or inside another framework (AutoGen, the OpenAI Agents SDK,
LangChain, anything with an OpenAI client), reach the model by pointing their base URL at the
gateway; nothing else in the agent changes. The gateway (FastAPI on uvicorn):

* serves ``POST /v1/chat/completions``, ``GET /v1/models`` and ``GET /health``;
* batches concurrent requests into one call of the policy (the batching window is
  ``batch_wait_s``), so many agents share the model's batch;
* returns, always, ``prompt_token_ids`` and, per choice, ``token_ids`` and per-token
  ``logprobs`` beside the standard fields (as vLLM's ``return_token_ids`` does);
* streams (``"stream": true``) as the tokens are sampled: server-sent event chunks of at most
  ``STREAM_CHUNK_TOKENS`` tokens, each with its token ids and logprobs, the usage in a last chunk
  with ``stream_options.include_usage`` (a policy that cannot stream sends its answer at the
  end; a request with ``tools`` gets its text and tool calls in one chunk at the end, once they
  are parsed);
* records each call once, attributed to a session (an episode) and an agent: by the path
  ``/sessions/{session}/v1/...`` or ``/sessions/{session}/agents/{agent}/v1/...``, or by the
  headers ``X-Boltzoo-Session`` / ``X-Boltzoo-Agent``; plain ``/v1`` is session ``"default"``.
  ``GET /sessions/{session}`` returns a session's calls, ``DELETE`` hands them over (returns
  and forgets them). Records are kept for ``record_ttl_s`` and at most ``max_records`` of them
  (the oldest go first); with ``record_to`` each call is appended to a JSON-lines file instead
  of being kept;
* renders OpenAI ``tools`` for the model (a system-prompt section) and parses the model's
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks into ``tool_calls``.

Sampling is the policy's: a request's ``temperature``, ``max_tokens`` and the like are checked
for their type, then ignored, so every recorded call was sampled as the learner assumes. Unknown
request fields are ignored (framework clients send many). Errors are OpenAI-shaped JSON: 400 for
a malformed body or a known field of the wrong type, 401 for a wrong API key, 404 for an unknown
model or route, 413 for an oversized body, 503 when the queue is full or the gateway is closing,
504 when an answer takes longer than ``request_timeout_s`` (the call is still recorded when it
ends). Loopback only unless ``host`` says otherwise.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException

from boltzoo.agents.base import Policy, Turn, as_policy
from boltzoo.episode import Completion
from boltzoo.errors import BoltzooError, PromptTooLongError

DEFAULT_SESSION = "default"
STREAM_CHUNK_TOKENS = 4  # the most tokens one streamed chunk carries
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

    def to_dict(self) -> dict[str, Any]:
        """Return the call as plain JSON values (what ``record_to`` and ``GET /sessions``
        hold)."""
        return {
            "call_id": self.call_id,
            "session": self.session,
            "agent": self.agent,
            "messages": self.messages,
            "tools": self.tools,
            "completion": self.completion.to_dict(),
            "tool_calls": self.tool_calls,
            "created": self.created,
        }


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


# --- the request body ------------------------------------------------------------------------


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    name: str | None = None
    tool_call_id: str | None = None


class _StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    """The fields of an OpenAI chat completion request the gateway knows (strict types; any
    other field is ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    model: str | None = None
    messages: list[_Message] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    stream_options: _StreamOptions | None = None
    # sampling is the policy's: these are checked, then ignored
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    user: str | None = None


def parse_request(raw: bytes) -> ChatCompletionRequest:
    """Return the validated chat completion request in ``raw`` (JSON bytes); raise a 400
    :class:`GatewayError` that names the field for anything else."""
    try:
        body = json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise GatewayError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "the request body must be a JSON object")
    try:
        request = ChatCompletionRequest.model_validate(body)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in error.errors()[:5]
        )
        raise GatewayError(400, f"invalid request: {problems}") from None
    if request.n not in (None, 1):
        raise GatewayError(400, f"n={request.n}: this gateway returns one choice (n=1)")
    return request


# --- the batcher ---------------------------------------------------------------------------


@dataclass
class _Pending:
    chat: list[dict[str, str]]
    session: str
    agent: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    stream: Any = None  # (token id, logprob) -> None, called from the batcher's thread
    future: Future = field(default_factory=Future)


class _Batcher(threading.Thread):
    """Collects requests for ``wait_s`` after the first, then calls the policy once for all;
    each answer is recorded (``record``) before its request is told."""

    def __init__(self, policy: Policy, max_batch_size: int, wait_s: float, record: Any):
        super().__init__(daemon=True, name="boltzoo-gateway-batcher")
        self.policy, self.max_batch_size, self.wait_s = policy, max_batch_size, wait_s
        self.record = record
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
        turns = [
            Turn(agent=p.agent or "agent", observation={"messages": p.chat}, stream=p.stream)
            for p in batch
        ]
        try:
            results: list[Any] = list(self.policy.act(turns))
            if len(results) != len(batch):
                raise RuntimeError(f"the policy returned {len(results)} for {len(batch)} chats")
        except Exception:
            results = []  # one by one, so that one bad prompt fails only its own request
            for turn in turns:
                turn.stream = None  # (its tokens may have been streamed already)
                try:
                    results.append(self.policy.act([turn])[0])
                except Exception as error:
                    results.append(error)
        for pending, result in zip(batch, results, strict=True):
            try:
                if isinstance(result, BaseException):
                    pending.future.set_exception(result)
                else:
                    pending.future.set_result(self.record(pending, result))
            except InvalidStateError:  # (never: the server shields its futures)
                pass


# --- the records ---------------------------------------------------------------------------


class _Records:
    """The recorded calls by session: kept ``ttl_s`` seconds and ``max_records`` at most (the
    oldest go first), or appended to a JSON-lines file and not kept."""

    def __init__(self, ttl_s: float | None, max_records: int | None, path: str | None):
        self.ttl_s, self.max_records = ttl_s, max_records
        self.sessions: dict[str, deque[tuple[int, RecordedCall]]] = {}
        self.count, self.sequence, self.dropped, self.swept = 0, 0, 0, 0.0
        self.lock = threading.Lock()
        self.file = open(Path(path), "a", encoding="utf-8") if path else None  # noqa: SIM115

    def add(self, call: RecordedCall) -> None:
        with self.lock:
            if self.file is not None:
                self.file.write(json.dumps(call.to_dict()) + "\n")
                self.file.flush()
                return
            self.sequence += 1
            self.sessions.setdefault(call.session, deque()).append((self.sequence, call))
            self.count += 1
            self._expire(call.created)

    def _expire(self, now: float) -> None:
        if self.ttl_s is not None and now - self.swept > 1.0:  # at most once a second
            self.swept, cutoff = now, now - self.ttl_s
            for session in list(self.sessions):
                kept = self.sessions[session]
                while kept and kept[0][1].created < cutoff:
                    kept.popleft()
                    self.count, self.dropped = self.count - 1, self.dropped + 1
                if not kept:
                    del self.sessions[session]
        while self.max_records is not None and self.count > self.max_records:
            oldest = min(self.sessions, key=lambda s: self.sessions[s][0][0])
            self.sessions[oldest].popleft()
            self.count, self.dropped = self.count - 1, self.dropped + 1
            if not self.sessions[oldest]:
                del self.sessions[oldest]

    def get(self, session: str | None, pop: bool = False) -> list[RecordedCall]:
        """Return the calls of ``session`` (of all, in answer order, for None); ``pop`` also
        forgets that session's."""
        with self.lock:
            if session is None:
                kept = sorted(item for calls in self.sessions.values() for item in calls)
            else:
                kept = list(self.sessions.get(session, ()))
                if pop and self.sessions.pop(session, None) is not None:
                    self.count -= len(kept)
            return [call for _, call in kept]

    def close(self) -> None:
        with self.lock:
            if self.file is not None:
                self.file.close()
                self.file = None


# --- the server ----------------------------------------------------------------------------


class Gateway:
    """An OpenAI-compatible server in front of ``policy``, recording every call (a context
    manager: entering starts it, leaving stops it).

    Args:
        policy: any policy; a model backend gives token ids and logprobs (and streams).
        host, port: where to listen (loopback; port 0 picks a free one, bound at once).
        model_name: the model id clients send (default: the policy's ``name``).
        api_key: when given, requests must carry ``Authorization: Bearer <api_key>``.
        max_batch_size, batch_wait_s: batching of concurrent requests.
        max_body_bytes: larger request bodies get 413.
        max_queue: requests waiting for the policy beyond this get 503.
        request_timeout_s: a request waiting longer for its answer gets 504.
        record_ttl_s, max_records: how long, and how many, recorded calls are kept (None: no
            limit); a session's calls are handed over by :meth:`pop_calls`.
        record_to: append every call to this JSON-lines file instead of keeping it.
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
        max_queue: int = 4096,
        request_timeout_s: float = 600.0,
        record_ttl_s: float | None = 3600.0,
        max_records: int | None = 100_000,
        record_to: str | None = None,
    ):
        self.policy = as_policy(policy)
        self.model_name = model_name or getattr(policy, "name", None) or "boltzoo"
        self.api_key = api_key
        self.max_body_bytes = int(max_body_bytes)
        self.max_queue = int(max_queue)
        self.request_timeout_s = float(request_timeout_s)
        # what a copy of this gateway in another process is made with (see __reduce__)
        self._options = dict(
            host=host,
            model_name=self.model_name,
            api_key=api_key,
            max_batch_size=max_batch_size,
            batch_wait_s=batch_wait_s,
            max_body_bytes=max_body_bytes,
            max_queue=max_queue,
            request_timeout_s=request_timeout_s,
            record_ttl_s=record_ttl_s,
            max_records=max_records,
        )
        self._records = _Records(record_ttl_s, max_records, record_to)
        self._batcher = _Batcher(self.policy, max_batch_size, batch_wait_s, self._record)
        # Bound now, so that the address is known before the server starts.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self._started = False

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """Return the ``(host, port)`` the gateway listens on."""
        return self._socket.getsockname()[:2]

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
        """Start serving (uvicorn and the batcher in background threads); return the gateway
        once it answers."""
        if self._started:
            return self
        import uvicorn

        config = uvicorn.Config(
            self._app(),
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=max(1, int(min(self.request_timeout_s, 30))),
            backlog=2048,
        )
        self._server = uvicorn.Server(config)
        self._batcher.start()
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            daemon=True,
            name="boltzoo-gateway",
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gateway's server did not start")
            time.sleep(0.005)
        self._started = True
        return self

    def close(self) -> None:
        """Stop serving: new requests get 503, those in flight finish (up to 30 s), every
        answered call stays recorded; then release the port."""
        self._closing = True
        if self._started:
            self._server.should_exit = True
            self._thread.join(timeout=60)
            self._batcher.requests.put(None)
            self._batcher.join(timeout=10)
            self._started = False
        self._socket.close()
        self._records.close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Shipped to another process (a Ray rollout worker), a gateway comes back serving the
        # copy of its policy there, started, on a free port: framework agents pickled with it
        # call the worker's model. Pickled together with that policy, the copy is the same
        # object the worker's other references hold (weights loaded there reach the gateway).
        return (_serving_gateway, (self.policy, self._options))

    # --- records ---------------------------------------------------------------------------

    def calls(self, session: str | None = None) -> list[RecordedCall]:
        """Return the recorded calls (of one session), in the order they were answered."""
        return self._records.get(session)

    def pop_calls(self, session: str) -> list[RecordedCall]:
        """Return and forget the recorded calls of ``session``."""
        return self._records.get(session, pop=True)

    @property
    def dropped_calls(self) -> int:
        """Return how many recorded calls expired (``record_ttl_s``, ``max_records``) unread."""
        return self._records.dropped

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

    def _record(self, pending: _Pending, result: Any) -> RecordedCall:
        completion = result if isinstance(result, Completion) else Completion(text=str(result))
        tool_calls = parse_tool_calls(completion.text)[1] if pending.tools else []
        call = RecordedCall(
            call_id=f"chatcmpl-{uuid.uuid4().hex}",
            session=pending.session,
            agent=pending.agent,
            messages=pending.messages,
            tools=pending.tools,
            completion=completion,
            tool_calls=tool_calls,
        )
        self._records.add(call)
        return call

    def _submit(self, request: Any, session: str, agent: str | None) -> _Pending:
        if self._closing:
            raise GatewayError(503, "the gateway is shutting down", "service_unavailable")
        if request.model is not None and request.model != self.model_name:
            raise GatewayError(
                404,
                f"unknown model {request.model[:80]!r}; this gateway serves {self.model_name!r}",
                "model_not_found",
            )
        if self._batcher.requests.qsize() >= self.max_queue:
            raise GatewayError(
                503, f"the queue is full ({self.max_queue} requests waiting)", "queue_full"
            )
        messages = [m.model_dump(exclude_none=True) for m in request.messages]
        tools = list(request.tools or [])
        pending = _Pending(
            chat=to_model_chat(messages, tools),
            session=session,
            agent=agent,
            messages=messages,
            tools=tools,
        )
        return pending

    async def _answer(self, pending: _Pending) -> RecordedCall:
        """Wait for ``pending``'s call (504 past the timeout; the call is recorded anyway)."""
        try:
            return await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(pending.future)), self.request_timeout_s
            )
        except asyncio.TimeoutError:
            raise GatewayError(
                504, f"no answer within {self.request_timeout_s:g} s", "timeout"
            ) from None
        except PromptTooLongError as error:
            raise GatewayError(400, str(error), "context_length_exceeded") from None
        except Exception as error:  # the policy failed on this request
            raise GatewayError(
                500, f"{type(error).__name__}: {error}"[:500], "server_error"
            ) from None

    def _logprobs(self, token_ids: Sequence[int], logprobs: Sequence[float]) -> dict[str, Any]:
        tokenizer = getattr(self.policy, "tokenizer", None)
        return {
            "content": [
                {
                    "token": tokenizer.decode([t]) if tokenizer is not None else str(t),
                    "logprob": lp,
                    "bytes": None,
                    "top_logprobs": [],
                }
                for t, lp in zip(token_ids, logprobs, strict=True)
            ]
        }

    def _message(self, call: RecordedCall) -> tuple[dict[str, Any], str]:
        """Return the response's message and finish reason."""
        completion = call.completion
        content = parse_tool_calls(completion.text)[0] if call.tools else completion.text
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if call.tool_calls:
            message = {"role": "assistant", "content": content or None}
            message["tool_calls"] = call.tool_calls
        finish = "tool_calls" if call.tool_calls else (completion.finish_reason or "stop")
        return message, finish

    def _usage(self, completion: Completion) -> dict[str, int]:
        prompt_tokens = completion.num_prompt_tokens or 0
        response_tokens = completion.num_response_tokens or 0
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": response_tokens,
            "total_tokens": prompt_tokens + response_tokens,
        }

    def _response(self, call: RecordedCall) -> dict[str, Any]:
        completion = call.completion
        token_ids = completion.response_token_ids
        logprobs = None
        if completion.logprobs is not None and token_ids is not None:
            logprobs = self._logprobs(token_ids, completion.logprobs)
        message, finish = self._message(call)
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
            "usage": self._usage(completion),
            "prompt_token_ids": completion.prompt_token_ids,
        }

    # --- streaming -------------------------------------------------------------------------

    async def _stream(self, pending: _Pending, include_usage: bool) -> AsyncIterator[bytes]:
        """Yield the server-sent events of ``pending``'s call as its tokens are sampled."""
        loop = asyncio.get_running_loop()
        tokens: asyncio.Queue[tuple[int, float | None] | None] = asyncio.Queue()
        tokenizer = getattr(self.policy, "tokenizer", None)
        if tokenizer is not None and not pending.tools:
            pending.stream = lambda t, lp: loop.call_soon_threadsafe(tokens.put_nowait, (t, lp))
        pending.future.add_done_callback(
            lambda _: loop.call_soon_threadsafe(tokens.put_nowait, None)
        )
        # a stop string is cut from the text at the end: hold back as many characters
        sampling = getattr(self.policy, "sampling", None)
        hold = max((len(s) for s in getattr(sampling, "stop", ())), default=0)
        chunk_id, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

        def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            chunk = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model_name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}],
            }
            return f"data: {json.dumps(chunk)}\n\n".encode()

        self._batcher.requests.put(pending)
        yield event({"role": "assistant", "content": ""})
        ids: list[int] = []
        sent = ""
        deadline = loop.time() + self.request_timeout_s
        while True:
            try:
                item = await asyncio.wait_for(tokens.get(), max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                yield _sse_error(504, f"no answer within {self.request_timeout_s:g} s", "timeout")
                return
            if item is None:
                break
            batch = [item]
            while len(batch) < STREAM_CHUNK_TOKENS and not tokens.empty():
                follow = tokens.get_nowait()
                if follow is None:
                    tokens.put_nowait(None)
                    break
                batch.append(follow)
            ids.extend(t for t, _ in batch)
            text = tokenizer.decode(ids, skip_special_tokens=True)
            ready = text[: len(text) - hold] if hold else text
            ready = ready.rstrip("\ufffd")  # a character whose bytes are not all sampled yet
            delta = ready[len(sent) :] if ready.startswith(sent) else ""
            sent += delta
            logprobs = [lp for _, lp in batch]
            extra: dict[str, Any] = {"token_ids": [t for t, _ in batch]}
            if all(lp is not None for lp in logprobs):
                extra["logprobs"] = self._logprobs(extra["token_ids"], logprobs)
            yield event({"content": delta}, **extra)
        try:
            call = pending.future.result()
        except PromptTooLongError as error:
            yield _sse_error(400, str(error), "context_length_exceeded")
            return
        except Exception as error:
            yield _sse_error(500, f"{type(error).__name__}: {error}"[:500], "server_error")
            return
        message, finish = self._message(call)
        delta: dict[str, Any] = {}
        content = message.get("content") or ""
        if content.startswith(sent):
            if content[len(sent) :]:
                delta["content"] = content[len(sent) :]
        if call.tool_calls:
            delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(call.tool_calls)]
        completion = call.completion
        unsent = completion.response_token_ids[len(ids) :] if completion.response_token_ids else []
        yield event(
            delta,
            finish,
            token_ids=unsent,
            prompt_token_ids=completion.prompt_token_ids,
        )
        if include_usage:
            chunk = {
                "id": chunk_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.model_name,
                "choices": [],
                "usage": self._usage(completion),
            }
            yield f"data: {json.dumps(chunk)}\n\n".encode()
        yield b"data: [DONE]\n\n"

    # --- the HTTP app ----------------------------------------------------------------------

    def _app(self) -> Any:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

        def error(status: int, message: str, kind: str) -> JSONResponse:
            return JSONResponse(
                {"error": {"message": message, "type": kind, "code": status}}, status_code=status
            )

        @app.exception_handler(GatewayError)
        async def refused(request: Request, exc: GatewayError) -> JSONResponse:
            return error(exc.status, str(exc), exc.kind)

        @app.exception_handler(HTTPException)
        async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
            kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
            message = f"no route {request.method} {request.url.path[:100]}"
            return error(
                exc.status_code, message if exc.status_code in (404, 405) else str(exc.detail), kind
            )

        @app.exception_handler(RequestValidationError)
        async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
            return error(400, f"invalid request: {exc.errors()[:3]}", "invalid_request_error")

        @app.exception_handler(Exception)
        async def crashed(request: Request, exc: Exception) -> JSONResponse:
            # never a crash: the client gets a 500 with the reason
            return error(500, f"{type(exc).__name__}: {exc}"[:500], "server_error")

        def authorize(request: Request) -> None:
            if self.api_key is None:
                return
            if request.headers.get("authorization", "") != f"Bearer {self.api_key}":
                raise GatewayError(
                    401, "a valid API key is needed (Authorization: Bearer ...)", "auth"
                )

        async def body_of(request: Request) -> bytes:
            length = request.headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
                raise GatewayError(
                    413,
                    f"the request body has {length} bytes, over the limit of {self.max_body_bytes}",
                    "request_too_large",
                )
            chunks, size = [], 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > self.max_body_bytes:
                    raise GatewayError(
                        413,
                        f"the request body is over the limit of {self.max_body_bytes} bytes",
                        "request_too_large",
                    )
                chunks.append(chunk)
            return b"".join(chunks)

        @app.get("/health")
        @app.get("/healthz")
        async def health() -> dict[str, Any]:
            return {"status": "ok", "model": self.model_name}

        async def models(request: Request) -> dict[str, Any]:
            authorize(request)
            return {
                "object": "list",
                "data": [{"id": self.model_name, "object": "model", "owned_by": "boltzoo"}],
            }

        async def chat(
            request: Request, session: str | None = None, agent: str | None = None
        ) -> Any:
            authorize(request)
            parsed = parse_request(await body_of(request))
            session = session or request.headers.get("x-boltzoo-session") or DEFAULT_SESSION
            agent = agent or request.headers.get("x-boltzoo-agent")
            pending = self._submit(parsed, session, agent)
            if parsed.stream:
                include_usage = bool(parsed.stream_options and parsed.stream_options.include_usage)
                return StreamingResponse(
                    self._stream(pending, include_usage), media_type="text/event-stream"
                )
            self._batcher.requests.put(pending)
            return self._response(await self._answer(pending))

        for prefix in ("", "/sessions/{session}", "/sessions/{session}/agents/{agent}"):
            app.add_api_route(f"{prefix}/v1/models", models, methods=["GET"])
            app.add_api_route(f"{prefix}/v1/chat/completions", chat, methods=["POST"])

        @app.get("/sessions/{session}")
        async def session_calls(request: Request, session: str) -> dict[str, Any]:
            authorize(request)
            return {"session": session, "calls": [c.to_dict() for c in self.calls(session)]}

        @app.delete("/sessions/{session}")
        async def hand_over(request: Request, session: str) -> dict[str, Any]:
            authorize(request)
            return {"session": session, "calls": [c.to_dict() for c in self.pop_calls(session)]}

        return app


def _sse_error(status: int, message: str, kind: str) -> bytes:
    payload = {"error": {"message": message, "type": kind, "code": status}}
    return f"data: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode()


def _serving_gateway(policy: Policy, options: dict[str, Any]) -> Gateway:
    return Gateway(policy, **options).start()
