"""Tests of boltzoo/lightningrl/transitions.py: episodes cut into credited LLM calls."""

from __future__ import annotations

import pytest

from boltzoo.agents.base import encode_chat
from boltzoo.episode import Completion, Episode, Step
from boltzoo.lightningrl.transitions import Transition, flatten, select_agents

# The episode of test_credit.py: writer acts at steps 0 and 2, checker at 1 and 3.
#   step  agent    writer  checker
#   0     writer    0.5     0.0      (the writer's action is made of two inner LLM calls)
#   1     checker   0.0     0.5
#   2     writer   -0.25    0.0
#   3     checker   1.0     1.0      <- terminal team reward
# R_writer = 1.25, R_checker = 1.5; writer rewards-to-go: step 0 -> 1.25, step 2 -> 0.75.
REWARDS = [
    {"writer": 0.5, "checker": 0.0},
    {"writer": 0.0, "checker": 0.5},
    {"writer": -0.25, "checker": 0.0},
    {"writer": 1.0, "checker": 1.0},
]
AGENTS = ["writer", "checker", "writer", "checker"]
MESSAGES = [{"role": "user", "content": "Write a haiku about rain."}]


def completion(t: int, **kwargs) -> Completion:
    kwargs.setdefault("prompt_token_ids", [1, 10 + t])
    kwargs.setdefault("response_token_ids", [20 + t, 2])
    kwargs.setdefault("logprobs", [-0.5, -0.25])
    kwargs.setdefault("policy_version", 3)
    kwargs.setdefault("sampling_params", {"temperature": 0.7})
    return Completion(text=f"answer {t}", **kwargs)


def episode(episode_id: str = "ep-0", *, actions=None, group=4, failed=False) -> Episode:
    actions = actions or {}
    inner = [
        completion(0, prompt_token_ids=[1, 100], response_token_ids=[101], logprobs=[-1.0]),
        completion(
            0,
            prompt_token_ids=[1, 100, 101, 102],
            response_token_ids=[103, 104],
            logprobs=[-2.0, -0.125],
            policy_version=5,
            sampling_params={"temperature": 0.9},
        ),
    ]
    default = {0: Completion(text="final", inner_calls=inner, policy_version=5)}
    steps = [
        Step(
            agent=agent,
            observation={"messages": MESSAGES},
            action=actions.get(t, default.get(t) or completion(t)),
            rewards=dict(rewards),
        )
        for t, (agent, rewards) in enumerate(zip(AGENTS, REWARDS, strict=True))
    ]
    return Episode(
        episode_id=episode_id,
        env_id="boltzoo/test-v0",
        task_id="task-7",
        task_index=7,
        agents=["writer", "checker"],
        steps=steps,
        terminated=True,
        failed=failed,
        metadata={"group": group, "job": 0},
    )


def where(t: Transition) -> tuple[str, int, int]:
    return (t.agent, t.turn, t.call)


def test_inner_calls_become_transitions_with_the_steps_credit_in_order():
    transitions = flatten([episode()])
    assert [where(t) for t in transitions] == [
        ("writer", 0, 0),  # the two inner calls of step 0; the outer Completion is not a call
        ("writer", 0, 1),
        ("checker", 1, 0),
        ("writer", 2, 0),
        ("checker", 3, 0),
    ]
    # identical credit: writer R = 1.25 everywhere, checker R = 1.5.
    assert [t.reward for t in transitions] == pytest.approx([1.25, 1.25, 1.5, 1.25, 1.5])
    first, second = transitions[:2]
    assert (first.prompt_token_ids, first.response_token_ids, first.logprobs) == (
        [1, 100],
        [101],
        [-1.0],
    )
    assert (second.prompt_token_ids, second.response_token_ids, second.logprobs) == (
        [1, 100, 101, 102],
        [103, 104],
        [-2.0, -0.125],
    )
    assert (second.policy_version, second.temperature) == (5, 0.9)


