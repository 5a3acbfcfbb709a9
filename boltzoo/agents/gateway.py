"""An OpenAI- and Anthropic-compatible HTTP gateway in front of policies, recording every call
with its tokens.

Agents that run elsewhere, or inside another framework (AutoGen, the OpenAI Agents SDK,
LangChain, anything with an OpenAI or Anthropic client), reach the model by pointing their base
URL at the gateway; nothing else in the agent changes. The gateway (FastAPI on uvicorn):

* serves ``POST /v1/chat/completions``, the Responses API (``POST /v1/responses``), Anthropic's
  Messages API (``POST /v1/messages``), legacy completions (``POST /v1/completions``, a prompt
  as text or token ids), ``GET /v1/models`` and ``GET /health`` (``protocols.py`` holds the
  other APIs' formats; every call is recorded in chat form, whichever API asked);
* batches concurrent requests into one call of the policy, so many agents share the model's
  batch: a batch takes the requests that come within ``batch_wait_s`` of its first; while
  sessions are open (agent programs, framework agents) it waits instead until every open
  session has a request pending, here or at a gateway the session is linked to
  (``open_linked_session``: a graph whose nodes have gateways of their own), at most
  ``session_wait_s``: the calls of episodes that advance together go to the model together;
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
* routes each agent's calls to its own policy (``routes``), so that one endpoint serves a
  team whose agents train apart (or call the frozen model);
* serves sessions opened for agent programs (``open_session``) with their own key, and with
  ``require_session`` nothing else (a turn that has ended gets 409);
* holds new calls while the weights change (``paused()``: the batch in flight finishes first);
* renders OpenAI ``tools`` for the model (a system-prompt section) and parses the model's
  ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks into ``tool_calls``.

Sampling is the policy's: a request's ``temperature``, ``max_tokens`` and the like are checked
(their type, and OpenAI's ranges), then ignored, so every recorded call was sampled as the
learner assumes. Unknown request fields are ignored (framework clients send many). Errors are
OpenAI-shaped JSON (Anthropic-shaped on ``/v1/messages``): 400 for a malformed body (not JSON,
``NaN``, nesting deeper than ``MAX_JSON_DEPTH``, a string that is not valid Unicode) or a known
field of the wrong type or range, 401 for a wrong API key (``Authorization: Bearer`` or
``x-api-key``), 404 for an unknown model, agent or route, 408 for a body not received within
``body_timeout_s``, 409 for a session that is not open, 413 for an oversized body, 429 (with
``Retry-After``) past ``max_pending`` requests, 503 when the gateway is closing, 504 when an
answer takes longer than ``request_timeout_s`` (the call is still recorded when it ends; 409,
500 and 504 tell the SDKs not to retry). Loopback only unless ``host`` says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import re
import secrets
import socket
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from boltzoo.agents.base import Policy, Turn, as_policy
from boltzoo.episode import Completion
from boltzoo.errors import BoltzooError, PromptTooLongError

LOG = logging.getLogger("boltzoo.gateway")

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
    protocol: str = "chat.completions"  # the API it was asked through (responses, messages...)

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
            "protocol": self.protocol,
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


def tool_call_text(name: str, arguments: dict[str, Any]) -> str:
    """Return a tool call in the syntax :func:`parse_tool_calls` reads (what the gateway tells
    the model to write)."""
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


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
    # sampling is the policy's: these are checked (OpenAI's ranges), then ignored
    temperature: float | None = Field(default=None, ge=0, le=2, allow_inf_nan=False)
    top_p: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    n: int | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    user: str | None = None


MAX_JSON_DEPTH = 64  # far above any real request; a deeper body is refused before it is walked


def _refuse_constant(name: str) -> Any:
    raise GatewayError(400, f"the request body holds {name}, which is not a JSON number")


def parse_body(raw: bytes) -> dict[str, Any]:
    """Return the JSON object in ``raw``; raise a 400 :class:`GatewayError` for anything else:
    not JSON, not an object, ``NaN`` or ``Infinity``, nesting deeper than ``MAX_JSON_DEPTH``,
    or a string that is not valid Unicode (a lone surrogate escape)."""
    try:
        body = json.loads(raw or b"null", parse_constant=_refuse_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise GatewayError(400, f"the request body is not valid JSON: {error}") from None
    except RecursionError:
        raise GatewayError(
            400, f"the request body is nested deeper than {MAX_JSON_DEPTH} levels"
        ) from None
    if not isinstance(body, dict):
        raise GatewayError(400, "the request body must be a JSON object")
    # one walk, without recursion: depth, and strings a tokenizer (UTF-8) can take
    stack: list[tuple[Any, int]] = [(body, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise GatewayError(
                400, f"the request body is nested deeper than {MAX_JSON_DEPTH} levels"
            )
        if isinstance(value, dict):
            items = list(value.keys()) + list(value.values())
        elif isinstance(value, list):
            items = value
        else:
            items = (value,)
        for item in items:
            if isinstance(item, str):
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    raise GatewayError(
                        400, f"the request holds a string that is not valid Unicode: {item!r:.60}"
                    ) from None
            elif isinstance(item, dict | list):
                stack.append((item, depth + 1))
    return body


def validated(model: type[BaseModel], body: dict[str, Any]) -> Any:
    """Return ``body`` validated as ``model``; raise a 400 :class:`GatewayError` that names the
    fields that are wrong."""
    try:
        return model.model_validate(body)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in error.errors()[:5]
        )
        raise GatewayError(400, f"invalid request: {problems}") from None


def parse_request(raw: bytes) -> ChatCompletionRequest:
    """Return the validated chat completion request in ``raw`` (JSON bytes); raise a 400
    :class:`GatewayError` that names the field for anything else."""
    request = validated(ChatCompletionRequest, parse_body(raw))
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
    protocol: str = "chat.completions"
    prompt_token_ids: list[int] | None = None  # a prompt given as token ids (no chat template)
    # the id the client is given for the call (its protocol's form), and the record's
    call_id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")
    stream: Any = None  # (token id, logprob) -> None, called from the batcher's thread
    env: Any = None  # its session's env (Gateway.open_session), given to the policy's turn
    future: Future = field(default_factory=Future)

    def turn(self) -> Turn:
        """Return the policy's turn for this request."""
        observation: dict[str, Any] = {"messages": self.chat}
        if self.prompt_token_ids is not None:
            observation["prompt_token_ids"] = self.prompt_token_ids
        return Turn(
            agent=self.agent or "agent", observation=observation, env=self.env, stream=self.stream
        )


