"""The APIs the gateway speaks besides chat completions: OpenAI's Responses API
(``POST /v1/responses``, the OpenAI Agents SDK's default model), Anthropic's Messages API
(``POST /v1/messages``; the Anthropic SDK's base URL is the gateway's without ``/v1``) and
OpenAI's legacy completions (``POST /v1/completions``: a raw prompt, as text or token ids).

Each protocol is three functions of plain values, which the gateway glues to its routes:

* ``*_chat(request)``: the request as the chat the call is recorded in (OpenAI chat messages,
  with ``tool_calls`` and ``tool`` messages, and OpenAI ``tools``), which the model then sees
  exactly as it would see the same conversation sent to ``/v1/chat/completions``;
* ``*_body(call, ...)``: the recorded call as the protocol's response, with the token ids
  (``prompt_token_ids``, ``token_ids``) beside the standard fields (clients keep unknown
  fields), as the chat route returns them;
* ``*_events(feed, ...)``: the protocol's server-sent events, streamed as the tokens are
  sampled (with tools, the text and the calls come at the end, once they are parsed).

Identifiers derive from the recorded call's id (``resp_<hex>`` / ``msg_<hex>`` / ``cmpl-<hex>``)
and its tool calls' (``call_<hex>`` is ``fc_<hex>`` and ``toolu_<hex>``), so a streamed response
and its final object agree, as the SDKs' stream helpers require.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from boltzoo.agents.gateway import GatewayError, RecordedCall, parse_tool_calls

if TYPE_CHECKING:
    from boltzoo.agents.gateway import _TokenFeed

Sampling = dict(ge=0, le=2, allow_inf_nan=False)


def _hex(identifier: str) -> str:
    """Return the random part of an id (``call_abc`` -> ``abc``)."""
    return identifier.split("_", 1)[-1].split("-", 1)[-1]


def _text_of(content: Any, where: str) -> str:
    """Return the text of a content that is a string or a list of parts with ``text``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict):
                raise GatewayError(400, f"{where}: a content part is a JSON object")
            text = part.get("text")
            if text is not None and not isinstance(text, str):
                raise GatewayError(400, f"{where}: a part's text must be a string")
            texts.append(text or "")
        return "".join(texts)
    raise GatewayError(400, f"{where}: content must be a string or a list of parts")


def _function_tool(name: Any, description: Any, parameters: Any, where: str) -> dict[str, Any]:
    """Return one tool in OpenAI chat's format (what every call is recorded with)."""
    if not isinstance(name, str) or not name:
        raise GatewayError(400, f"{where}: a function tool needs a name")
    if parameters is not None and not isinstance(parameters, dict):
        raise GatewayError(400, f"{where}: a tool's parameters are a JSON schema object")
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description if isinstance(description, str) else "",
            "parameters": parameters or {"type": "object", "properties": {}},
        },
    }


def _call_arguments(call: dict[str, Any]) -> Any:
    """Return a recorded tool call's arguments as a JSON value (an object, normally)."""
    arguments = call["function"]["arguments"]
    try:
        return json.loads(arguments)
    except (json.JSONDecodeError, TypeError):
        return arguments


def _final_text(call: RecordedCall) -> str:
    """Return the answer's text, without its tool-call blocks when the request had tools."""
    text = call.completion.text
    return parse_tool_calls(text)[0] if call.tools else text


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    """Return one server-sent event with its ``event:`` line (the Anthropic SDK needs it)."""
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


# --- OpenAI Responses ------------------------------------------------------------------------