def test_transition_fields_come_from_the_episode_and_completion():
    t = flatten([episode("ep-9", group=2)])[2]
    assert t == Transition(
        agent="checker",
        task_id="task-7",
        task_index=7,
        episode_id="ep-9",
        group=2,
        turn=1,
        call=0,
        prompt_token_ids=[1, 11],
        response_token_ids=[21, 2],
        logprobs=[-0.5, -0.25],
        reward=1.5,
        advantage=0.0,
        policy_version=3,
        retokenized=False,
        temperature=0.7,
    )


def test_group_is_none_without_rollout_metadata():
    ep = episode()
    ep.metadata = {}
    assert {t.group for t in flatten([ep])} == {None}


def test_returns_credit_gives_inner_calls_their_steps_reward_to_go():
    transitions = flatten([episode()], credit="returns")
    # writer step 0 -> 1.25 (both inner calls), checker step 1 -> 1.5, writer step 2 -> 0.75,
    # checker step 3 -> 1.0.
    assert [t.reward for t in transitions] == pytest.approx([1.25, 1.25, 1.5, 0.75, 1.0])


def test_discounted_credit_uses_gamma():
    transitions = flatten([episode()], credit="discounted", gamma=0.5)
    # writer 1.25 * 0.5 at step 0, 1.25 at step 2; checker 1.5 * 0.5, then 1.5.
    assert [t.reward for t in transitions] == pytest.approx([0.625, 0.625, 0.75, 1.25, 1.5])


def test_a_credit_function_is_called_per_agent_with_its_step_indices():
    seen = []

    def rule(ep, agent, steps):
        seen.append((agent, steps))
        return [float(10 * s) for s in steps]

    transitions = flatten([episode()], credit=rule)
    assert sorted(seen) == [("checker", [1, 3]), ("writer", [0, 2])]
    assert [t.reward for t in transitions] == [0.0, 0.0, 10.0, 20.0, 30.0]


def test_a_credit_function_returning_the_wrong_count_raises():
    with pytest.raises(ValueError, match="returned 1 rewards for the 2 steps"):
        flatten([episode()], credit=lambda ep, agent, steps: [1.0])


def test_train_agents_by_names():
    transitions = flatten([episode()], train_agents=["checker"])
    assert [where(t) for t in transitions] == [("checker", 1, 0), ("checker", 3, 0)]


def test_train_agents_by_regex():
    transitions = flatten([episode()], train_agents="wri.*")
    assert [where(t) for t in transitions] == [("writer", 0, 0), ("writer", 0, 1), ("writer", 2, 0)]


def test_graph_nodes_are_trained_as_agents_with_their_steps_credit():
    # step 0's action is one graph's work: a "draft" node's call, then a "review" node's
    nodes = {0: "draft", 1: "review"}
    inner = [completion(0, node=nodes[i], response_token_ids=[30 + i, 2]) for i in range(2)]
    graph = episode(actions={0: Completion(text="final", inner_calls=inner)})
    drafts = flatten([graph], train_agents=["draft"])
    assert [where(t) for t in drafts] == [("draft", 0, 0)]
    assert drafts[0].response_token_ids == [30, 2]
    assert drafts[0].reward == pytest.approx(1.25)  # the writer's return: the graph's step
    assert [where(t) for t in flatten([graph], train_agents="draft|review|checker")] == [
        ("draft", 0, 0),
        ("review", 0, 1),
        ("checker", 1, 0),
        ("checker", 3, 0),
    ]
    # a node that made no call here is known when the caller names it
    with pytest.raises(ValueError, match="unknown agents \\['rewrite'\\]"):
        flatten([graph], train_agents=["rewrite"])
    assert flatten([graph], train_agents=["rewrite"], agents=["draft", "rewrite"]) == []