class _Batcher(threading.Thread):
    """Collects requests for ``wait_s`` after the first, then calls the policy once for all;
    each answer is recorded (``record``) before its request is told.

    ``expected()`` says how many open sessions may be about to ask (None: no session is open);
    while it is known, a batch is cut once the queue is empty and nobody is about to ask, or
    ``session_wait_s`` after its first request, whichever comes first.

    ``pause()`` holds the batches not yet started (requests wait in the queue) and returns once
    the batch in flight, if any, has finished; ``resume()`` lets them go (a weight sync between
    the two never meets a half-sampled call)."""

    def __init__(
        self,
        policy: Policy,
        max_batch_size: int,
        wait_s: float,
        record: Any,
        expected: Callable[[], int | None],
        session_wait_s: float,
    ):
        super().__init__(daemon=True, name="boltzoo-gateway-batcher")
        self.policy, self.max_batch_size, self.wait_s = policy, max_batch_size, wait_s
        self.session_wait_s = session_wait_s
        self.record = record
        self.expected = expected
        self.requests: queue.Queue[_Pending | None] = queue.Queue()
        self.batch_sizes: deque[int] = deque(maxlen=10_000)  # the recent ones
        self.batches = self.requests_served = 0
        self.open = threading.Event()
        self.open.set()
        self.busy = threading.Lock()  # held while a batch is served

    def pause(self) -> None:
        self.open.clear()
        with self.busy:  # the batch in flight (if any) finishes first
            pass

    def resume(self) -> None:
        self.open.set()

    def run(self) -> None:
        while True:
            first = self.requests.get()
            if first is None:
                return
            batch, started = [first], time.monotonic()
            while len(batch) < self.max_batch_size:
                about_to_ask = self.expected()
                if about_to_ask is None:  # nobody known: the plain window
                    left = started + self.wait_s - time.monotonic()
                else:
                    # cut the batch as soon as nobody else is about to ask
                    if self.requests.empty() and about_to_ask <= 0:
                        break
                    wait_s = max(self.wait_s, self.session_wait_s)
                    left = min(started + wait_s - time.monotonic(), 0.005)  # (polls)
                try:
                    item = self.requests.get(timeout=max(0.0, left))
                except queue.Empty:
                    if left <= 0.0 or about_to_ask is None:  # the wait is over
                        break
                    continue
                if item is None:
                    self.requests.put(None)  # stop after this batch
                    break
                batch.append(item)
            while True:
                with self.busy:
                    if self.open.is_set():  # (checked holding busy: pause() waits for us)
                        self._serve(batch)
                        break
                self.open.wait()

    def _serve(self, batch: list[_Pending]) -> None:
        self.batch_sizes.append(len(batch))
        self.batches += 1
        self.requests_served += len(batch)
        turns = [p.turn() for p in batch]
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


