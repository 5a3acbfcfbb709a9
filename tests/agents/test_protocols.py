"""The gateway's other APIs, each through its real SDK over HTTP: OpenAI's Responses API (and
the Agents SDK's default model on it), Anthropic's Messages API, and legacy completions with
token ids in and out. Every call is recorded as a chat call is, token for token."""

from __future__ import annotations

import asyncio
import json

import pytest

from boltzoo.agents import ScriptedPolicy
from boltzoo.agents.gateway import Gateway

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def weather_model(tokenizer):
    """A scripted model: with tools and no tool result yet, text and a get_weather call; after a
    tool result, an answer that quotes it; without tools, a greeting."""

    def answer(turn):
        messages = turn.observation["messages"]
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if results:
            return f"The weather: {results[-1]}."
        if "get_weather" in messages[0]["content"]:
            call = {"name": "get_weather", "arguments": {"city": "Paris"}}
            return f"Let me check.<tool_call>{json.dumps(call)}</tool_call>"
        return "Hello there, friend."

    return ScriptedPolicy(answer, tokenizer, name="m")


@pytest.fixture
def gateway(smollm2_tokenizer):
    with Gateway(weather_model(smollm2_tokenizer)) as gateway:
        yield gateway


def test_responses_api_text_tool_calls_and_the_tool_round_trip(gateway):
    client = openai.OpenAI(base_url=gateway.session_url("s", "solver"), api_key="x")
    reply = client.responses.create(model="m", input="Hi", instructions="Be brief.")
    assert reply.output_text == "Hello there, friend." and reply.status == "completed"
    tools = [{"type": "function", "name": "get_weather", "description": "w", "parameters": WEATHER}]
    first = client.responses.create(model="m", input="Weather in Paris?", tools=tools)
    assert [item.type for item in first.output] == ["message", "function_call"]
    call = first.output[1]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    second = client.responses.create(
        model="m",
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
        tools=tools,
    )
    assert second.output_text == "The weather: sunny."
    recorded = gateway.calls("s")
    assert [c.protocol for c in recorded] == ["responses"] * 3
    assert [c.call_id for c in recorded] == [reply.id, first.id, second.id]
    # recorded as the chat form: instructions a system message, the call and its result
    assert recorded[0].messages[0] == {"role": "system", "content": "Be brief."}
    assert recorded[2].messages[-1]["role"] == "tool"
    assert recorded[2].messages[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    for response, call in zip((reply, first, second), recorded, strict=True):
        assert response.model_extra["token_ids"] == call.completion.response_token_ids
        assert response.model_extra["prompt_token_ids"] == call.completion.prompt_token_ids


@pytest.mark.slow
def test_responses_stream_helper_gets_text_and_tool_calls(gateway):
    client = openai.OpenAI(base_url=gateway.base_url, api_key="x")
    with client.responses.stream(model="m", input="Hi") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Hello there, friend."
    tools = [{"type": "function", "name": "get_weather", "description": "w", "parameters": WEATHER}]
    with client.responses.stream(model="m", input="Weather?", tools=tools) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["message", "function_call"]
    assert [c.call_id for c in gateway.calls()][-1] == final.id


def test_a_responses_request_with_previous_response_id_or_server_tools_is_a_400(gateway):
    client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        client.responses.create(model="m", input="Hi", previous_response_id="resp_1")
    with pytest.raises(openai.BadRequestError, match="function tools"):
        client.responses.create(model="m", input="Hi", tools=[{"type": "web_search"}])
    assert gateway.calls() == []


def test_the_agents_sdk_default_model_runs_a_tool_loop_through_the_gateway(gateway):
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        return f"sunny in {city}"

    client = openai.AsyncOpenAI(base_url=gateway.session_url("run", "solver"), api_key="x")
    model = agents.OpenAIResponsesModel(model="m", openai_client=client)  # the SDK's default
    agent = agents.Agent(name="a", instructions="Help.", tools=[get_weather], model=model)
    result = asyncio.run(agents.Runner.run(agent, "Weather in Paris?"))
    assert result.final_output == "The weather: sunny in Paris."
    assert [c.protocol for c in gateway.calls("run")] == ["responses", "responses"]


def test_anthropic_messages_text_tool_use_and_tool_result(gateway):
    base = gateway.session_url("s", "solver").removesuffix("/v1")  # the SDK adds /v1
    client = anthropic.Anthropic(base_url=base, api_key="x")
    hello = client.messages.create(
        model="m", max_tokens=50, messages=[{"role": "user", "content": "Hi"}]
    )
    assert hello.content[0].text == "Hello there, friend." and hello.stop_reason == "end_turn"
    tools = [{"name": "get_weather", "description": "w", "input_schema": WEATHER}]
    ask = [{"role": "user", "content": "Weather?"}]
    first = client.messages.create(model="m", max_tokens=50, messages=ask, tools=tools)
    assert first.stop_reason == "tool_use"
    use = first.content[-1]
    assert use.type == "tool_use" and use.input == {"city": "Paris"}
    second = client.messages.create(
        model="m",
        max_tokens=50,
        tools=tools,
        messages=[
            *ask,
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "rain"}],
            },
        ],
    )
    assert second.content[0].text == "The weather: rain."
    recorded = gateway.calls("s")
    assert [c.protocol for c in recorded] == ["messages"] * 3
    assert [c.call_id for c in recorded] == [hello.id, first.id, second.id]
    assert recorded[2].messages[-1] == {
        "role": "tool",
        "content": "rain",
        "tool_call_id": use.id,
    }
    for reply, call in zip((hello, first, second), recorded, strict=True):
        assert reply.model_extra["token_ids"] == call.completion.response_token_ids