class ResponsesRequest(BaseModel):
    """The fields of a Responses API request the gateway knows (others are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    model: str | None = None
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    previous_response_id: str | None = None
    # sampling is the policy's: checked, then ignored
    temperature: float | None = Field(default=None, **Sampling)
    top_p: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    max_output_tokens: int | None = Field(default=None, ge=1)


def responses_chat(request: ResponsesRequest) -> tuple[list[dict[str, Any]], list[dict]]:
    """Return ``(messages, tools)`` in chat form for a Responses API request."""
    if request.previous_response_id is not None:
        raise GatewayError(
            400,
            "previous_response_id is not supported: this gateway keeps no responses; send the "
            "whole conversation as input",
        )
    messages: list[dict[str, Any]] = []
    if request.instructions:
        messages.append({"role": "system", "content": request.instructions})
    items = (
        [{"role": "user", "content": request.input}]
        if isinstance(request.input, str)
        else request.input
    )
    for index, item in enumerate(items):
        where = f"input[{index}]"
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("system", "developer", "user", "assistant"):
                raise GatewayError(400, f"{where}: unknown role {role!r}")
            messages.append({"role": role, "content": _text_of(item.get("content"), where)})
        elif kind == "function_call":
            name, arguments = item.get("name"), item.get("arguments", "{}")
            if not isinstance(name, str) or not isinstance(arguments, str):
                raise GatewayError(400, f"{where}: a function_call has a name and arguments")
            call = {
                "id": str(item.get("call_id", "")),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            if messages and messages[-1]["role"] == "assistant":
                messages[-1].setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(
                {
                    "role": "tool",
                    "content": _text_of(item.get("output"), where),
                    "tool_call_id": str(item.get("call_id", "")),
                }
            )
        elif kind != "reasoning":  # (a model's reasoning summary: nothing to show this model)
            raise GatewayError(400, f"{where}: input items of type {kind!r} are not supported")
    if not messages:
        raise GatewayError(400, "input holds no message")
    tools = []
    for index, tool in enumerate(request.tools or []):
        if tool.get("type", "function") != "function":
            raise GatewayError(
                400, f"tools[{index}]: only function tools are served, not {tool.get('type')!r}"
            )
        tools.append(
            _function_tool(
                tool.get("name"), tool.get("description"), tool.get("parameters"), f"tools[{index}]"
            )
        )
    return messages, tools


def _output_text(text: str, logprobs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs}


def responses_body(
    call: RecordedCall, model: str, token_logprobs: Callable[..., list[dict[str, Any]]]
) -> dict[str, Any]:
    """Return the Responses API object of a recorded call (status ``completed``: the Agents
    SDK treats ``incomplete`` as an error, and the length limit is the policy's, not the
    client's)."""
    completion = call.completion
    output: list[dict[str, Any]] = []
    text = _final_text(call)
    if text or not call.tool_calls:
        output.append(
            {
                "id": f"msg_{_hex(call.call_id)}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [
                    _output_text(
                        text, token_logprobs(completion.response_token_ids, completion.logprobs)
                    )
                ],
            }
        )
    for tool_call in call.tool_calls:
        output.append(
            {
                "id": f"fc_{_hex(tool_call['id'])}",
                "type": "function_call",
                "status": "completed",
                "call_id": tool_call["id"],
                "name": tool_call["function"]["name"],
                "arguments": tool_call["function"]["arguments"],
            }
        )
    return _response_object(call.call_id, int(call.created), model, "completed", output, call) | {
        "prompt_token_ids": completion.prompt_token_ids,
        "token_ids": completion.response_token_ids,
        "finish_reason": completion.finish_reason,
    }


def _response_object(
    response_id: str,
    created: int,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    call: RecordedCall | None,
) -> dict[str, Any]:
    usage = None
    if call is not None:
        prompt = call.completion.num_prompt_tokens or 0
        response = call.completion.num_response_tokens or 0
        usage = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": response,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + response,
        }
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model,
        "output": output,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": None,
        "top_p": None,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": usage,
    }