class _TokenFeed:
    """The tokens of one pending call as they are sampled (streamed responses of every
    protocol): text deltas with their token ids and logprobs, then the recorded call.

    A request with tools streams nothing until the end (its text and tool calls are parsed
    then); a policy that cannot stream sends its whole answer at the end."""

    def __init__(self, gateway: Gateway, pending: _Pending):
        self.gateway, self.pending = gateway, pending
        self.loop = asyncio.get_running_loop()
        self.tokens: asyncio.Queue[tuple[int, float | None] | None] = asyncio.Queue()
        policy = gateway._policy_of(pending.agent)
        self.tokenizer = getattr(policy, "tokenizer", None)
        if self.tokenizer is not None and not pending.tools:
            pending.stream = lambda t, lp: self.loop.call_soon_threadsafe(
                self.tokens.put_nowait, (t, lp)
            )
        pending.future.add_done_callback(
            lambda _: self.loop.call_soon_threadsafe(self.tokens.put_nowait, None)
        )
        # a stop string is cut from the text at the end: hold back as many characters
        sampling = getattr(policy, "sampling", None)
        self.hold = max((len(s) for s in getattr(sampling, "stop", ())), default=0)
        self.ids: list[int] = []
        self.sent = ""  # the text sent so far

    async def deltas(self) -> AsyncIterator[tuple[str, list[int], list[float | None]]]:
        """Yield ``(text delta, token ids, logprobs)`` of at most ``STREAM_CHUNK_TOKENS``
        tokens each, as they come; raise a 504 :class:`GatewayError` past the timeout."""
        deadline = self.loop.time() + self.gateway.request_timeout_s
        while True:
            try:
                item = await asyncio.wait_for(
                    self.tokens.get(), max(0.0, deadline - self.loop.time())
                )
            except asyncio.TimeoutError:
                raise GatewayError(
                    504, f"no answer within {self.gateway.request_timeout_s:g} s", "timeout"
                ) from None
            if item is None:
                return
            batch = [item]
            while len(batch) < STREAM_CHUNK_TOKENS and not self.tokens.empty():
                follow = self.tokens.get_nowait()
                if follow is None:
                    self.tokens.put_nowait(None)
                    break
                batch.append(follow)
            self.ids.extend(t for t, _ in batch)
            text = self.tokenizer.decode(self.ids, skip_special_tokens=True)
            ready = text[: len(text) - self.hold] if self.hold else text
            ready = ready.rstrip("\ufffd")  # a character whose bytes are not all sampled yet
            delta = ready[len(self.sent) :] if ready.startswith(self.sent) else ""
            self.sent += delta
            yield delta, [t for t, _ in batch], [lp for _, lp in batch]

    def call(self) -> RecordedCall:
        """Return the recorded call once :meth:`deltas` has ended (or raise its error as a
        :class:`GatewayError`)."""
        try:
            return self.pending.future.result()
        except PromptTooLongError as error:
            raise GatewayError(400, str(error), "context_length_exceeded") from None
        except Exception as error:
            raise GatewayError(
                500, f"{type(error).__name__}: {error}"[:500], "server_error"
            ) from None

    def unsent(self, completion: Completion) -> list[int]:
        """Return the response token ids not streamed yet."""
        ids = completion.response_token_ids or []
        return ids[len(self.ids) :]


class BackgroundServer:
    """An ASGI app served by uvicorn in a background thread, on a socket bound at once (so
    that its address is known before it serves): the gateway's and the agent hub's."""

    def __init__(self, host: str, port: int, name: str):
        self.name = name
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.server: Any = None
        self.thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """Return the ``(host, port)`` it listens on."""
        return self.socket.getsockname()[:2]

    @property
    def url(self) -> str:
        """Return ``http://host:port``."""
        host, port = self.address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def serving(self) -> bool:
        """Return whether it serves (started and not stopped)."""
        return self.thread is not None

    def start(self, app: Any, graceful_s: int, backlog: int = 2048) -> None:
        """Serve ``app``; return once it answers (``graceful_s``: how long a stop waits for
        requests in flight)."""
        import uvicorn

        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=graceful_s,
            backlog=backlog,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True, name=self.name
        )
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} server did not start")
            time.sleep(0.005)

    def stop(self) -> None:
        """Stop serving (requests in flight finish first), then release the port."""
        if self.thread is not None:
            self.server.should_exit = True
            self.thread.join(timeout=60)
            self.thread = None
        self.socket.close()


