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
        solver = trainer.policies()["solver"]
        assert isinstance(solver, AutoGenPolicy)
        gateway = trainer.gateways["policy"]
        assert gateway.policy is trainer.samplers["policy"]  # served by the learner's sampler

        episodes = rollout(
            trainer.env_id,
            trainer.policies(),
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
        before = {k: v.clone() for k, v in trainer.model.state_dict().items() if ".lora_" in k}
        trainer.update(transitions)
        trainer.step += 1
        trainer.sampling.sync(["policy"], trainer.step)
        after = trainer.model.state_dict()
        assert any(not torch.equal(after[k], v) for k, v in before.items())

        # the agent now calls the new weights: its next calls carry version 1
        episodes = rollout(
            trainer.env_id,
            trainer.policies(),
            tasks=[2],
            seed=1,
            progress=False,
            **trainer.config.env_kwargs,
        )
        calls = [c for e in episodes for s in e.steps for c in s.action.inner_calls]
        assert calls and all(c.policy_version == 1 for c in calls)
    assert not trainer.gateways  # closed on leaving


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
        assert isinstance(trainer.policies()["solver"], LangGraphPolicy)
        metrics = trainer.train_step()
        assert metrics["episodes"] == 4 and metrics["failed_episodes"] == 0
        assert metrics["transitions"] >= 4  # every LLM call the graph made
        assert metrics["stale_transitions"] == 0  # each with the sampler's tokens and version
        assert trainer.gateways["policy"].calls() == []  # every recorded call was taken