def test_select_agents():
    agents = ["writer", "checker", "judge"]
    assert select_agents(agents, None) == {"writer", "checker", "judge"}
    assert select_agents(agents, ["judge"]) == {"judge"}
    assert select_agents(agents, "(writer|judge)") == {"writer", "judge"}
    # A regex must match the whole name: "check" does not select "checker".
    with pytest.raises(ValueError, match="matches none"):
        select_agents(agents, "check")
    with pytest.raises(ValueError, match=r"\['editor'\].*\['checker', 'judge', 'writer'\]"):
        select_agents(agents, ["writer", "editor"])
    with pytest.raises(ValueError, match="not a valid regex"):
        select_agents(agents, "(writer")


def test_failed_episodes_are_skipped():
    transitions = flatten([episode("bad", failed=True), episode("good")])
    assert {t.episode_id for t in transitions} == {"good"}
    assert flatten([episode("bad", failed=True)], train_agents=["writer"]) == []


def test_episodes_steps_and_calls_keep_their_order():
    transitions = flatten([episode("ep-a"), episode("ep-b")])
    assert [(t.episode_id, t.turn, t.call) for t in transitions] == [
        (e, turn, call)
        for e in ("ep-a", "ep-b")
        for turn, call in [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)]
    ]


def test_calls_with_empty_responses_are_skipped():
    empty = completion(1, response_token_ids=[], logprobs=[])
    transitions = flatten([episode(actions={1: empty})])
    assert [where(t) for t in transitions] == [
        ("writer", 0, 0),
        ("writer", 0, 1),
        ("writer", 2, 0),
        ("checker", 3, 0),
    ]


def test_plain_text_action_is_retokenized_with_the_tokenizer(smollm2_tokenizer):
    text_only = Completion(text="Rain on the window.", sampling_params={"temperature": 1.0})
    transitions = flatten([episode(actions={2: text_only})], tokenizer=smollm2_tokenizer)
    t = transitions[3]
    assert where(t) == ("writer", 2, 0)
    assert t.retokenized and t.logprobs is None
    assert t.prompt_token_ids == encode_chat(smollm2_tokenizer, MESSAGES)
    expected = smollm2_tokenizer.encode("Rain on the window.", add_special_tokens=False)
    assert t.response_token_ids == expected + [smollm2_tokenizer.eos_token_id]
    assert t.reward == pytest.approx(1.25)
    # The calls that carried token ids are untouched.
    assert not any(other.retokenized for other in transitions if other is not t)


def test_a_call_without_prompt_ids_keeps_its_response_ids_and_logprobs(smollm2_tokenizer):
    no_prompt = Completion(
        text="Rain.", response_token_ids=[11, 12, 2], logprobs=[-0.5, -1.0, -0.25]
    )
    t = flatten([episode(actions={2: no_prompt})], tokenizer=smollm2_tokenizer)[3]
    assert where(t) == ("writer", 2, 0) and t.retokenized
    assert t.prompt_token_ids == encode_chat(smollm2_tokenizer, MESSAGES)  # rebuilt
    assert t.response_token_ids == [11, 12, 2] and t.logprobs == [-0.5, -1.0, -0.25]


def test_logprobs_without_response_ids_are_dropped_with_a_warning(smollm2_tokenizer):
    unpaired = Completion(text="Rain.", logprobs=[-0.5, -1.0])
    with pytest.warns(UserWarning, match="logprobs are dropped"):
        t = flatten([episode(actions={2: unpaired})], tokenizer=smollm2_tokenizer)[3]
    assert t.retokenized and t.logprobs is None


def test_text_without_tokens_and_without_tokenizer_raises():
    text_only = Completion(text="Rain on the window.")
    with pytest.raises(ValueError, match="no token ids.*tokenizer="):
        flatten([episode(actions={2: text_only})])


def test_inner_call_without_tokens_cannot_be_rebuilt(smollm2_tokenizer):
    action = Completion(text="final", inner_calls=[Completion(text="thinking")])
    with pytest.raises(ValueError, match="inner LLM call has no prompt token ids"):
        flatten([episode(actions={0: action})], tokenizer=smollm2_tokenizer)