@dataclass
class _Session:
    """A session opened by :meth:`Gateway.open_session` (an agent program's rollout), or by
    :func:`open_linked_session` on several gateways at once (one object, shared by them)."""

    token: str | None
    on_request: Any = None  # called with no argument on every request (a sign of life)
    pending: int = 0  # its requests not answered yet (at every gateway that shares it)
    env: Any = None  # the env of the turn whose calls these are (its policy's Turn.env)
    lock: threading.Lock = field(default_factory=threading.Lock)  # (gateways share the count)

    def count(self, change: int) -> None:
        with self.lock:
            self.pending += change


class Gateway:
    """An OpenAI-compatible server in front of ``policy``, recording every call (a context
    manager: entering starts it, leaving stops it).

    Args:
        policy: any policy; a model backend gives token ids and logprobs (and streams). May be
            None when ``routes`` serve every agent.
        host: where to listen (loopback).
        port: the port (0 picks a free one, bound at once).
        routes: agent name -> the policy that serves that agent's calls (the name comes from
            the URL, ``.../agents/{agent}/v1``, or ``X-Boltzoo-Agent``); other calls go to
            ``policy`` (with ``policy=None`` they get 404).
        model_name: the model id clients send (default: the policy's ``name``).
        api_key: when given, requests must carry it (``Authorization: Bearer <api_key>`` or
            ``x-api-key``), except in a session opened with a token of its own.
        max_batch_size: concurrent requests sampled together at most.
        batch_wait_s: a batch waits this long after its first request for more, while no
            session is open.
        session_wait_s: while sessions are open (:meth:`open_session`), a batch waits for more
            only while an open session has no request pending (its agent is about to ask: the
            calls of episodes that advance together go to the model together), and at most
            this long after its first request.
        max_body_bytes: larger request bodies get 413.
        body_timeout_s: a request body not received within this gets 408.
        max_pending: requests waiting for or in the policy beyond this get 429 (with
            ``Retry-After``).
        request_timeout_s: a request waiting longer for its answer gets 504.
        record_ttl_s: how long recorded calls are kept (None: no limit); a session's calls
            are handed over by :meth:`pop_calls`.
        max_records: how many recorded calls are kept at most (None: no limit).
        record_to: append every call to this JSON-lines file instead of keeping it.
        require_session: serve only sessions opened by :meth:`open_session` (others get 409):
            what agent programs get, so that nothing reaches the model for a rollout that
            has ended.
    """

    def __init__(
        self,
        policy: Policy | Any = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        routes: Mapping[str, Policy | Any] | None = None,
        model_name: str | None = None,
        api_key: str | None = None,
        max_batch_size: int = 64,
        batch_wait_s: float = 0.01,
        session_wait_s: float = 0.25,
        max_body_bytes: int = 4_000_000,
        body_timeout_s: float = 10.0,
        max_pending: int = 4096,
        request_timeout_s: float = 600.0,
        record_ttl_s: float | None = 3600.0,
        max_records: int | None = 100_000,
        record_to: str | None = None,
        require_session: bool = False,
    ):
        if policy is None and not routes:
            raise ValueError("a gateway needs a policy, or routes for the agents it serves")
        self.routes = {agent: as_policy(p) for agent, p in (routes or {}).items()}
        self.default_policy = as_policy(policy) if policy is not None else None
        # the policy whose tokenizer and version label the gateway: the default, else a route's
        self.policy = (
            self.default_policy
            if self.default_policy is not None
            else next(iter(self.routes.values()))
        )
        names = [getattr(p, "name", None) for p in (policy, *self.routes.values()) if p is not None]
        self.model_name = model_name or next((n for n in names if n), None) or "boltzoo"
        self.api_key = api_key
        self.max_body_bytes = int(max_body_bytes)
        self.body_timeout_s = float(body_timeout_s)
        self.max_pending = int(max_pending)
        self.request_timeout_s = float(request_timeout_s)
        self.require_session = bool(require_session)
        # what a copy of this gateway in another process is made with (see __reduce__)
        self._options = dict(
            host=host,
            model_name=self.model_name,
            api_key=api_key,
            max_batch_size=max_batch_size,
            batch_wait_s=batch_wait_s,
            session_wait_s=session_wait_s,
            max_body_bytes=max_body_bytes,
            body_timeout_s=body_timeout_s,
            max_pending=max_pending,
            request_timeout_s=request_timeout_s,
            record_ttl_s=record_ttl_s,
            max_records=max_records,
            require_session=require_session,
        )
        self._records = _Records(record_ttl_s, max_records, record_to)
        # one batcher per distinct policy: the agents a policy serves share its batches
        self._batchers: dict[int, _Batcher] = {}
        for served in (self.default_policy, *self.routes.values()):
            if served is not None and id(served) not in self._batchers:
                self._batchers[id(served)] = _Batcher(
                    served,
                    max_batch_size,
                    batch_wait_s,
                    self._record,
                    expected=self._sessions_to_ask,
                    session_wait_s=session_wait_s,
                )
        self._sessions: dict[str, _Session] = {}
        self._pending = 0  # requests submitted and not yet answered
        self._lock = threading.Lock()
        self._serving = BackgroundServer(host, port, "boltzoo-gateway")
        self._closing = False

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def address(self) -> tuple[str, int]:
        """Return the ``(host, port)`` the gateway listens on."""
        return self._serving.address

    @property
    def root_url(self) -> str:
        """Return ``http://host:port``, the server's root."""
        return self._serving.url

    @property
    def base_url(self) -> str:
        """Return the OpenAI base URL of session ``"default"``: ``http://host:port/v1``."""
        return f"{self.root_url}/v1"

    def session_url(self, session: str, agent: str | None = None) -> str:
        """Return the base URL whose calls are recorded under ``session`` (and ``agent``)."""
        agent_part = f"/agents/{agent}" if agent else ""
        return f"{self.root_url}/sessions/{session}{agent_part}/v1"

    def start(self) -> Gateway:
        """Start serving (uvicorn and the batchers in background threads); return the gateway
        once it answers."""
        if self._serving.serving:
            return self
        for batcher in self._batchers.values():
            batcher.start()
        self._serving.start(self._app(), graceful_s=max(1, int(min(self.request_timeout_s, 30))))
        return self

    def close(self) -> None:
        """Stop serving: new requests get 503, those in flight finish (up to 30 s), every
        answered call stays recorded; then release the port."""
        self._closing = True
        started = self._serving.serving
        self._serving.stop()
        if started:
            for batcher in self._batchers.values():
                batcher.resume()
                batcher.requests.put(None)
                batcher.join(timeout=10)
        self._records.close()

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Shipped to another process (a Ray rollout worker), a gateway comes back serving the
        # copy of its policies there, started, on a free port: framework agents pickled with it
        # call the worker's model. Pickled together with those policies, the copies are the
        # same objects the worker's other references hold (weights loaded there reach the
        # gateway).
        return (_serving_gateway, (self.default_policy, self.routes, self._options))

    # --- sessions and weight syncs ---------------------------------------------------------

    def open_session(
        self, session: str, token: str | None = None, on_request: Any = None, env: Any = None
    ) -> None:
        """Serve ``session`` (with ``require_session``, only opened sessions are served):
        requests to it must carry ``token`` as their API key when one is given (the gateway's
        own ``api_key`` is then not needed); ``on_request()`` is called on each of them. With
        ``env``, the policy's turns for its calls carry it (``Turn.env``): a scripted policy
        behind a framework agent then knows the task of each call, however many episodes play
        at once."""
        self._open(session, _Session(token, on_request, env=env))

    def _open(self, session: str, opened: _Session) -> None:
        with self._lock:
            self._sessions[session] = opened

    def close_session(self, session: str) -> list[RecordedCall]:
        """Stop serving ``session`` (later requests get 409, as any unopened session's with
        ``require_session``); return and forget its recorded calls."""
        with self._lock:
            self._sessions.pop(session, None)
        return self.pop_calls(session)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Within the block, no new call reaches a policy (new requests wait; they are not
        refused) and none is in flight: the block may change the weights (a learner's sync),
        and every call after it is sampled by the new ones."""
        batchers = list(self._batchers.values())
        try:
            for batcher in batchers:
                batcher.pause()
            yield
        finally:
            for batcher in batchers:
                batcher.resume()

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
        """Return how many requests each recent policy call served (the last 10,000 of each
        policy), in order (of every policy's batches together)."""
        return [n for b in self._batchers.values() for n in b.batch_sizes]

    @property
    def mean_batch_size(self) -> float:
        """Return the mean number of requests served per policy call so far."""
        batches = sum(b.batches for b in self._batchers.values())
        served = sum(b.requests_served for b in self._batchers.values())
        return served / batches if batches else 0.0

    # --- one request -----------------------------------------------------------------------

    def _record(self, pending: _Pending, result: Any) -> RecordedCall:
        completion = result if isinstance(result, Completion) else Completion(text=str(result))
        tool_calls = parse_tool_calls(completion.text)[1] if pending.tools else []
        call = RecordedCall(
            call_id=pending.call_id,
            session=pending.session,
            agent=pending.agent,
            messages=pending.messages,
            tools=pending.tools,
            completion=completion,
            tool_calls=tool_calls,
            protocol=pending.protocol,
        )
        self._records.add(call)
        return call

    def _policy_of(self, agent: str | None) -> Policy:
        """Return the policy that serves ``agent``'s calls (404 when none does)."""
        if agent is not None and agent in self.routes:
            return self.routes[agent]
        if self.default_policy is None:
            raise GatewayError(
                404,
                f"no model serves agent {agent!r} here; the agents are {sorted(self.routes)} "
                f"(name one in the URL: .../agents/NAME/v1)",
                "agent_not_found",
            )
        return self.default_policy

    def _admit(self, request: Request, session: str | None, agent: str | None) -> tuple[str, Any]:
        """Check who may ask (the API key, the session) and return ``(session, agent)``."""
        session = session or request.headers.get("x-boltzoo-session") or DEFAULT_SESSION
        agent = agent or request.headers.get("x-boltzoo-agent")
        key = _api_key(request)
        opened = self._sessions.get(session)
        if opened is None and self.require_session:
            raise GatewayError(
                409, f"session {session[:80]!r} is not open (its rollout has ended?)", "conflict"
            )
        if opened is not None and opened.token is not None:
            if not (_same_key(key, opened.token) or _same_key(key, self.api_key)):
                raise GatewayError(401, "a valid API key is needed for this session", "auth")
        elif self.api_key is not None and not _same_key(key, self.api_key):
            raise GatewayError(
                401, "a valid API key is needed (Authorization: Bearer ... or x-api-key)", "auth"
            )
        if opened is not None and opened.on_request is not None:
            opened.on_request()
        return session, agent

    def _submit(self, pending: _Pending, model: str | None) -> _Pending:
        """Check ``pending`` may be served now (the model it names, the load) and count it."""
        if self._closing:
            raise GatewayError(503, "the gateway is shutting down", "service_unavailable")
        if model is not None and model != self.model_name:
            raise GatewayError(
                404,
                f"unknown model {model[:80]!r}; this gateway serves {self.model_name!r}",
                "model_not_found",
            )
        self._policy_of(pending.agent)  # 404 for an agent nobody serves
        with self._lock:
            if self._pending >= self.max_pending:
                raise GatewayError(
                    429,
                    f"{self._pending} requests are pending (max_pending={self.max_pending}); "
                    "retry after a second",
                    "rate_limit_exceeded",
                )
            self._pending += 1
            opened = self._sessions.get(pending.session)
            if opened is not None:
                opened.count(+1)
                pending.env = opened.env
        pending.future.add_done_callback(lambda _: self._done(pending))
        return pending

    def _done(self, pending: _Pending) -> None:
        with self._lock:
            self._pending -= 1
            opened = self._sessions.get(pending.session)
            if opened is not None:
                opened.count(-1)

    def _sessions_to_ask(self) -> int | None:
        """Return how many open sessions have no request pending, here or at a gateway they
        are linked to (each may be about to ask); None while no session is open."""
        with self._lock:
            if not self._sessions:
                return None
            return sum(1 for opened in self._sessions.values() if opened.pending <= 0)

    def _enqueue(self, pending: _Pending) -> None:
        self._batchers[id(self._policy_of(pending.agent))].requests.put(pending)

    def _new_request(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        session: str,
        agent: str | None,
        model: str | None,
        protocol: str = "chat.completions",
        prefix: str = "chatcmpl-",
    ) -> _Pending:
        """Return a submitted request for the chat ``messages`` with OpenAI ``tools``."""
        pending = _Pending(
            chat=to_model_chat(messages, tools),
            session=session,
            agent=agent,
            messages=messages,
            tools=tools,
            protocol=protocol,
            call_id=f"{prefix}{uuid.uuid4().hex}",
        )
        return self._submit(pending, model)

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

    def _token_logprobs(
        self, token_ids: Sequence[int] | None, logprobs: Sequence[float | None] | None
    ) -> list[dict[str, Any]]:
        """Return OpenAI's per-token logprob entries (empty when the policy gave none)."""
        if token_ids is None or logprobs is None or any(lp is None for lp in logprobs):
            return []
        return self._logprobs(token_ids, logprobs)["content"]

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

    def _feed(self, pending: _Pending) -> _TokenFeed:
        """Return the feed of ``pending``'s tokens as they are sampled; queue the request."""
        feed = _TokenFeed(self, pending)
        self._enqueue(pending)
        return feed

    async def _chat_stream(self, feed: _TokenFeed, include_usage: bool) -> AsyncIterator[bytes]:
        """Yield the chat completion chunks (server-sent events) of ``feed``'s call."""
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

        yield event({"role": "assistant", "content": ""})
        try:
            async for delta, ids, logprobs in feed.deltas():
                extra: dict[str, Any] = {"token_ids": ids}
                if all(lp is not None for lp in logprobs):
                    extra["logprobs"] = self._logprobs(ids, logprobs)
                yield event({"content": delta}, **extra)
            call = feed.call()
        except GatewayError as error:
            yield _sse_error(error.status, str(error), error.kind)
            return
        message, finish = self._message(call)
        delta: dict[str, Any] = {}
        content = message.get("content") or ""
        if content.startswith(feed.sent) and content[len(feed.sent) :]:
            delta["content"] = content[len(feed.sent) :]
        if call.tool_calls:
            delta["tool_calls"] = [dict(c, index=i) for i, c in enumerate(call.tool_calls)]
        completion = call.completion
        yield event(
            delta,
            finish,
            token_ids=feed.unsent(completion),
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

    async def _body(self, request: Request) -> bytes:
        return await read_body(request, self.max_body_bytes, self.body_timeout_s)

    def _app(self) -> Any:
        from boltzoo.agents import protocols

        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

        def error(status: int, message: str, kind: str) -> JSONResponse:
            return JSONResponse(
                {"error": {"message": message, "type": kind, "code": status}},
                status_code=status,
                headers=_retry_headers(status),
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

        def administer(request: Request) -> None:
            """Reading and handing over records needs the gateway's own key, when it has one."""
            if self.api_key is not None and not _same_key(_api_key(request), self.api_key):
                raise GatewayError(401, "a valid API key is needed", "auth")

        @app.get("/health")
        @app.get("/healthz")
        async def health() -> dict[str, Any]:
            return {"status": "ok", "model": self.model_name}

        async def models(
            request: Request, session: str | None = None, agent: str | None = None
        ) -> dict[str, Any]:
            self._admit(request, session, agent)
            return {
                "object": "list",
                "data": [{"id": self.model_name, "object": "model", "owned_by": "boltzoo"}],
            }

        def streamed(events: AsyncIterator[bytes]) -> StreamingResponse:
            return StreamingResponse(events, media_type="text/event-stream")

        async def chat(
            request: Request, session: str | None = None, agent: str | None = None
        ) -> Any:
            session, agent = self._admit(request, session, agent)
            parsed = parse_request(await self._body(request))
            messages = [m.model_dump(exclude_none=True) for m in parsed.messages]
            pending = self._new_request(
                messages, list(parsed.tools or []), session, agent, parsed.model
            )
            if parsed.stream:
                include_usage = bool(parsed.stream_options and parsed.stream_options.include_usage)
                return streamed(self._chat_stream(self._feed(pending), include_usage))
            self._enqueue(pending)
            return self._response(await self._answer(pending))

        async def responses(
            request: Request, session: str | None = None, agent: str | None = None
        ) -> Any:
            session, agent = self._admit(request, session, agent)
            parsed = validated(protocols.ResponsesRequest, parse_body(await self._body(request)))
            messages, tools = protocols.responses_chat(parsed)
            pending = self._new_request(
                messages, tools, session, agent, parsed.model, "responses", "resp_"
            )
            if parsed.stream:
                return streamed(
                    protocols.responses_events(
                        self._feed(pending), self.model_name, self._token_logprobs
                    )
                )
            self._enqueue(pending)
            call = await self._answer(pending)
            return protocols.responses_body(call, self.model_name, self._token_logprobs)

        async def messages(
            request: Request, session: str | None = None, agent: str | None = None
        ) -> Any:
            try:  # Anthropic clients read errors in Anthropic's shape
                session, agent = self._admit(request, session, agent)
                body = parse_body(await self._body(request))
                parsed = validated(protocols.MessagesRequest, body)
                chat, tools = protocols.messages_chat(parsed)
                pending = self._new_request(
                    chat, tools, session, agent, parsed.model, "messages", "msg_"
                )
                if parsed.stream:
                    return streamed(protocols.messages_events(self._feed(pending), self.model_name))
                self._enqueue(pending)
                return protocols.messages_body(await self._answer(pending), self.model_name)
            except GatewayError as refused:
                body = protocols.anthropic_error(refused.status, str(refused))
                return JSONResponse(
                    body, status_code=refused.status, headers=_retry_headers(refused.status)
                )

        async def completions(
            request: Request, session: str | None = None, agent: str | None = None
        ) -> Any:
            session, agent = self._admit(request, session, agent)
            parsed = validated(protocols.CompletionRequest, parse_body(await self._body(request)))
            policy = self._policy_of(agent)
            if not getattr(policy, "accepts_prompt_ids", False):
                raise GatewayError(400, "this model takes chat requests only (no raw prompts)")
            prompts = protocols.completion_prompts(parsed, getattr(policy, "tokenizer", None))
            if parsed.stream and len(prompts) > 1:
                raise GatewayError(400, "stream one prompt at a time")
            pendings = []
            for text, ids in prompts:
                pending = _Pending(
                    chat=[{"role": "user", "content": text}],
                    session=session,
                    agent=agent,
                    messages=[{"role": "user", "content": text}],
                    tools=[],
                    protocol="completions",
                    prompt_token_ids=ids,
                    call_id=f"cmpl-{uuid.uuid4().hex}",
                )
                pendings.append(self._submit(pending, parsed.model))
            if parsed.stream:
                options = parsed.stream_options or {}
                return streamed(
                    protocols.completions_events(
                        self._feed(pendings[0]),
                        self.model_name,
                        bool(options.get("include_usage")),
                    )
                )
            for pending in pendings:
                self._enqueue(pending)
            calls = [await self._answer(pending) for pending in pendings]
            return protocols.completions_body(
                calls, self.model_name, policy.tokenizer, parsed.logprobs is not None
            )

        for prefix in ("", "/sessions/{session}", "/sessions/{session}/agents/{agent}"):
            app.add_api_route(f"{prefix}/v1/models", models, methods=["GET"])
            app.add_api_route(f"{prefix}/v1/chat/completions", chat, methods=["POST"])
            app.add_api_route(f"{prefix}/v1/responses", responses, methods=["POST"])
            app.add_api_route(f"{prefix}/v1/messages", messages, methods=["POST"])
            app.add_api_route(f"{prefix}/v1/completions", completions, methods=["POST"])

        @app.get("/sessions/{session}")
        async def session_calls(request: Request, session: str) -> dict[str, Any]:
            administer(request)
            return {"session": session, "calls": [c.to_dict() for c in self.calls(session)]}

        @app.delete("/sessions/{session}")
        async def hand_over(request: Request, session: str) -> dict[str, Any]:
            administer(request)
            return {"session": session, "calls": [c.to_dict() for c in self.pop_calls(session)]}

        return app


def open_linked_session(gateways: Sequence[Gateway], session: str, env: Any = None) -> None:
    """Open ``session`` on each of ``gateways`` as one session (a graph whose nodes call
    gateways of their own): a request of it pending at any of them counts at all, so a gateway
    waiting to fill a batch knows the session is waiting elsewhere, not about to ask it.
    ``env`` as in :meth:`Gateway.open_session`; close it on each gateway
    (:meth:`Gateway.close_session`)."""
    shared = _Session(None, env=env)
    for gateway in {id(g): g for g in gateways}.values():
        gateway._open(session, shared)


def _sse_error(status: int, message: str, kind: str) -> bytes:
    payload = {"error": {"message": message, "type": kind, "code": status}}
    return f"data: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode()


async def read_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """Return a request's body: 413 over ``max_bytes``, 408 when it has not all come within
    ``timeout_s`` (a client that sends it slowly holds nothing for long)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise GatewayError(
            413,
            f"the request body has {length} bytes, over the limit of {max_bytes}",
            "request_too_large",
        )

    async def read() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise GatewayError(
                    413,
                    f"the request body is over the limit of {max_bytes} bytes",
                    "request_too_large",
                )
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(read(), timeout_s)
    except asyncio.TimeoutError:
        raise GatewayError(
            408, f"the request body did not arrive within {timeout_s:g} s", "timeout"
        ) from None
    except ClientDisconnect:  # nobody to answer: one line in the log, not a traceback
        LOG.warning("%s %s: the client hung up before sending its whole body", request.method,
                    request.url.path[:100])  # fmt: skip
        raise GatewayError(400, "the client hung up before sending its whole body") from None


def _retry_headers(status: int) -> dict[str, str] | None:
    """Return what tells the OpenAI and Anthropic SDKs whether to retry a refused request: a
    client told to slow down comes back in a second; a timed-out or failed call (recorded all
    the same) and a rollout that has ended are not worth a retry (the SDKs would retry 409, 500
    and 504 twice by default, recording the call again)."""
    if status in (429, 503):
        return {"Retry-After": "1"}
    if status in (409, 500, 504):
        return {"x-should-retry": "false"}
    return None


def _same_key(given: str | None, expected: str | None) -> bool:
    """Return whether ``given`` is the key ``expected`` (never when either is missing)."""
    if given is None or expected is None:
        return False
    return secrets.compare_digest(given.encode(), expected.encode())


def _api_key(request: Request) -> str | None:
    """Return the API key a request carries: OpenAI's ``Authorization: Bearer``, or
    Anthropic's (and Azure's) ``x-api-key`` / ``api-key``."""
    authorization = request.headers.get("authorization", "")
    if authorization.startswith("Bearer "):
        return authorization[len("Bearer ") :]
    return request.headers.get("x-api-key") or request.headers.get("api-key")


def _serving_gateway(
    policy: Policy | None, routes: dict[str, Policy], options: dict[str, Any]
) -> Gateway:
    return Gateway(policy, routes=routes, **options).start()
