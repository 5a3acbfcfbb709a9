"""The gateway: an OpenAI-compatible server that batches, records every call, and never crashes."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from boltzoo.agents import ScriptedPolicy
from boltzoo.agents.gateway import Gateway, parse_tool_calls
from boltzoo.agents.openai_policy import OpenAICompatiblePolicy, ServerError
from boltzoo.episode import Completion


def post(url, body, headers=None, raw=None):
    """POST JSON (or raw bytes); return (status, parsed body)."""
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read().decode()
            return response.status, (json.loads(text) if text.startswith("{") else text)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def echo_policy(tokenizer):
    """A scripted model that answers with the last user message, reversed."""
    return ScriptedPolicy(
        lambda turn: turn.observation["messages"][-1]["content"][::-1], tokenizer, name="echo"
    )


@pytest.mark.slow
def test_openai_compatible_policy_gets_the_recorded_tokens(tiny_policy):
    policy = tiny_policy(max_new_tokens=6)
    with Gateway(policy) as gateway:
        client = OpenAICompatiblePolicy(gateway.session_url("ep1", "solver"), "tiny")
        from boltzoo.agents import Turn

        chats = [[{"role": "user", "content": f"question {i}"}] for i in range(3)]
        completions = client.act([Turn("solver", {"messages": c}) for c in chats])
        recorded = gateway.calls("ep1")
    assert len(recorded) == 3 and {c.agent for c in recorded} == {"solver"}
    by_prompt = {tuple(c.completion.prompt_token_ids): c.completion for c in recorded}
    for completion in completions:
        original = by_prompt[tuple(completion.prompt_token_ids)]
        assert completion.response_token_ids == original.response_token_ids
        assert completion.logprobs == pytest.approx(original.logprobs)
        assert completion.text == policy.tokenizer.decode(
            completion.response_token_ids, skip_special_tokens=True
        )


def test_sessions_by_path_and_header_never_mix(smollm2_tokenizer):
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        message = {"messages": [{"role": "user", "content": "abc"}]}
        post(gateway.session_url("a") + "/chat/completions", message)
        post(gateway.session_url("b", "checker") + "/chat/completions", message)
        post(
            gateway.base_url + "/chat/completions",
            message,
            {"X-Boltzoo-Session": "c", "X-Boltzoo-Agent": "writer"},
        )
        status, body = post(gateway.base_url + "/chat/completions", message)
        assert status == 200 and body["choices"][0]["message"]["content"] == "cba"
        assert [(c.session, c.agent) for c in gateway.calls()] == [
            ("a", None),
            ("b", "checker"),
            ("c", "writer"),
            ("default", None),
        ]
        assert len(gateway.pop_calls("a")) == 1 and gateway.calls("a") == []


def test_every_response_carries_token_ids_and_logprobs(tiny_policy):
    with Gateway(tiny_policy(max_new_tokens=5)) as gateway:
        status, body = post(
            gateway.base_url + "/chat/completions",
            {
                "model": "tiny",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": 0,
                "some_unknown_field": {"x": 1},
            },
        )
    assert status == 200
    choice = body["choices"][0]
    assert len(choice["token_ids"]) == len(choice["logprobs"]["content"]) >= 1
    assert body["prompt_token_ids"] and body["usage"]["completion_tokens"] == len(
        choice["token_ids"]
    )


def test_tools_are_rendered_and_tool_calls_parsed(smollm2_tokenizer):
    seen = []

    def model(turn):
        seen.append(turn.observation["messages"])
        if turn.observation["messages"][-1]["role"] == "tool":
            return "The result is 42."
        call = {"name": "calculator", "arguments": {"expression": "6*7"}}
        return f"Let me compute. <tool_call>{json.dumps(call)}</tool_call>"

    tools = [
        {
            "type": "function",
            "function": {
                "name": "calculator",
                "description": "math",
                "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}},
            },
        }
    ]
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer)) as gateway:
        url = gateway.base_url + "/chat/completions"
        messages = [{"role": "user", "content": "What is 6*7?"}]
        _, first = post(url, {"messages": messages, "tools": tools})
        call = first["choices"][0]["message"]["tool_calls"][0]
        assert first["choices"][0]["finish_reason"] == "tool_calls"
        assert call["function"]["name"] == "calculator"
        assert json.loads(call["function"]["arguments"]) == {"expression": "6*7"}
        messages += [
            first["choices"][0]["message"],
            {"role": "tool", "tool_call_id": call["id"], "content": "42"},
        ]
        _, second = post(url, {"messages": messages, "tools": tools})
    assert second["choices"][0]["message"]["content"] == "The result is 42."
    assert "calculator" in seen[0][0]["content"] and seen[0][0]["role"] == "system"
    assert '"expression": "6*7"' in seen[1][-2]["content"]  # the assistant's call, as text
    assert seen[1][-1] == {"role": "tool", "content": "42"}


def test_parse_tool_calls_leaves_broken_blocks_in_the_text():
    content, calls = parse_tool_calls(
        '<tool_call>{"name": "f", "arguments": {}}</tool_call> <tool_call>{not json}</tool_call>'
    )
    assert [c["function"]["name"] for c in calls] == ["f"]
    assert content == "<tool_call>{not json}</tool_call>"


@pytest.mark.parametrize(
    "body, raw, status, words",
    [
        (None, b"{not json", 400, "not valid JSON"),
        ({"model": "echo"}, None, 400, "messages"),
        ({"messages": []}, None, 400, "messages"),
        ({"messages": "hello"}, None, 400, "messages"),
        ({"messages": [{"content": "no role"}]}, None, 400, "role"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, None, 400, "role"),
        (
            {"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]},
            None,
            404,
            "unknown model",
        ),
        ([1, 2, 3], None, 400, "JSON object"),
    ],
)
def test_bad_requests_get_clear_4xx_errors_and_the_server_lives_on(
    smollm2_tokenizer, body, raw, status, words
):
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        code, answer = post(gateway.base_url + "/chat/completions", body, raw=raw)
        assert code == status and words in answer["error"]["message"]
        ok, _ = post(
            gateway.base_url + "/chat/completions",
            {"messages": [{"role": "user", "content": "still alive"}]},
        )
        assert ok == 200 and len(gateway.calls()) == 1


def test_oversized_body_prompt_and_wrong_key_are_refused(tiny_policy, smollm2_tokenizer):
    with Gateway(echo_policy(smollm2_tokenizer), api_key="s3cret", max_body_bytes=1_000) as g:
        url = g.base_url + "/chat/completions"
        message = {"messages": [{"role": "user", "content": "x"}]}
        assert post(url, message)[0] == 401
        assert post(url, message, {"Authorization": "Bearer wrong"})[0] == 401
        assert (
            post(
                url,
                {"messages": [{"role": "user", "content": "x" * 5_000}]},
                {"Authorization": "Bearer s3cret"},
            )[0]
            == 413
        )
        assert post(url, message, {"Authorization": "Bearer s3cret"})[0] == 200
    with Gateway(tiny_policy(max_prompt_tokens=8)) as g:
        code, answer = post(
            g.base_url + "/chat/completions",
            {"messages": [{"role": "user", "content": "a long question " * 20}]},
        )
        assert code == 400 and answer["error"]["type"] == "context_length_exceeded"
        assert g.calls() == []


def test_models_health_and_unknown_routes(smollm2_tokenizer):
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        with urllib.request.urlopen(gateway.base_url + "/models") as response:
            assert json.loads(response.read())["data"][0]["id"] == "echo"
        host, port = gateway.address
        with urllib.request.urlopen(f"http://{host}:{port}/health") as response:
            assert json.loads(response.read())["status"] == "ok"
        assert post(f"http://{host}:{port}/v2/anything", {})[0] == 404


def sse_events(text):
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def test_streaming_sends_the_recorded_tokens_in_chunks_of_at_most_four(tiny_policy):
    with Gateway(tiny_policy(max_new_tokens=11)) as gateway:
        _, text = post(
            gateway.base_url + "/chat/completions",
            {
                "stream": True,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": "abc"}],
            },
        )
        [call] = gateway.calls()
    events = sse_events(text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    *with_choices, usage = chunks
    choices = [c["choices"][0] for c in with_choices]
    assert all(len(c.get("token_ids", [])) <= 4 for c in choices)
    # the chunks carry exactly the recorded call: its text, token ids and logprobs
    streamed_ids = [t for c in choices for t in c.get("token_ids", [])]
    assert streamed_ids == call.completion.response_token_ids and len(streamed_ids) > 4
    assert "".join(c["delta"].get("content", "") for c in choices) == call.completion.text
    streamed_logprobs = [
        x["logprob"] for c in choices if c.get("logprobs") for x in c["logprobs"]["content"]
    ]
    assert streamed_logprobs == call.completion.logprobs
    assert choices[-1]["finish_reason"] in ("stop", "length")
    assert choices[-1]["prompt_token_ids"] == call.completion.prompt_token_ids
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == len(streamed_ids)


class GatedStreamer:
    """Streams its first tokens, then waits until the test has read them from the server."""

    def __init__(self, tokenizer):
        self.tokenizer, self.name = tokenizer, "gated"
        self.released, self.waited_out = threading.Event(), False

    def act(self, turns):
        ids = self.tokenizer.encode("first words, then the rest", add_special_tokens=False)
        for turn in turns:
            for token in ids[:3]:
                turn.stream(token, -0.5)
            self.waited_out = not self.released.wait(timeout=20)
            for token in ids[3:]:
                turn.stream(token, -0.5)
        return [
            Completion(
                text=self.tokenizer.decode(ids),
                prompt_token_ids=[1],
                response_token_ids=ids,
                logprobs=[-0.5] * len(ids),
            )
            for _ in turns
        ]


def test_streamed_tokens_reach_the_client_before_the_answer_is_finished(smollm2_tokenizer):
    policy = GatedStreamer(smollm2_tokenizer)
    with Gateway(policy) as gateway:
        host, port = gateway.address
        connection = http.client.HTTPConnection(host, port, timeout=30)
        body = {"stream": True, "messages": [{"role": "user", "content": "go"}]}
        connection.request("POST", "/v1/chat/completions", json.dumps(body))
        response = connection.getresponse()
        assert response.status == 200
        first = smollm2_tokenizer.encode("first words, then the rest", add_special_tokens=False)
        expected = smollm2_tokenizer.decode(first[:3])
        content = ""
        while content != expected:  # the policy is still waiting: these came as sampled
            line = response.readline().decode()
            assert line and "[DONE]" not in line, content
            if line.startswith("data: {"):
                content += json.loads(line[6:])["choices"][0]["delta"].get("content", "")
        policy.released.set()
        rest = response.read().decode()
        connection.close()
    assert not policy.waited_out
    assert sse_events(rest)[-1] == "[DONE]"


@pytest.mark.slow
def test_load_32_clients_20_requests_each_recorded_exactly_once_and_batched(smollm2_tokenizer):
    clients, requests_each = 32, 20
    errors = []
    with Gateway(echo_policy(smollm2_tokenizer), batch_wait_s=0.02) as gateway:

        def client(index):
            for j in range(requests_each):
                content = f"client {index} request {j}"
                status, body = post(
                    gateway.session_url(f"s{index}") + "/chat/completions",
                    {"messages": [{"role": "user", "content": content}]},
                )
                if status != 200 or body["choices"][0]["message"]["content"] != content[::-1]:
                    errors.append((index, j, status))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        calls = gateway.calls()
        mean_batch = gateway.mean_batch_size
    assert errors == []
    assert len(calls) == clients * requests_each
    assert len({c.call_id for c in calls}) == len(calls)
    for index in range(clients):  # each session holds exactly its own requests, once each
        mine = sorted(c.messages[-1]["content"] for c in calls if c.session == f"s{index}")
        assert mine == sorted(f"client {index} request {j}" for j in range(requests_each))
    assert mean_batch > 1


@pytest.mark.slow
def test_client_error_on_a_dead_server():
    client = OpenAICompatiblePolicy("http://127.0.0.1:9/v1", "x", timeout_s=2)
    with pytest.raises(ServerError, match="no answer"):
        client.complete([{"role": "user", "content": "hi"}])


def test_the_gateway_is_importable_from_boltzoo_agents():
    import boltzoo.agents

    assert boltzoo.agents.Gateway is Gateway and "Gateway" in boltzoo.agents.__all__


@pytest.mark.parametrize(
    "field, value",
    [("stream", "yes"), ("temperature", "hot"), ("max_tokens", 1.5), ("model", 7), ("tools", {})],
)
def test_a_known_field_of_the_wrong_type_is_a_400_naming_it(smollm2_tokenizer, field, value):
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        body = {"messages": [{"role": "user", "content": "x"}], field: value}
        code, answer = post(gateway.base_url + "/chat/completions", body)
        assert gateway.calls() == []
    assert code == 400 and field in answer["error"]["message"]
    assert answer["error"]["type"] == "invalid_request_error"


def test_fields_a_framework_client_sends_are_ignored(smollm2_tokenizer):
    body = {
        "messages": [{"role": "user", "content": "abc", "cache_control": {"type": "x"}}],
        "parallel_tool_calls": False,
        "store": False,
        "metadata": {"run": "1"},
        "temperature": 0.2,
        "n": 1,
    }
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        code, answer = post(gateway.base_url + "/chat/completions", body)
    assert code == 200 and answer["choices"][0]["message"]["content"] == "cba"


def test_a_chunked_body_over_the_limit_is_a_413(smollm2_tokenizer):
    with Gateway(echo_policy(smollm2_tokenizer), max_body_bytes=1_000) as gateway:
        host, port = gateway.address
        connection = http.client.HTTPConnection(host, port, timeout=30)
        body = json.dumps({"messages": [{"role": "user", "content": "x" * 5_000}]}).encode()
        # no Content-Length: the size is only known while reading
        connection.request("POST", "/v1/chat/completions", iter([body[:2000], body[2000:]]))
        response = connection.getresponse()
        assert response.status == 413 and "limit" in json.loads(response.read())["error"]["message"]
        connection.close()
        assert gateway.calls() == []


def wait_until(condition, timeout=10.0):
    """Wait for ``condition()`` to hold (polled every 10 ms); fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the awaited state never came"
        time.sleep(0.01)


