"""AutoGen and OpenAI Agents SDK agents acting in envs through the gateway, over real HTTP."""

from __future__ import annotations

import json

import pytest

import boltzoo
from boltzoo.agents import ScriptedPolicy, Turn
from boltzoo.agents.gateway import Gateway

pytest.importorskip("autogen_agentchat")
pytest.importorskip("agents")

from boltzoo.agents.examples import autogen_assistant  # noqa: E402
from boltzoo.agents.frameworks import AutoGenPolicy  # noqa: E402


def tool_call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def play_one_turn(env, policy, agent, task_index):
    env.reset(options={"task_index": task_index})
    [completion] = policy.act([Turn(agent, env.observe(agent), env.unwrapped)])
    env.step(completion)
    return completion


def assert_inner_calls_decode(completion, tokenizer):
    assert completion.inner_calls, "the framework's LLM calls were recorded"
    for call in completion.inner_calls:
        assert call.has_tokens and call.prompt_token_ids
        assert tokenizer.decode(call.response_token_ids, skip_special_tokens=True) == call.text


@pytest.mark.slow
def test_autogen_assistant_solves_math_with_the_env_calculator(smollm2_tokenizer):
    current = {}

    def model(turn):  # a scripted model behind the gateway: a tool call, then the answer
        messages = turn.observation["messages"]
        if messages[-1]["role"] != "tool":
            return "I will compute it. " + tool_call("calculator", expression=current["expr"])
        result = messages[-1]["content"]
        return f"The result is {result}, so the answer is \\boxed{{{current['answer']}}}."

    env = boltzoo.make("math-v0", split="test", tool_reward=0.1)
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        policy = AutoGenPolicy(autogen_assistant("math-v0", "solver"), gateway)
        for index in range(3):
            task = env.unwrapped.tasks[index]
            current.update(expr=task.expression, answer=task.answer)
            completion = play_one_turn(env, policy, "solver", index)
            episode = env.unwrapped.episode
            assert episode.success, completion.text
            # The calculator ran in the env: counted, rewarded with the action.
            assert env.infos["solver"]["tool_calls"] == 1
            assert env.infos["solver"]["tool_errors"] == 0
            assert episode.returns()["solver"] == pytest.approx(1.1)
            assert len(completion.inner_calls) == 2
            assert_inner_calls_decode(completion, smollm2_tokenizer)
            assert completion.text == completion.inner_calls[-1].text  # the final message
            # The second call's prompt holds the result the env's calculator computed.
            second_prompt = smollm2_tokenizer.decode(completion.inner_calls[1].prompt_token_ids)
            assert f"tool\n{task.answer}<|im_end|>" in second_prompt
        assert gateway.calls() == []  # every session's calls were taken into the Completions


@pytest.mark.slow
def test_a_policy_behind_the_gateway_sees_each_calls_env_when_episodes_play_at_once(
    smollm2_tokenizer,
):
    # A model behind the gateway reads the task of each call from its Turn.env (the env of the
    # framework agent's turn, carried by the gateway session): six episodes, three at a time,
    # their calls interleaved, each answered from its own task. (What an oracle played through
    # a framework needs, for demonstrations in the framework's own tokens.)
    def model(turn):
        task = turn.env.current_task  # (None here before the gateway carried the env)
        if turn.observation["messages"][-1]["role"] != "tool":
            return tool_call("calculator", expression=task.expression)
        return f"So the answer is \\boxed{{{task.answer}}}."

    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        policy = AutoGenPolicy(autogen_assistant("math-v0", "solver"), gateway)
        episodes = boltzoo.rollout(
            "math-v0",
            {"solver": policy},
            tasks=list(range(6)),
            num_envs=3,
            progress=False,
            split="test",
            max_turns=1,
        )
        assert gateway.calls() == []  # every session's calls went into its Completion
    assert [e.failed for e in episodes] == [False] * 6
    assert all(e.success for e in episodes), [e.steps[-1].action.text for e in episodes]
    assert all(len(e.steps[0].action.inner_calls) == 2 for e in episodes)


