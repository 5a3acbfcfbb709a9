"""Training an AutoGen agent with LightningRL: its calls go through the gateway, the learner
trains on what the gateway recorded, and the agent's code is the bundled example, unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("autogen_agentchat")

from boltzoo.agents.frameworks import AutoGenPolicy  # noqa: E402
from boltzoo.agents.models import tiny_model  # noqa: E402
from boltzoo.lightningrl.rollout import rollout  # noqa: E402
from boltzoo.lightningrl.trainer import Trainer  # noqa: E402
from boltzoo.lightningrl.transitions import flatten  # noqa: E402


def framework_trainer(trainer_config, tmp_path, tokenizer, **overrides):
    values = dict(env="math-v0", env_kwargs={"max_turns": 1}, framework="autogen", lora_r=4)
    config = trainer_config(tmp_path, **(values | overrides))
    return Trainer(config, model=tiny_model(len(tokenizer)), tokenizer=tokenizer)


def test_an_autogen_agent_learns_from_the_calls_the_gateway_recorded(
    tmp_path, smollm2_tokenizer, trainer_config
):
    with framework_trainer(trainer_config, tmp_path, smollm2_tokenizer) as trainer:
        solver = trainer.sampling.by_agent()["solver"]
        assert isinstance(solver, AutoGenPolicy)
        gateway = trainer.gateways["policy"]
        assert (
            gateway.policy is trainer.sampling.trained["policy"]
        )  # served by the learner's sampler

        episodes = rollout(
            trainer.env_id,
            trainer.sampling.by_agent(),
            tasks=[0, 1],
            seed=0,
            progress=False,
            **trainer.config.env_kwargs,
        )
        calls = [c for e in episodes for s in e.steps for c in s.action.inner_calls]
        assert calls and all(c.has_tokens and c.logprobs for c in calls)
        transitions = flatten(episodes, "identical", ["solver"])
        # one transition per LLM call the agent made, with the gateway's exact tokens
        assert [t.response_token_ids for t in transitions] == [c.response_token_ids for c in calls]
        assert [t.logprobs for t in transitions] == [c.logprobs for c in calls]
        assert all(t.policy_version == 0 for t in transitions)

        rng = np.random.default_rng(0)
        for t in transitions:
            t.advantage = float(rng.choice([-1.0, 1.0]))
        before = {
            k: v.clone() for k, v in trainer.weights.model.state_dict().items() if ".lora_" in k
        }
        trainer.update(transitions)
        trainer.step += 1
        trainer.sampling.sync(["policy"], trainer.step)
        after = trainer.weights.model.state_dict()
        assert any(not torch.equal(after[k], v) for k, v in before.items())

        # the agent now calls the new weights: its next calls carry version 1
        episodes = rollout(
            trainer.env_id,
            trainer.sampling.by_agent(),
            tasks=[2],
            seed=1,
            progress=False,
            **trainer.config.env_kwargs,
        )
        calls = [c for e in episodes for s in e.steps for c in s.action.inner_calls]
        assert calls and all(c.policy_version == 1 for c in calls)
    assert not trainer.gateways  # closed on leaving


@pytest.mark.slow
def test_a_framework_training_step_and_evaluation_run_end_to_end(
    tmp_path, smollm2_tokenizer, trainer_config
):
    with framework_trainer(trainer_config, tmp_path, smollm2_tokenizer) as trainer:
        metrics = trainer.train_step()
        assert metrics["episodes"] == 4 and metrics["failed_episodes"] == 0
        assert metrics["transitions"] >= 4  # at least one LLM call per episode
        assert trainer.gateways["policy"].calls() == []  # every recorded call was taken
        served = len(trainer.gateways["policy"].batch_sizes)
        first = trainer.evaluate()
        # the evaluation's agents called the model through the gateway, greedily: a second
        # evaluation of the same tasks plays the same episodes
        assert len(trainer.gateways["policy"].batch_sizes) > served
        assert first == trainer.evaluate()
        assert first["eval_failed"] == 0 and 0 <= first["eval_success_rate"] <= 1


def test_agent_builders_need_a_framework_and_trained_agents(
    tmp_path, smollm2_tokenizer, trainer_config
):
    def make(**config):
        return Trainer(
            trainer_config(tmp_path, env="math-v0", env_kwargs={}, **config),
            model=tiny_model(len(smollm2_tokenizer)),
            tokenizer=smollm2_tokenizer,
            agent_builders={"verifier": lambda client, tools: None},
        )

    with pytest.raises(ValueError, match="needs config.framework"):
        make()
    with pytest.raises(ValueError, match="not trained"):  # math-v0's default team: the solver
        make(framework="autogen")


def test_a_langgraph_agent_trains_from_the_calls_the_gateway_recorded(
    tmp_path, smollm2_tokenizer, trainer_config
):
    pytest.importorskip("langgraph")
    from boltzoo.agents.frameworks import LangGraphPolicy

    with framework_trainer(
        trainer_config, tmp_path, smollm2_tokenizer, framework="langgraph", temperature=1.0
    ) as trainer:
        assert isinstance(trainer.sampling.by_agent()["solver"], LangGraphPolicy)
        metrics = trainer.train_step()
        assert metrics["episodes"] == 4 and metrics["failed_episodes"] == 0
        assert metrics["transitions"] >= 4  # every LLM call the graph made
        assert metrics["stale_transitions"] == 0  # each with the sampler's tokens and version
        assert trainer.gateways["policy"].calls() == []  # every recorded call was taken


@pytest.mark.slow
def test_the_sql_graph_trains_its_writer_node_and_the_checker_calls_the_frozen_model(
    tmp_path, smollm2_tokenizer, trainer_config
):
    pytest.importorskip("langgraph")
    from boltzoo.agents.frameworks import LangGraphPolicy
    from boltzoo.lightningrl.samplers import FROZEN

    with framework_trainer(
        trainer_config,
        tmp_path,
        smollm2_tokenizer,
        env="sql-v0",
        env_kwargs={"agents": ["writer"], "schema_rows": 0},
        framework="langgraph-sql-graph",
        train_agents=["writer", "rewriter"],
        policy_map={"writer": "writer", "rewriter": "rewriter"},
        temperature=1.0,
    ) as trainer:
        # the graph's nodes are the agents: writer and rewriter learn, each its own adapter
        assert trainer.agents == ["checker", "rewriter", "writer"]
        assert trainer.train_agents == {"writer", "rewriter"}
        graph = trainer.sampling.by_agent()["writer"]
        assert isinstance(graph, LangGraphPolicy)
        for node in ("writer", "rewriter"):
            assert graph.node_gateways[node] is trainer.gateways[node]
            assert trainer.gateways[node].policy is trainer.sampling.trained[node]
        assert graph.node_gateways["checker"] is trainer.gateways[FROZEN]
        assert trainer.gateways[FROZEN].policy is trainer.sampling.frozen

        def play(tasks, seed):
            episodes = rollout(
                trainer.env_id,
                trainer.sampling.by_agent(),
                tasks=tasks,
                seed=seed,
                progress=False,
                **trainer.config.env_kwargs,
            )
            assert not any(e.failed for e in episodes)
            calls = [c for e in episodes for s in e.steps for c in s.action.inner_calls]
            return episodes, {node: [c for c in calls if c.node == node] for node in graph.nodes}

        episodes, calls = play([0, 1], seed=0)
        assert len(calls["writer"]) == 2 and len(calls["checker"]) >= 2  # one write, 1+ checks
        assert {c.model for c in calls["writer"]} == {trainer.sampling.trained["writer"].name}
        assert {c.model for c in calls["checker"]} == {trainer.sampling.frozen.name}
        transitions = flatten(episodes, "identical", ["writer"])
        # the writer node's calls, and only those, with the gateway's exact tokens
        assert {t.agent for t in transitions} == {"writer"}
        assert [t.response_token_ids for t in transitions] == [
            c.response_token_ids for c in calls["writer"]
        ]

        for t, sign in zip(transitions, [1.0, -1.0], strict=True):
            t.advantage = sign
        state = {k: v.clone() for k, v in trainer.weights.model.state_dict().items()}
        trainer.update(transitions)
        trainer.step += 1
        trainer.sampling.sync(["writer"], trainer.step)
        after = trainer.weights.model.state_dict()
        changed = {k for k, v in state.items() if not torch.equal(after[k], v)}
        assert changed and all(".writer." in k for k in changed)  # the writer's adapter only

        _, calls = play([2], seed=1)
        assert all(c.policy_version == 1 for c in calls["writer"])  # the new weights
        assert {c.model for c in calls["checker"]} == {trainer.sampling.frozen.name}

        metrics = trainer.train_step()
        assert metrics["failed_episodes"] == 0 and metrics["stale_transitions"] == 0
        # one writer call an episode, and a rewriter call for each rejection
        assert metrics["transitions"] >= metrics["episodes"]
        assert {"reward/writer", "reward/rewriter"} <= set(metrics)
        assert all(not g.calls() for g in trainer.gateways.values())


def test_a_bundled_graph_framework_refuses_plain_agent_builders(
    tmp_path, smollm2_tokenizer, trainer_config
):
    pytest.importorskip("langgraph")
    config = trainer_config(
        tmp_path, env="sql-v0", env_kwargs={"agents": ["writer"]}, framework="langgraph-sql-graph"
    )
    with pytest.raises(ValueError, match="must be graphs"):
        Trainer(
            config,
            model=tiny_model(len(smollm2_tokenizer)),
            tokenizer=smollm2_tokenizer,
            agent_builders={"writer": lambda model, tools: None},
        )


def test_a_trainer_that_fails_while_setting_up_stops_the_gateways_it_started(
    tmp_path, smollm2_tokenizer, trainer_config, monkeypatch
):
    from boltzoo.agents import gateway as gateway_module

    started = []
    real_start = gateway_module.Gateway.start

    def start(self):
        started.append(self)
        return real_start(self)

    def fails(self, run_dir):
        raise RuntimeError("the warm start is unreadable")

    from boltzoo.lightningrl import trainer as trainer_module

    monkeypatch.setattr(gateway_module.Gateway, "start", start)
    monkeypatch.setattr(trainer_module, "adopt_weight_settings", lambda *args: None)
    monkeypatch.setattr(Trainer, "load_weights_from", fails)
    with pytest.raises(RuntimeError, match="unreadable"):
        framework_trainer(trainer_config, tmp_path, smollm2_tokenizer, init_from=str(tmp_path))
    assert started  # the gateways were up when it failed, and are stopped now
    assert not any(g._serving.serving for g in started)