class BlockingPolicy:
    """Answers once ``release`` is set (``entered`` is set when a call is in it); raises for a
    message that says ``fail``."""

    def __init__(self, tokenizer):
        self.inner = echo_policy(tokenizer)
        self.release, self.entered = threading.Event(), threading.Event()
        self.tokenizer, self.name = tokenizer, "blocking"

    def act(self, turns):
        self.entered.set()
        self.release.wait(timeout=30)
        if any(t.observation["messages"][-1]["content"] == "fail" for t in turns):
            raise ValueError("a policy bug, not a long prompt")
        return self.inner.act(turns)


@pytest.mark.slow
def test_too_many_pending_timeout_and_policy_errors_get_429_504_and_500(smollm2_tokenizer):
    policy = BlockingPolicy(smollm2_tokenizer)
    message = {"messages": [{"role": "user", "content": "abc"}]}
    with Gateway(policy, max_pending=2, request_timeout_s=1.0, batch_wait_s=0.0) as gateway:
        url = gateway.base_url + "/chat/completions"
        results = {}
        first = threading.Thread(target=lambda: results.update(first=post(url, message)))
        first.start()
        assert policy.entered.wait(timeout=10)  # the first request is in the policy, blocked
        second = threading.Thread(target=lambda: results.update(second=post(url, message)))
        second.start()
        # the second waits in the queue: two are pending, the most allowed
        wait_until(lambda: gateway._pending == 2)
        request = urllib.request.Request(
            url, json.dumps(message).encode(), {"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 429 and refused.value.headers["Retry-After"] == "1"
        assert json.loads(refused.value.read())["error"]["type"] == "rate_limit_exceeded"
        first.join()
        second.join()
        # past request_timeout_s: 504, and the call is recorded once it is answered
        assert results["first"][0] == 504 and results["second"][0] == 504
        policy.release.set()
        wait_until(lambda: len(gateway.calls()) == 2)
        assert [c.completion.text for c in gateway.calls()] == ["cba", "cba"]
        # a policy error is a 500 that says what it was, not a context length error
        code, answer = post(url, {"messages": [{"role": "user", "content": "fail"}]})
        assert code == 500 and answer["error"]["type"] == "server_error"
        assert "a policy bug" in answer["error"]["message"]
        assert post(url, message)[0] == 200  # and the gateway serves on


@pytest.mark.slow
def test_records_are_bounded_handed_over_and_readable_over_http(smollm2_tokenizer):
    with Gateway(echo_policy(smollm2_tokenizer), max_records=5) as gateway:
        for i in range(8):
            post(
                gateway.session_url("s") + "/chat/completions",
                {"messages": [{"role": "user", "content": f"m{i}"}]},
            )
        assert [c.messages[-1]["content"] for c in gateway.calls()] == [
            f"m{i}" for i in range(3, 8)
        ]
        assert gateway.dropped_calls == 3
        host, port = gateway.address
        with urllib.request.urlopen(f"http://{host}:{port}/sessions/s") as response:
            listed = json.loads(response.read())["calls"]
        assert [c["completion"]["text"] for c in listed] == [f"{i}m" for i in range(3, 8)]
        assert all(c["completion"]["response_token_ids"] for c in listed)
        request = urllib.request.Request(f"http://{host}:{port}/sessions/s", method="DELETE")
        with urllib.request.urlopen(request) as response:
            assert len(json.loads(response.read())["calls"]) == 5
        assert gateway.calls() == []

    with Gateway(echo_policy(smollm2_tokenizer), record_ttl_s=0.5) as gateway:
        url = gateway.base_url + "/chat/completions"
        post(url, {"messages": [{"role": "user", "content": "old"}]})
        time.sleep(1.2)
        post(url, {"messages": [{"role": "user", "content": "new"}]})
        assert [c.messages[-1]["content"] for c in gateway.calls()] == ["new"]


def test_record_to_appends_every_call_to_a_file_and_keeps_none(smollm2_tokenizer, tmp_path):
    path = tmp_path / "calls.jsonl"
    with Gateway(echo_policy(smollm2_tokenizer), record_to=str(path)) as gateway:
        for i in range(3):
            post(
                gateway.base_url + "/chat/completions",
                {"messages": [{"role": "user", "content": f"q{i}"}]},
            )
        assert gateway.calls() == []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["messages"][-1]["content"] for r in rows] == ["q0", "q1", "q2"]
    assert [r["completion"]["text"] for r in rows] == ["0q", "1q", "2q"]


@pytest.mark.slow
def test_closing_lets_requests_in_flight_finish_and_loses_no_record(smollm2_tokenizer, tmp_path):
    path = tmp_path / "calls.jsonl"
    policy = BlockingPolicy(smollm2_tokenizer)
    gateway = Gateway(policy, record_to=str(path)).start()
    url = gateway.base_url + "/chat/completions"
    results = {}
    flight = threading.Thread(
        target=lambda: results.update(
            r=post(url, {"messages": [{"role": "user", "content": "abc"}]})
        )
    )
    flight.start()
    assert policy.entered.wait(timeout=10)
    threading.Timer(0.5, policy.release.set).start()
    gateway.close()  # while the request is in the policy
    flight.join()
    assert results["r"][0] == 200 and results["r"][1]["choices"][0]["message"]["content"] == "cba"
    assert [json.loads(line)["completion"]["text"] for line in path.read_text().splitlines()] == [
        "cba"
    ]
    with pytest.raises(urllib.error.URLError):  # closed: the port no longer answers
        urllib.request.urlopen(url.replace("/chat/completions", "/models"), timeout=5)


@pytest.mark.slow
def test_the_openai_compatible_policy_retries_a_busy_server_and_not_a_bad_request():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    answers = [
        (503, {"error": {"message": "busy"}}),
        (200, None),
        (400, {"error": {"message": "no"}}),
    ]
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # noqa: N802
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            status, body = answers.pop(0)
            body = body or {
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "hi"},
                        "finish_reason": "stop",
                        "token_ids": [5, 6],
                        "logprobs": {
                            "content": [
                                {"token": "h", "logprob": -0.1},
                                {"token": "i", "logprob": -0.2},
                            ]
                        },
                    }
                ],
                "prompt_token_ids": [1, 2, 3],
            }
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = OpenAICompatiblePolicy(f"http://127.0.0.1:{server.server_port}/v1", "m")
        completion = client.complete([{"role": "user", "content": "hello"}])
        assert len(seen) == 2  # the 503 was retried
        assert seen[1]["return_token_ids"] is True and seen[1]["messages"][0]["content"] == "hello"
        assert completion.text == "hi" and completion.response_token_ids == [5, 6]
        assert completion.logprobs == [-0.1, -0.2] and completion.prompt_token_ids == [1, 2, 3]
        with pytest.raises(ServerError, match="answered 400"):
            client.complete([{"role": "user", "content": "hello"}])
        assert len(seen) == 3  # a bad request is not retried
    finally:
        server.shutdown()
        server.server_close()