@pytest.mark.parametrize("framework", ["openai-agents", "langgraph"])
@pytest.mark.slow
def test_a_framework_answerer_searches_the_env_index(smollm2_tokenizer, framework):
    if framework == "langgraph":
        pytest.importorskip("langgraph")
    from boltzoo.agents.examples import EXAMPLES
    from boltzoo.agents.frameworks import ADAPTERS

    current = {}

    def model(turn):  # search with the question, then answer from what came back
        messages = turn.observation["messages"]
        if messages[-1]["role"] != "tool":
            return tool_call("search", query=current["question"])
        assert "[1]" in messages[-1]["content"]  # the env's search results came back
        return f"Answer: {current['answer']}"

    env = boltzoo.make("rag-v0", split="test", agents=("answerer",), retriever="bm25")
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        policy = ADAPTERS[framework](EXAMPLES[framework]("rag-v0", "answerer"), gateway)
        for index in range(3):
            task = env.unwrapped.tasks[index]
            current.update(question=task.question, answer=task.answer)
            completion = play_one_turn(env, policy, "answerer", index)
            assert env.unwrapped.episode.success, completion.text
            assert env.infos["answerer"]["retrieved"] > 0  # the search ran in the env
            assert completion.text == f"Answer: {task.answer}"
            assert len(completion.inner_calls) == 2
            assert_inner_calls_decode(completion, smollm2_tokenizer)
            assert completion.model == f"{framework}:smol"


@pytest.mark.slow
def test_a_langgraph_react_agent_solves_sql_with_the_env_database(smollm2_tokenizer):
    pytest.importorskip("langgraph")
    from boltzoo.agents.examples import langgraph_react_agent
    from boltzoo.agents.frameworks import LangGraphPolicy

    current = {}

    def model(turn):  # a scripted model: run the gold query with the tool, then answer with it
        messages = turn.observation["messages"]
        if messages[-1]["role"] != "tool":
            return tool_call("execute_sql", query=current["query"])
        assert messages[-1]["content"] and not messages[-1]["content"].startswith("error")
        return f"```sql\n{current['query']}\n```"

    env = boltzoo.make("sql-v0", split="test", agents=("writer",))
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        policy = LangGraphPolicy(langgraph_react_agent("sql-v0", "writer"), gateway)
        for index in range(3):
            task = env.unwrapped.tasks[index]
            current.update(query=task.gold_sql)
            completion = play_one_turn(env, policy, "writer", index)
            assert env.unwrapped.episode.success, completion.text
            # the query ran in the env's sandbox (the tool call, then the answer's query)
            assert env.infos["writer"]["queries"] == 2
            assert env.infos["writer"]["query_errors"] == 0
            assert len(completion.inner_calls) == 2
            assert_inner_calls_decode(completion, smollm2_tokenizer)
            # the second call's prompt holds the rows the env's database returned
            second = smollm2_tokenizer.decode(completion.inner_calls[1].prompt_token_ids)
            assert "<|im_start|>tool" in second or "Tool result" in second
            assert completion.model == "langgraph:smol"
        assert gateway.calls() == []