def test_anthropic_stream_and_its_error_shape(gateway, smollm2_tokenizer):
    base = gateway.session_url("s", "solver").removesuffix("/v1")
    client = anthropic.Anthropic(base_url=base, api_key="x", max_retries=0)
    ask = [{"role": "user", "content": "Hi"}]
    with client.messages.stream(model="m", max_tokens=50, messages=ask) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == final.content[0].text == "Hello there, friend."
    tools = [{"name": "get_weather", "description": "w", "input_schema": WEATHER}]
    with client.messages.stream(model="m", max_tokens=50, messages=ask, tools=tools) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Paris"} and final.stop_reason == "tool_use"
    with pytest.raises(anthropic.NotFoundError) as refused:
        client.messages.create(model="other", max_tokens=5, messages=ask)
    assert refused.value.body["type"] == "error"  # Anthropic's error shape
    assert refused.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError, match="max_tokens"):
        client.messages.create(model="m", max_tokens=0, messages=ask)


def test_streamed_tokens_of_each_protocol_are_the_recorded_ones(tiny_policy):
    with Gateway(tiny_policy(max_new_tokens=12, temperature=1.0)) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key="x")
        events = list(client.responses.create(model="tiny", input="Hi", stream=True))
        streamed = [
            t for e in events if e.type == "response.output_text.delta" for t in e.token_ids
        ]
        base = gateway.base_url.removesuffix("/v1")
        with anthropic.Anthropic(base_url=base, api_key="x").messages.stream(
            model="tiny", max_tokens=12, messages=[{"role": "user", "content": "Hi"}]
        ) as stream:
            deltas = [e for e in stream if e.type in ("content_block_delta", "message_delta")]
        chunks = list(client.completions.create(model="tiny", prompt="Once upon", stream=True))
    recorded = gateway.calls()
    assert [c.protocol for c in recorded] == ["responses", "messages", "completions"]
    assert streamed == recorded[0].completion.response_token_ids
    # text deltas carry their tokens; the message's last delta all of them
    texts = [t for e in deltas if e.type == "content_block_delta" for t in e.token_ids or []]
    assert texts == deltas[-1].token_ids == recorded[1].completion.response_token_ids
    completion_ids = [t for c in chunks for choice in c.choices for t in choice.token_ids]
    assert completion_ids == recorded[2].completion.response_token_ids
    assert chunks[0].choices[0].prompt_token_ids == recorded[2].completion.prompt_token_ids


def test_legacy_completions_take_text_or_token_ids_and_return_both(tiny_policy, smollm2_tokenizer):
    with Gateway(tiny_policy(max_new_tokens=6, temperature=1.0)) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
        by_text = client.completions.create(model="tiny", prompt="Once upon a time", logprobs=0)
        ids = smollm2_tokenizer("Once upon a time")["input_ids"]
        by_ids = client.completions.create(model="tiny", prompt=[ids, [5, 6, 7]])
        with pytest.raises(openai.BadRequestError, match="token ids"):
            client.completions.create(model="tiny", prompt=[10**9])
    recorded = gateway.calls()
    assert len(recorded) == 3  # the bad one is not a call
    choice = by_text.choices[0]
    # no chat template on this route: the prompt's own tokens, as vLLM gives them
    assert choice.prompt_token_ids == ids == recorded[0].completion.prompt_token_ids
    assert choice.token_ids == recorded[0].completion.response_token_ids
    assert choice.logprobs.token_logprobs == pytest.approx(recorded[0].completion.logprobs)
    assert [c.prompt_token_ids for c in by_ids.choices] == [ids, [5, 6, 7]]
    assert by_ids.usage.prompt_tokens == len(ids) + 3


def test_a_chat_only_policy_refuses_raw_prompts(smollm2_tokenizer):
    class ChatOnly:
        name = "chat-only"

        def act(self, turns):
            return ["hi" for _ in turns]

    with Gateway(ChatOnly()) as gateway:
        client = openai.OpenAI(base_url=gateway.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="chat requests only"):
            client.completions.create(model="chat-only", prompt="Once")
