"""LightningRL trains agent programs: the calls a program made through the gateway are its
transitions, its roles are agents that train_agents selects, and a failing program's group is
dropped and counted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from boltzoo.agents.models import tiny_model
from boltzoo.lightningrl.trainer import Trainer

PROGRAMS = Path(__file__).parents[1] / "agents" / "programs"
EXAMPLES = Path(__file__).parents[2] / "examples" / "agent_programs"
PROMPTS = [{"id": str(i), "prompt": f"Write something. ({i})"} for i in range(16)]


@pytest.fixture
def target_set_env(monkeypatch, smollm2_tokenizer):
    """The programs' own judge: 3,000 target ids of SmolLM2's vocabulary (as tokens-v0's)."""
    monkeypatch.setenv("VOCAB", str(len(smollm2_tokenizer)))
    monkeypatch.setenv("TARGET", "3000")


def record_episodes(trainer, monkeypatch) -> list:
    """Return the list that every episode the trainer plays is appended to."""
    played, rollout = [], trainer.sampling.rollout

    def recorded(*args, **kwargs):
        episodes = rollout(*args, **kwargs)
        played.extend(episodes)
        return episodes

    monkeypatch.setattr(trainer.sampling, "rollout", recorded)
    return played


@pytest.mark.slow
def test_a_tiny_model_learns_from_a_programs_calls_and_the_reward_it_reports(
    tmp_path, smollm2_tokenizer, tokens_config, target_set_env
):
    # prompts-v0 pays what the program reports: the fraction of its reply's tokens in the set
    # (about 6% by chance). The learner sees only the calls the gateway recorded. (4 passes
    # over each step's samples: in process this setting rose to 0.23-0.41 by step 6 for
    # seeds 0, 1 and 2, where one pass left seeds 1 and 2 near chance after 8 steps; through
    # programs the gateway's batches differ run to run, and so do the samples: three runs
    # ended at 0.21, 0.17 and 0.62 from 0.04.)
    config = tokens_config(
        tmp_path,
        env="prompts-v0",
        env_kwargs={"tasks": PROMPTS},
        agent_command=f"{sys.executable} {PROGRAMS}/token_reward.py",
        steps=8,
        epochs_per_step=4,
    )
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    with trainer:
        history = trainer.train()
    # (8 steps, the last 3 averaged: at 6 steps and 2 averaged, 2 runs in about 9 ended under
    # the bar here on 2026-12-06, one sample of the gateway's batching away from it)
    start, end = history[0]["reward"], sum(m["reward"] for m in history[-3:]) / 3
    assert start < 0.15
    assert end > 0.12 and end > 3 * start
    assert all(m["failed_episodes"] == 0 and m["stale_transitions"] == 0 for m in history)
    assert trainer.sampling.trained["policy"].version == 8


@pytest.mark.slow
def test_only_the_selected_role_of_a_program_learns_the_other_calls_the_frozen_model(
    tmp_path, smollm2_tokenizer, trainer_config, target_set_env, monkeypatch
):
    config = trainer_config(
        tmp_path,
        env="prompts-v0",
        env_kwargs={"tasks": PROMPTS},
        agent_command=f"{sys.executable} {PROGRAMS}/two_roles.py",
        agent_roles=["critic"],
        train_agents=["critic"],
        lora_r=4,
        steps=2,
        tasks_per_step=2,
        group_size=4,
        lr=5e-2,
    )
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    base = {
        n: p.detach().clone()
        for n, p in trainer.weights.model.named_parameters()
        if "lora" not in n
    }
    adapter = [p.detach().clone() for p in trainer.weights.parameters["policy"]]
    played = record_episodes(trainer, monkeypatch)
    with trainer:
        history = trainer.train()
    assert all(m["failed_episodes"] == 0 for m in history)
    calls = [c for e in played for s in e.steps for c in s.action.inner_calls]
    assert {c.node for c in calls} == {None, "critic"}  # the env's agent and the role
    # the role calls its policy; the agent (not trained) the frozen initial model
    assert {c.model for c in calls if c.node == "critic"} == {"tiny:policy"}
    assert {c.model for c in calls if c.node is None} == {"tiny@0"}
    assert [m["transitions"] for m in history] == [8, 8]  # one per critic call only
    assert not all(
        torch.equal(a, p)
        for a, p in zip(adapter, trainer.weights.parameters["policy"], strict=True)
    )
    after = {n: p for n, p in trainer.weights.model.named_parameters() if "lora" not in n}
    assert all(torch.equal(base[n], after[n]) for n in base)  # the frozen base never moves


@pytest.mark.slow
def test_the_sql_team_example_trains_the_writer_and_serves_the_checker_frozen(
    tmp_path, smollm2_tokenizer, trainer_config, monkeypatch
):
    config = trainer_config(
        tmp_path,
        env="sql-v0",
        env_kwargs={"agents": ["writer"], "split": "test"},
        agent_command=f"{sys.executable} {EXAMPLES}/sql_team.py",
        agent_roles=["checker"],
        train_agents=["writer"],
        lora_r=4,
        steps=1,
    )
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    played = record_episodes(trainer, monkeypatch)
    with trainer:
        (metrics,) = trainer.train()
    assert metrics["failed_episodes"] == 0, [e.error for e in played]
    calls = [c for e in played for s in e.steps for c in s.action.inner_calls]
    checker = [c for c in calls if c.node == "checker"]
    writer = [c for c in calls if c.node is None]
    assert len(checker) == 4 and len(writer) >= 4  # a draft each (a rewrite when rejected)
    assert {c.model for c in checker} == {"tiny@0"} and {c.model for c in writer} == {"tiny:policy"}
    assert metrics["transitions"] == len(writer)


def test_a_failing_program_drops_its_groups_counts_them_and_the_run_goes_on(
    tmp_path, smollm2_tokenizer, trainer_config, monkeypatch
):
    monkeypatch.setenv("FAULT", "crash")
    monkeypatch.setenv("FAULT_TASK", "*")
    monkeypatch.setenv("FAULT_LOG", str(tmp_path / "fault.jsonl"))
    config = trainer_config(
        tmp_path,
        env="math-v0",
        env_kwargs={"level": "easy", "max_turns": 1},
        agent_command=f"{sys.executable} {PROGRAMS}/fault.py",
        steps=2,
    )
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    with trainer:
        history = trainer.train()
    assert [m["step"] for m in history] == [1, 2]
    assert all(m["failed_episodes"] == 4 and m["dropped_groups"] == 2 for m in history)
    assert all(m["transitions"] == 0 for m in history)