async def responses_events(
    feed: _TokenFeed, model: str, token_logprobs: Callable[..., list[dict[str, Any]]]
) -> AsyncIterator[bytes]:
    """Yield the Responses API's streamed events for ``feed``'s call."""
    sequence = itertools.count()
    response_id, created = feed.pending.call_id, int(time.time())
    message_id = f"msg_{_hex(response_id)}"

    def event(kind: str, **fields: Any) -> bytes:
        return _sse(kind, {"type": kind, "sequence_number": next(sequence), **fields})

    skeleton = _response_object(response_id, created, model, "in_progress", [], None)
    yield event("response.created", response=skeleton)
    yield event("response.in_progress", response=skeleton)
    streaming = not feed.pending.tools  # text streams as it comes; with tools all at the end
    part = {"item_id": message_id, "output_index": 0, "content_index": 0}
    if streaming:
        item = {"id": message_id, "type": "message", "role": "assistant"}
        yield event(
            "response.output_item.added",
            output_index=0,
            item=item | {"status": "in_progress", "content": []},
        )
        yield event("response.content_part.added", **part, part=_output_text("", []))
    try:
        async for delta, ids, logprobs in feed.deltas():
            if delta or ids:
                yield event(
                    "response.output_text.delta",
                    **part,
                    delta=delta,
                    logprobs=token_logprobs(ids, logprobs),
                    token_ids=ids,
                )
        call = feed.call()
    except GatewayError as error:
        yield event("error", code="server_error", message=str(error), param=None)
        return
    body = responses_body(call, model, token_logprobs)
    for index, item in enumerate(body["output"]):
        if item["type"] == "message":
            text = item["content"][0]["text"]
            if not streaming:
                yield event(
                    "response.output_item.added",
                    output_index=index,
                    item=item | {"status": "in_progress", "content": []},
                )
                yield event("response.content_part.added", **part, part=_output_text("", []))
            if streaming:  # what the stream has not sent yet (a stop string's cut aside)
                rest = text[len(feed.sent) :] if text.startswith(feed.sent) else ""
            else:
                rest = text
            if rest:
                yield event("response.output_text.delta", **part, delta=rest, logprobs=[])
            yield event("response.output_text.done", **part, text=text, logprobs=[])
            yield event("response.content_part.done", **part, part=item["content"][0])
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item=item | {"status": "in_progress", "arguments": ""},
            )
            where = {"item_id": item["id"], "output_index": index}
            yield event("response.function_call_arguments.delta", **where, delta=item["arguments"])
            yield event(
                "response.function_call_arguments.done",
                **where,
                name=item["name"],
                arguments=item["arguments"],
            )
        yield event("response.output_item.done", output_index=index, item=item)
    yield event("response.completed", response=body)


# --- Anthropic Messages ----------------------------------------------------------------------


