"""Batched rollouts: one policy call per tick per policy, groups, and failures that stay local."""

import pytest

import boltzoo
from boltzoo.agents import OraclePolicy
from boltzoo.episode import Completion


class CountingPolicy:
    """Answers every turn correctly via the env's oracle and records each batch size."""

    def __init__(self):
        self.batches = []

    def act(self, turns):
        self.batches.append(len(turns))
        return [turn.env.oracle_action(turn.agent) for turn in turns]


def test_every_pending_turn_goes_to_the_policy_in_one_batch():
    policy = CountingPolicy()
    episodes = boltzoo.rollout("math-v0", {"solver": policy}, episodes=12, progress=False)
    # The oracle calls the calculator, then answers: two ticks, each with every episode's turn.
    assert policy.batches == [12, 12]
    assert all(e.success for e in episodes)


def test_agents_sharing_a_policy_share_its_batches():
    policy = CountingPolicy()
    boltzoo.rollout(
        "math-v0",
        {"solver": policy, "verifier": policy},
        episodes=5,
        agents=("solver", "verifier"),
        progress=False,
    )
    # all solvers (a calculator turn, then the answer), then all verifiers
    assert policy.batches == [5, 5, 5]


def test_tasks_and_group_size_give_groups_of_the_same_task():
    episodes = boltzoo.rollout(
        "math-v0", {"solver": OraclePolicy()}, tasks=[4, 9, 2], group_size=3, progress=False
    )
    assert [e.task_index for e in episodes] == [4, 4, 4, 9, 9, 9, 2, 2, 2]
    assert [e.metadata["group"] for e in episodes] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert len({e.episode_id for e in episodes}) == 9


def test_seed_makes_rollouts_repeatable(tiny_policy):
    def run(seed):
        # a sampling model (temperature 1), fresh each time: its samples repeat with its seed
        episodes = boltzoo.rollout(
            "math-v0",
            {"solver": tiny_policy(seed=0, max_new_tokens=6)},
            episodes=6,
            seed=seed,
            progress=False,
            max_turns=1,
        )
        return [e.task_id for e in episodes], [
            e.steps[0].action.response_token_ids for e in episodes
        ]

    tasks, samples = run(7)
    assert run(7) == (tasks, samples)
    other_tasks, _ = run(8)
    assert other_tasks != tasks  # the seed draws the tasks


def test_failing_policy_or_bad_action_marks_only_its_episodes_failed():
    def flaky(obs):
        # raises on some tasks, returns a non-text action on others
        number = int(obs["task_id"].encode().hex(), 16)
        if number % 3 == 0:
            raise RuntimeError("backend fell over")
        if number % 3 == 1:
            return 123
        return Completion(text="\\boxed{0}")

    episodes = boltzoo.rollout("math-v0", {"solver": flaky}, episodes=30, progress=False)
    failed = [e for e in episodes if e.failed]
    assert 0 < len(failed) < 30
    assert all("backend fell over" in e.error or "must be text" in e.error for e in failed)
    assert all(e.terminated for e in episodes if not e.failed)


def test_missing_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="verifier"):
        boltzoo.rollout(
            "math-v0", {"solver": OraclePolicy()}, episodes=1, agents=("solver", "verifier")
        )


def test_episode_past_its_timeout_is_marked_failed_and_the_others_finish():
    import time

    def slow_on_one_task(obs):
        if obs["task_id"] == slow_task:
            time.sleep(0.3)
            return "still thinking"  # never answers: the episode would run to max_turns
        return "\\boxed{0}"

    env = boltzoo.make("math-v0")
    slow_task = env.unwrapped.tasks[1].task_id
    episodes = boltzoo.rollout(
        "math-v0",
        {"solver": slow_on_one_task},
        tasks=[0, 1, 2],
        episode_timeout_s=0.5,
        max_turns=6,
        progress=False,
    )
    assert [e.failed for e in episodes] == [False, True, False]
    assert "TimeoutError" in episodes[1].error


def test_an_envs_own_tasks_rows_go_in_env_kwargs_beside_the_task_indices():
    rows = [{"question": f"What is {n} + {n}?", "answer": 2 * n, "expression": f"{n}+{n}"}
            for n in (3, 5, 7)]  # fmt: skip
    episodes = boltzoo.rollout(
        "math-v0", {"solver": CountingPolicy()}, tasks=[2, 0], env_kwargs={"tasks": rows},
        progress=False,
    )  # fmt: skip
    played = boltzoo.make("math-v0", tasks=rows).unwrapped.tasks
    assert [e.task_id for e in episodes] == [played[2].task_id, played[0].task_id]
    assert all(e.success for e in episodes)
    with pytest.raises(TypeError, match=r"given twice: \['level'\]"):
        boltzoo.rollout("math-v0", {"solver": CountingPolicy()}, episodes=1, progress=False,
                        env_kwargs={"level": "easy"}, level="hard")  # fmt: skip


def test_every_env_a_rollout_makes_is_closed(monkeypatch):
    from boltzoo.envs.base import LLMTurnEnv

    made, closed = [], []
    real_init, real_close = LLMTurnEnv.__init__, LLMTurnEnv.close

    def init(self, *args, **kwargs):
        made.append(id(self))
        real_init(self, *args, **kwargs)

    def close(self):
        closed.append(id(self))
        real_close(self)

    monkeypatch.setattr(LLMTurnEnv, "__init__", init)
    monkeypatch.setattr(LLMTurnEnv, "close", close)
    boltzoo.rollout("math-v0", {"solver": CountingPolicy()}, episodes=3, progress=False)
    assert len(made) == 4  # one to read the tasks and agents, three to play
    assert sorted(set(closed)) == sorted(made)