def test_the_paper_sql_graph_records_each_call_under_its_node(smollm2_tokenizer):
    pytest.importorskip("langgraph")
    from boltzoo.agents.base import encode_chat
    from boltzoo.agents.examples import langgraph_sql_graph
    from boltzoo.agents.frameworks import LangGraphPolicy
    from boltzoo.envs.sql_v0 import CHECKER_SYSTEM_PROMPT, WRITER_SYSTEM_PROMPT

    current = {}

    def model(turn):  # writer: a wrong query; checker: rejects it; rewriter: the gold query
        system, user = (m["content"] for m in turn.observation["messages"])
        if system == WRITER_SYSTEM_PROMPT:
            return "```sql\nSELECT 1 WHERE 0\n```"
        if system == CHECKER_SYSTEM_PROMPT:
            right = current["gold"] in user
            return "VERDICT: CORRECT" if right else "VERDICT: INCORRECT - no rows came back"
        assert "Reviewer's feedback: no rows came back" in user
        return f"```sql\n{current['gold']}\n```"

    env = boltzoo.make("sql-v0", split="test", agents=("writer",), schema_rows=0)
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        policy = LangGraphPolicy(langgraph_sql_graph("sql-v0", "writer"), gateway)
        assert policy.nodes == ("writer", "checker", "rewriter")
        for index in range(2):
            current.update(gold=env.unwrapped.tasks[index].gold_sql)
            env.reset(options={"task_index": index})
            writer_chat = env.observe("writer")["messages"]
            completion = play_one_turn(env, policy, "writer", index)
            assert env.unwrapped.episode.success, completion.text
            assert completion.text == f"```sql\n{current['gold']}\n```"
            # write, check (rejected), rewrite, check (accepted): each call under its node
            nodes = [call.node for call in completion.inner_calls]
            assert nodes == ["writer", "checker", "rewriter", "checker"]
            assert_inner_calls_decode(completion, smollm2_tokenizer)
            # the writer node asked exactly what sql-v0's writer is asked
            assert completion.inner_calls[0].prompt_token_ids == encode_chat(
                smollm2_tokenizer, writer_chat
            )
            # the checker saw the rows the env's database returned for the rewritten query
            last_check = smollm2_tokenizer.decode(completion.inner_calls[3].prompt_token_ids)
            assert current["gold"] in last_check and "Result:" in last_check
            # the graph's queries ran in the env: two in the graph, the final one by the env
            assert env.infos["writer"]["queries"] == 3
        assert gateway.calls() == []


def test_an_oracle_checker_judges_the_graphs_own_queries_both_ways(smollm2_tokenizer):
    # Checker demonstrations for a warm start: a model writes (here one right on even tasks,
    # wrong on odd ones), the env's oracle answers the checker and rewriter nodes through a
    # gateway of its own. The checker's verdicts must be right about the queries the graph
    # actually wrote, so the demonstrations hold both verdicts, and every rejection is fixed.
    pytest.importorskip("langgraph")
    from boltzoo.agents.examples import langgraph_sql_graph
    from boltzoo.agents.frameworks import LangGraphPolicy
    from boltzoo.agents.scripted import framework_oracle

    def writer(turn):
        task = turn.env.current_task
        right = turn.env.tasks.index(task) % 2 == 0
        return f"```sql\n{task.gold_sql if right else 'SELECT 1 WHERE 0'}\n```"

    env = boltzoo.make("sql-v0", split="test", agents=("writer",), schema_rows=0)
    model = Gateway(ScriptedPolicy(writer, smollm2_tokenizer, name="writer-model"))
    oracle = Gateway(framework_oracle(smollm2_tokenizer))
    with model, oracle:
        graph = langgraph_sql_graph("sql-v0", "writer", max_rounds=1)
        gateways = {"checker": oracle, "rewriter": oracle}
        policy = LangGraphPolicy(graph, model, node_gateways=gateways)
        verdicts = []
        for index in range(4):
            completion = play_one_turn(env, policy, "writer", index)
            assert env.unwrapped.episode.success, completion.text
            calls = completion.inner_calls
            right = index % 2 == 0
            # one round: the rewrite is final, so no check of it is asked for
            assert [c.node for c in calls] == (
                ["writer", "checker"] if right else ["writer", "checker", "rewriter"]
            )
            assert calls[1].text == (
                "VERDICT: CORRECT"
                if right
                else "VERDICT: INCORRECT - the result does not answer the question."
            )
            if not right:  # the rewriter's gold query is the answer
                assert completion.text == f"```sql\n{env.unwrapped.current_task.gold_sql}\n```"
            assert_inner_calls_decode(completion, smollm2_tokenizer)
            verdicts += [c.text.split(" - ")[0] for c in calls if c.node == "checker"]
        assert sorted(set(verdicts)) == ["VERDICT: CORRECT", "VERDICT: INCORRECT"]
        # each gateway answered the calls of the nodes it serves, and no other
        assert {c.node for c in completion.inner_calls if c.model == "writer-model"} == {"writer"}


