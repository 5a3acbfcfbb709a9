"""The gateway: an OpenAI-compatible server that batches, records every call, and never crashes."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from boltzoo.agents import ScriptedPolicy
from boltzoo.agents.gateway import Gateway, parse_tool_calls
from boltzoo.agents.openai_policy import OpenAICompatiblePolicy, ServerError


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


def test_streaming_returns_server_sent_events(smollm2_tokenizer):
    with Gateway(echo_policy(smollm2_tokenizer)) as gateway:
        _, text = post(
            gateway.base_url + "/chat/completions",
            {"stream": True, "messages": [{"role": "user", "content": "abc"}]},
        )
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunk = json.loads(events[0])
    assert chunk["choices"][0]["delta"]["content"] == "cba" and chunk["choices"][0]["token_ids"]


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


def test_client_error_on_a_dead_server():
    client = OpenAICompatiblePolicy("http://127.0.0.1:9/v1", "x", timeout_s=2)
    with pytest.raises(ServerError, match="no answer"):
        client.complete([{"role": "user", "content": "hi"}])


def test_the_gateway_is_importable_from_boltzoo_agents():
    import boltzoo.agents

    assert boltzoo.agents.Gateway is Gateway and "Gateway" in boltzoo.agents.__all__