# --- requests from strangers: every malformed one a 4xx, the server serving throughout ------


def post_raw(gateway, raw):
    """POST raw bytes to the chat route; return (status, parsed body)."""
    return post(gateway.base_url + "/chat/completions", None, raw=raw)


@pytest.mark.parametrize(
    "raw, words",
    [
        (b'{"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}', "max_tokens"),
        (b'{"max_tokens": -5, "messages": [{"role": "user", "content": "x"}]}', "max_tokens"),
        (b'{"temperature": -3, "messages": [{"role": "user", "content": "x"}]}', "temperature"),
        (b'{"temperature": NaN, "messages": [{"role": "user", "content": "x"}]}', "NaN"),
        (b'{"top_p": Infinity, "messages": [{"role": "user", "content": "x"}]}', "Infinity"),
        (b'{"top_p": 1.5, "messages": [{"role": "user", "content": "x"}]}', "top_p"),
        (b'{"messages": [{"role": "user", "content": "a \\ud800 b"}]}', "not valid Unicode"),
        (b'{"messages": [{"role": "user", "content": "x"}], "\\udfff": 1}', "not valid Unicode"),
        (
            b'{"messages": [{"role": "user", "content": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}",
            "nested deeper",
        ),
        (b'{"tools": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper"),
        (b'{"unknown": ' + b'{"a":' * 70 + b"1" + b"}" * 70 + b"}", "nested deeper"),
    ],
    ids=[
        "max_tokens 0",
        "max_tokens -5",
        "temperature -3",
        "temperature NaN",
        "top_p inf",
        "top_p 1.5",
        "lone surrogate",
        "surrogate key",
        "50k levels in content",
        "100k levels in tools",
        "70 levels in an unknown field",
    ],
)
def test_malformed_requests_get_400_and_the_server_serves_on(smollm2_tokenizer, raw, words):
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        code, answer = post_raw(gateway, raw)
        assert code == 400 and words in answer["error"]["message"], answer
        ok, body = post(
            gateway.base_url + "/chat/completions",
            {"messages": [{"role": "user", "content": "still alive"}]},
        )
        assert ok == 200 and body["choices"][0]["message"]["content"] == "evila llits"
        assert len(gateway.calls()) == 1  # only the good one


def test_a_body_sent_slowly_gets_408_while_other_requests_are_served(smollm2_tokenizer):
    with Gateway(echo_policy(smollm2_tokenizer), body_timeout_s=0.5) as gateway:
        host, port = gateway.address
        slow = [socket.create_connection((host, port)) for _ in range(20)]
        for connection in slow:  # a promised body of 1,000 bytes that never comes
            connection.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
        started = time.monotonic()
        code, _ = post(
            gateway.base_url + "/chat/completions",
            {"messages": [{"role": "user", "content": "abc"}]},
        )
        assert code == 200
        for connection in slow:
            connection.settimeout(5)
            status_line = connection.recv(200).split(b"\r\n")[0]
            assert b" 408 " in status_line, status_line
            connection.close()
        assert time.monotonic() - started < 5
    assert len(gateway.calls()) == 1


def test_routes_send_each_agent_to_its_own_policy(smollm2_tokenizer):
    shout = ScriptedPolicy(
        lambda t: t.observation["messages"][-1]["content"].upper(), smollm2_tokenizer, name="shout"
    )
    echo = echo_policy(smollm2_tokenizer)
    message = {"messages": [{"role": "user", "content": "abc"}]}
    with Gateway(routes={"writer": echo, "checker": shout}, model_name="m") as gateway:
        url = gateway.session_url("s", "writer") + "/chat/completions"
        assert post(url, message)[1]["choices"][0]["message"]["content"] == "cba"
        url = gateway.session_url("s", "checker") + "/chat/completions"
        assert post(url, message)[1]["choices"][0]["message"]["content"] == "ABC"
        code, answer = post(gateway.session_url("s", "rewriter") + "/chat/completions", message)
        assert code == 404 and "checker" in answer["error"]["message"]
        code, _ = post(gateway.session_url("s") + "/chat/completions", message)
        assert code == 404
        assert [c.agent for c in gateway.calls("s")] == ["writer", "checker"]
    with Gateway(echo, routes={"checker": shout}) as gateway:  # others: the default policy
        url = gateway.session_url("s", "rewriter") + "/chat/completions"
        assert post(url, message)[1]["choices"][0]["message"]["content"] == "cba"


def test_required_sessions_serve_only_while_open_and_with_their_key(smollm2_tokenizer):
    message = {"messages": [{"role": "user", "content": "abc"}]}
    seen = []
    with Gateway(echo_policy(smollm2_tokenizer), require_session=True) as gateway:
        url = gateway.session_url("r1", "solver") + "/chat/completions"
        code, answer = post(url, message)
        assert code == 409 and "not open" in answer["error"]["message"]
        gateway.open_session("r1", token="k1", on_request=lambda: seen.append(1))
        assert post(url, message)[0] == 401
        assert post(url, message, {"Authorization": "Bearer k2"})[0] == 401
        assert post(url, message, {"Authorization": "Bearer k1"})[0] == 200
        assert post(url, message, {"x-api-key": "k1"})[0] == 200  # Anthropic's header
        assert post(gateway.base_url + "/chat/completions", message)[0] == 409
        calls = gateway.close_session("r1")
        assert len(calls) == 2 and gateway.calls("r1") == []
        request = urllib.request.Request(
            url, json.dumps(message).encode(), {"Authorization": "Bearer k1"}
        )
        with pytest.raises(urllib.error.HTTPError) as late:
            urllib.request.urlopen(request, timeout=30)
        # a rollout that has ended never comes back: the SDKs are told not to retry
        assert late.value.code == 409 and late.value.headers["x-should-retry"] == "false"
    assert len(seen) == 2  # each request let in was a sign of life (not those refused)


def test_open_sessions_send_each_wave_of_a_graph_to_its_gateway_as_one_batch(smollm2_tokenizer):
    """Eight episodes of a two-node graph, each node behind a gateway of its own: every episode
    asks the first gateway, then spends 0-80 ms on a tool (staggered), then asks the second.
    With the episodes' sessions open, a gateway waits for every open session that may ask: one
    batch of 8 at each, however far apart the second calls come; without sessions, the plain
    10 ms window cuts the second wave up."""
    import random

    from boltzoo.agents.gateway import open_linked_session

    episodes, message = 8, {"messages": [{"role": "user", "content": "abc"}]}
    stagger = [random.Random(i).uniform(0.0, 0.08) for i in range(episodes)]
    sizes = {}
    for sessions in (False, True):
        first = Gateway(echo_policy(smollm2_tokenizer), session_wait_s=5.0).start()
        second = Gateway(echo_policy(smollm2_tokenizer), session_wait_s=5.0).start()
        try:
            for i in range(episodes):
                if sessions:
                    open_linked_session([first, second], f"ep{i}")

            def episode(i, first, second):
                for gateway, pause in ((first, stagger[i]), (second, 0.0)):
                    url = gateway.session_url(f"ep{i}", "node") + "/chat/completions"
                    assert post(url, message)[0] == 200
                    time.sleep(pause)  # the tool between the two calls
                for gateway in (first, second):
                    gateway.close_session(f"ep{i}")

            threads = [
                threading.Thread(target=episode, args=(i, first, second)) for i in range(episodes)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            sizes[sessions] = (first.batch_sizes, second.batch_sizes)
        finally:
            first.close()
            second.close()
    assert sizes[True] == ([episodes], [episodes])
    assert len(sizes[False][1]) > 1


def test_a_linked_session_waiting_at_another_gateway_does_not_hold_a_batch(smollm2_tokenizer):
    """Two episodes of a graph, one waiting at the first gateway (its policy blocked) while the
    other asks the second: linked, the second gateway knows the first episode is not about to
    ask it and serves at once; opened apart, it would wait out ``session_wait_s`` (30 s)."""
    from boltzoo.agents.gateway import open_linked_session

    message = {"messages": [{"role": "user", "content": "abc"}]}
    blocked = BlockingPolicy(smollm2_tokenizer)
    first = Gateway(blocked, session_wait_s=30.0).start()
    second = Gateway(echo_policy(smollm2_tokenizer), session_wait_s=30.0).start()
    try:
        open_linked_session([first, second], "waiting")
        waiting = threading.Thread(
            target=post, args=(first.session_url("waiting") + "/chat/completions", message)
        )
        waiting.start()
        assert blocked.entered.wait(timeout=10)
        open_linked_session([first, second], "asking")
        started = time.monotonic()
        assert post(second.session_url("asking") + "/chat/completions", message)[0] == 200
        assert time.monotonic() - started < 15.0
        blocked.release.set()
        waiting.join()
    finally:
        blocked.release.set()
        first.close()
        second.close()


def test_an_open_session_that_does_not_ask_holds_a_batch_at_most_session_wait_s(
    smollm2_tokenizer,
):
    message = {"messages": [{"role": "user", "content": "abc"}]}
    with Gateway(echo_policy(smollm2_tokenizer), session_wait_s=0.5) as gateway:
        gateway.open_session("idle")  # its agent might ask: the batch waits for it...
        gateway.open_session("asking")
        url = gateway.session_url("asking") + "/chat/completions"
        started = time.monotonic()
        assert post(url, message)[0] == 200  # ...but not for ever
        assert time.monotonic() - started >= 0.45
    with Gateway(echo_policy(smollm2_tokenizer), session_wait_s=30.0) as gateway:
        gateway.open_session("idle")
        gateway.open_session("asking")
        gateway.close_session("idle")  # a closed session is waited for no longer
        started = time.monotonic()
        assert post(gateway.session_url("asking") + "/chat/completions", message)[0] == 200
        assert time.monotonic() - started < 15.0  # served without waiting out the 30 s


@pytest.mark.slow
def test_paused_gateway_holds_new_calls_and_waits_for_those_in_flight(smollm2_tokenizer):
    policy = BlockingPolicy(smollm2_tokenizer)
    message = {"messages": [{"role": "user", "content": "abc"}]}
    with Gateway(policy, batch_wait_s=0.0) as gateway:
        url = gateway.base_url + "/chat/completions"
        results = {}
        first = threading.Thread(target=lambda: results.update(first=post(url, message)))
        first.start()
        assert policy.entered.wait(timeout=10)  # the first is in the policy, blocked
        paused, synced = threading.Event(), threading.Event()

        def sync():
            with gateway.paused():
                paused.set()
                synced.wait(timeout=30)  # the weights change here

        syncing = threading.Thread(target=sync)
        syncing.start()
        assert not paused.wait(timeout=0.3)  # a sync waits for the call in flight
        policy.release.set()
        first.join()
        assert paused.wait(timeout=5)
        second = threading.Thread(target=lambda: results.update(second=post(url, message)))
        second.start()
        wait_until(lambda: gateway._pending == 1)  # the second is in, and held ...
        assert "second" not in results
        policy.entered.clear()
        assert not policy.entered.wait(timeout=0.3)  # ... not in the policy, nor refused
        synced.set()
        syncing.join()
        second.join(timeout=10)
    assert results["first"][0] == 200 and results["second"][0] == 200


def test_a_client_that_hangs_up_mid_body_is_one_log_line(smollm2_tokenizer, caplog):
    import logging

    caplog.set_level(logging.WARNING)
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        host, port = gateway.address
        for _ in range(5):
            connection = socket.create_connection((host, port))
            connection.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            connection.close()  # gone before the rest of the body
        wait_until(lambda: len(caplog.records) >= 5)
        code, _ = post(gateway.base_url + "/chat/completions",
                       {"messages": [{"role": "user", "content": "abc"}]})  # fmt: skip
        assert code == 200  # still serving
    hung_up = [r for r in caplog.records if "hung up" in r.getMessage()]
    assert len(hung_up) == 5
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