def test_the_sql_graph_gives_up_after_max_rounds_of_rejections(smollm2_tokenizer):
    pytest.importorskip("langgraph")
    from boltzoo.agents.examples import langgraph_sql_graph
    from boltzoo.agents.frameworks import LangGraphPolicy
    from boltzoo.envs.sql_v0 import CHECKER_SYSTEM_PROMPT

    def model(turn):  # the checker rejects everything: every round runs
        system = turn.observation["messages"][0]["content"]
        if system == CHECKER_SYSTEM_PROMPT:
            return "VERDICT: INCORRECT - try again"
        return "```sql\nSELECT 1\n```"

    env = boltzoo.make("sql-v0", split="test", agents=("writer",), schema_rows=0)
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        graph = langgraph_sql_graph("sql-v0", "writer", max_rounds=3)
        completion = play_one_turn(env, LangGraphPolicy(graph, gateway), "writer", 0)
    # within LangGraph's step limit: write and check, three rewrites, each but the last
    # checked (the last is final whatever the checker would say, as in the env)
    nodes = [call.node for call in completion.inner_calls]
    assert nodes == ["writer", "checker"] + ["rewriter", "checker"] * 2 + ["rewriter"]
    assert completion.text == "```sql\nSELECT 1\n```"
    # max_rounds=0: the written query is the answer, unchecked (the env's max_rounds=0)
    with Gateway(ScriptedPolicy(model, smollm2_tokenizer, name="smol")) as gateway:
        graph = langgraph_sql_graph("sql-v0", "writer", max_rounds=0)
        completion = play_one_turn(env, LangGraphPolicy(graph, gateway), "writer", 0)
    assert [call.node for call in completion.inner_calls] == ["writer"]
    with pytest.raises(ValueError, match="max_rounds must be 0 or more"):
        langgraph_sql_graph("sql-v0", "writer", max_rounds=-1)


def test_node_graphs_need_distinct_names_fit_for_a_url():
    from boltzoo.agents.frameworks import NodeGraph

    assert NodeGraph(print, ["draft", "check"]).nodes == ("draft", "check")
    for nodes in [(), ("draft", "draft"), ("draft/check",), ("a b",)]:
        with pytest.raises(ValueError, match="node names"):
            NodeGraph(print, nodes)


def test_the_sql_graph_plays_only_the_single_agent_variant():
    pytest.importorskip("langgraph")
    from boltzoo.agents.examples import langgraph_sql_graph

    with pytest.raises(ValueError, match="agents=\\['writer'\\]"):
        langgraph_sql_graph("sql-v0", "checker")
    with pytest.raises(ValueError, match="whole workflow"):
        langgraph_sql_graph("math-v0", "writer")


def test_framework_policies_run_batches_concurrently_through_rollout(smollm2_tokenizer):
    def model(turn):
        return "\\boxed{0}"  # no tool call: one LLM call per turn

    with Gateway(ScriptedPolicy(model, smollm2_tokenizer), batch_wait_s=0.05) as gateway:
        policy = AutoGenPolicy(autogen_assistant("math-v0", "solver"), gateway)
        episodes = boltzoo.rollout("math-v0", {"solver": policy}, episodes=8, progress=False)
        assert gateway.mean_batch_size > 1
    assert not any(e.failed for e in episodes)
    assert all(len(e.steps[0].action.inner_calls) == 1 for e in episodes)


def test_unknown_tool_and_bad_arguments_come_back_as_errors():
    env = boltzoo.make("math-v0")
    env.reset(options={"task_index": 0})
    raw = env.unwrapped
    assert raw.call_tool("solver", "shell", {"cmd": "rm -rf /"}).startswith("error: unknown tool")
    assert "needs the arguments" in raw.call_tool("solver", "calculator", {})
    assert raw.call_tool("solver", "calculator", {"expression": "1/0"}) == "error: division by zero"
    assert raw.call_tool("solver", "calculator", {"expression": "6*7"}) == "42"
    assert env.infos["solver"]["tool_calls"] == 2 and env.infos["solver"]["tool_errors"] == 1