class _AnthropicMessage(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class MessagesRequest(BaseModel):
    """The fields of an Anthropic Messages request the gateway knows (others are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    model: str
    max_tokens: int = Field(ge=1)
    messages: list[_AnthropicMessage] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool = False
    stop_sequences: list[str] | None = None
    # sampling is the policy's: checked, then ignored
    temperature: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    top_p: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    top_k: int | None = Field(default=None, ge=0)


def messages_chat(request: MessagesRequest) -> tuple[list[dict[str, Any]], list[dict]]:
    """Return ``(messages, tools)`` in chat form for an Anthropic Messages request:
    ``tool_use`` blocks become the assistant's tool calls, ``tool_result`` blocks ``tool``
    messages (before the user's text of the same message)."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": _text_of(request.system, "system")})
    for index, message in enumerate(request.messages):
        where = f"messages[{index}]"
        if isinstance(message.content, str):
            messages.append({"role": message.role, "content": message.content})
            continue
        texts, calls, results = [], [], []
        for block in message.content:
            kind = block.get("type")
            if kind == "text":
                texts.append(_text_of([block], where))
            elif kind == "tool_use":
                name, arguments = block.get("name"), block.get("input", {})
                if not isinstance(name, str) or not isinstance(block.get("id"), str):
                    raise GatewayError(400, f"{where}: a tool_use block has an id and a name")
                calls.append(
                    {
                        "id": block["id"],
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                )
            elif kind == "tool_result":
                text = _text_of(block.get("content"), where)
                prefix = "Error: " if block.get("is_error") else ""
                results.append(
                    {
                        "role": "tool",
                        "content": prefix + text,
                        "tool_call_id": str(block.get("tool_use_id", "")),
                    }
                )
            # images, documents and thinking blocks: nothing this model reads
        messages.extend(results)
        if message.role == "assistant":
            reply: dict[str, Any] = {"role": "assistant", "content": "".join(texts)}
            if calls:
                reply["tool_calls"] = calls
            messages.append(reply)
        elif texts or not results:
            messages.append({"role": message.role, "content": "".join(texts)})
    tools = []
    for index, tool in enumerate(request.tools or []):
        if "input_schema" not in tool:
            raise GatewayError(
                400, f"tools[{index}]: only custom tools (with an input_schema) are served"
            )
        tools.append(
            _function_tool(
                tool.get("name"),
                tool.get("description"),
                tool.get("input_schema"),
                f"tools[{index}]",
            )
        )
    return messages, tools


def _stop_reason(call: RecordedCall) -> str:
    if call.tool_calls:
        return "tool_use"
    return "max_tokens" if call.completion.finish_reason == "length" else "end_turn"


def _tool_use(tool_call: dict[str, Any]) -> dict[str, Any]:
    arguments = _call_arguments(tool_call)
    return {
        "type": "tool_use",
        "id": f"toolu_{_hex(tool_call['id'])}",
        "name": tool_call["function"]["name"],
        "input": arguments if isinstance(arguments, dict) else {"value": arguments},
    }


def messages_body(call: RecordedCall, model: str) -> dict[str, Any]:
    """Return the Anthropic Messages response of a recorded call."""
    completion = call.completion
    content: list[dict[str, Any]] = []
    text = _final_text(call)
    if text or not call.tool_calls:
        content.append({"type": "text", "text": text})
    content.extend(_tool_use(c) for c in call.tool_calls)
    return {
        "id": call.call_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(call),
        "stop_sequence": None,
        "usage": {
            "input_tokens": completion.num_prompt_tokens or 0,
            "output_tokens": completion.num_response_tokens or 0,
        },
        "prompt_token_ids": completion.prompt_token_ids,
        "token_ids": completion.response_token_ids,
        "logprobs": completion.logprobs,
    }


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """Return an error body in Anthropic's shape."""
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        409: "invalid_request_error",
        413: "request_too_large",
        429: "rate_limit_error",
        504: "timeout_error",
    }
    kind = kinds.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


async def messages_events(feed: _TokenFeed, model: str) -> AsyncIterator[bytes]:
    """Yield the Anthropic Messages stream (with ``event:`` lines) for ``feed``'s call."""
    message = {
        "id": feed.pending.call_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    yield _sse("message_start", {"type": "message_start", "message": message})
    streaming = not feed.pending.tools
    if streaming:
        block = {"type": "text", "text": ""}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
    try:
        async for delta, ids, _ in feed.deltas():
            if delta or ids:
                yield _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": delta},
                        "token_ids": ids,
                    },
                )
        call = feed.call()
    except GatewayError as error:
        yield _sse("error", anthropic_error(error.status, str(error)))
        return
    body = messages_body(call, model)
    blocks = body["content"]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            text = block["text"]
            if streaming:
                rest = text[len(feed.sent) :] if text.startswith(feed.sent) else ""
            else:
                start = {"type": "content_block_start", "index": index}
                yield _sse("content_block_start", start | {"content_block": block | {"text": ""}})
                rest = text
            if rest:
                delta = {"type": "text_delta", "text": rest}
                yield _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
        else:
            start = {"type": "content_block_start", "index": index}
            yield _sse("content_block_start", start | {"content_block": block | {"input": {}}})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": body["stop_reason"], "stop_sequence": None},
            "usage": body["usage"],
            "prompt_token_ids": body["prompt_token_ids"],
            "token_ids": body["token_ids"],
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


# --- OpenAI legacy completions ---------------------------------------------------------------


class CompletionRequest(BaseModel):
    """The fields of a legacy completion request the gateway knows (others are ignored)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    model: str | None = None
    prompt: str | list[str] | list[int] | list[list[int]]
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: bool = False
    suffix: str | None = None
    n: int | None = None
    # sampling is the policy's: checked, then ignored
    temperature: float | None = Field(default=None, **Sampling)
    top_p: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    max_tokens: int | None = Field(default=None, ge=1)
    seed: int | None = None
    stop: str | list[str] | None = None


def completion_prompts(request: CompletionRequest, tokenizer: Any) -> list[tuple[str, list[int]]]:
    """Return each prompt of a legacy completion request as ``(text, token ids)``: text is
    tokenized as vLLM does (the tokenizer's special tokens added), ids are decoded for the
    record."""
    if request.n not in (None, 1):
        raise GatewayError(400, f"n={request.n}: this gateway returns one choice per prompt")
    if request.echo or request.suffix is not None:
        raise GatewayError(400, "echo and suffix are not supported")
    if tokenizer is None:
        raise GatewayError(400, "this model takes chat requests only (it has no tokenizer here)")
    prompt = request.prompt
    if isinstance(prompt, str) or (prompt and isinstance(prompt[0], int)):
        prompt = [prompt]
    if not prompt:
        raise GatewayError(400, "the prompt is empty")
    prompts = []
    for item in prompt:
        if isinstance(item, str):
            ids = list(tokenizer(item)["input_ids"])
            prompts.append((item, ids))
        else:
            if not item:
                raise GatewayError(400, "a prompt of token ids is empty")
            if min(item) < 0 or max(item) >= len(tokenizer):
                raise GatewayError(
                    400, f"prompt token ids must be in [0, {len(tokenizer)}) for this model"
                )
            prompts.append((tokenizer.decode(item), list(item)))
    return prompts


def _completion_logprobs(
    call: RecordedCall, tokenizer: Any, offset: int = 0
) -> dict[str, Any] | None:
    completion = call.completion
    ids, logprobs = completion.response_token_ids, completion.logprobs
    if ids is None or logprobs is None:
        return None
    tokens = [tokenizer.decode([t]) for t in ids]
    offsets = list(itertools.accumulate([offset, *(len(t) for t in tokens[:-1])]))
    return {
        "tokens": tokens,
        "token_logprobs": list(logprobs),
        "top_logprobs": [{t: lp} for t, lp in zip(tokens, logprobs, strict=True)],
        "text_offset": offsets[: len(tokens)],
    }


def completions_body(
    calls: list[RecordedCall], model: str, tokenizer: Any, with_logprobs: bool
) -> dict[str, Any]:
    """Return the legacy completion response of recorded calls, one choice each (vLLM's
    ``prompt_token_ids`` and ``token_ids`` on every choice)."""
    choices, prompt_tokens, response_tokens = [], 0, 0
    for index, call in enumerate(calls):
        completion = call.completion
        prompt_tokens += completion.num_prompt_tokens or 0
        response_tokens += completion.num_response_tokens or 0
        choices.append(
            {
                "index": index,
                "text": completion.text,
                "logprobs": _completion_logprobs(call, tokenizer) if with_logprobs else None,
                "finish_reason": completion.finish_reason or "stop",
                "stop_reason": None,
                "prompt_token_ids": completion.prompt_token_ids,
                "token_ids": completion.response_token_ids,
            }
        )
    return {
        "id": calls[0].call_id,
        "object": "text_completion",
        "created": int(calls[0].created),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": response_tokens,
            "total_tokens": prompt_tokens + response_tokens,
        },
    }


async def completions_events(
    feed: _TokenFeed, model: str, include_usage: bool
) -> AsyncIterator[bytes]:
    """Yield the legacy completion stream (``data:`` chunks, then ``[DONE]``) of one prompt."""
    created = int(time.time())

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        body = {
            "id": feed.pending.call_id,
            "object": "text_completion",
            "created": created,
            "model": model,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n".encode()

    first = True
    try:
        async for delta, ids, _ in feed.deltas():
            choice = {"index": 0, "text": delta, "logprobs": None, "finish_reason": None}
            if first:
                choice["prompt_token_ids"] = feed.pending.prompt_token_ids
                first = False
            yield chunk([choice | {"token_ids": ids}])
        call = feed.call()
    except GatewayError as error:
        payload = {"error": {"message": str(error), "type": error.kind, "code": error.status}}
        yield f"data: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode()
        return
    completion = call.completion
    text = completion.text
    rest = text[len(feed.sent) :] if text.startswith(feed.sent) else ""
    last = {
        "index": 0,
        "text": rest,
        "logprobs": None,
        "finish_reason": completion.finish_reason or "stop",
        "token_ids": feed.unsent(completion),
    }
    if first:
        last["prompt_token_ids"] = completion.prompt_token_ids
    yield chunk([last])
    if include_usage:
        prompt = completion.num_prompt_tokens or 0
        response = completion.num_response_tokens or 0
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": response,
            "total_tokens": prompt + response,
        }
        yield chunk([], usage=usage)
    yield b"data: [DONE]\n\n"
