"""Which weights act for which agent: per-agent LoRA adapters on one base, a shared adapter, full
copies, a separate sampling copy kept in sync, episode aggregation, TensorBoard, LoRA export."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from boltzoo.agents import models
from boltzoo.agents.models import tiny_model
from boltzoo.lightningrl.sequences import micro_batches, pack_calls
from boltzoo.lightningrl.trainer import Trainer
from boltzoo.lightningrl.transitions import Transition, flatten
from boltzoo.lightningrl.weights import merged_state_dict

AGENTS = ("searcher", "answerer")
# rag-v0 with one BM25 search: both agents act in every episode, whatever a tiny model writes
ENV_KWARGS = {"retriever": "bm25", "max_searches": 1, "k": 2}


@pytest.fixture
def team_trainer(trainer_config, smollm2_tokenizer):
    """``team_trainer(folder, **overrides)``: a Trainer of a tiny model on rag-v0 with searcher
    and answerer, both trained, LoRA r=4."""

    def make(folder, **overrides):
        values = dict(
            env="rag-v0",
            env_kwargs=ENV_KWARGS,
            max_new_tokens=6,
            lora_r=4,
            lora_alpha=8,
            policy_map={"searcher": "searcher", "answerer": "answerer"},
        )
        config = trainer_config(folder, **(values | overrides))
        return Trainer(
            config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer
        )

    return make


def team_transitions(trainer) -> list[Transition]:
    """Transitions of both agents from a real rollout, with fixed non-zero advantages (a tiny
    model earns no math reward, so real advantages would all be zero)."""
    from boltzoo.lightningrl.rollout import rollout

    episodes = rollout(
        trainer.env_id,
        trainer.sampling.by_agent(),
        tasks=[0, 1],
        seed=0,
        progress=False,
        **trainer.config.env_kwargs,
    )
    transitions = flatten(episodes, "identical", list(AGENTS))
    assert {t.agent for t in transitions} == set(AGENTS)
    rng = np.random.default_rng(0)
    for t in transitions:
        t.advantage = float(rng.choice([-1.0, 1.0]))
    return transitions


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def snapshot_lora(trainer):
    return {k: v for k, v in snapshot(trainer.weights.model).items() if ".lora_" in k}


def adapter_keys(state, name):
    return [k for k in state if f".lora_A.{name}." in k or f".lora_B.{name}." in k]


def test_each_agent_samples_with_its_own_adapter_on_one_base(
    tmp_path, smollm2_tokenizer, team_trainer
):
    trainer = team_trainer(tmp_path)
    policies = trainer.sampling.by_agent()
    assert policies["searcher"].adapter == "searcher" and policies["answerer"].adapter == "answerer"
    assert (
        policies["searcher"].model is policies["answerer"].model is trainer.weights.model
    )  # one base
    trainable = {n for n, p in trainer.weights.model.named_parameters() if p.requires_grad}
    base = [n for n, _ in trainer.weights.model.named_parameters() if ".lora_" not in n]
    assert base and not trainable & set(base)  # the base is frozen


def test_separate_adapters_learn_only_from_their_own_agents_transitions(
    tmp_path, smollm2_tokenizer, team_trainer
):
    both = team_trainer(tmp_path / "both")
    searcher_only = team_trainer(tmp_path / "searcher")
    transitions = team_transitions(both)
    initial = snapshot(both.weights.model)
    assert all(torch.equal(initial[k], v) for k, v in snapshot(searcher_only.weights.model).items())

    both.update(transitions)
    searcher_only.update([t for t in transitions if t.agent == "searcher"])
    after_both, after_searcher = snapshot(both.weights.model), snapshot(searcher_only.weights.model)

    searcher_keys = adapter_keys(initial, "searcher")
    answerer_keys = adapter_keys(initial, "answerer")
    assert searcher_keys and answerer_keys
    # the searcher's adapter: the same update whether or not the answerer's calls were there
    assert any(not torch.equal(after_both[k], initial[k]) for k in searcher_keys)
    for k in searcher_keys:
        torch.testing.assert_close(after_both[k], after_searcher[k], rtol=0, atol=1e-7)
    # the answerer's adapter moves only from the answerer's own calls
    assert any(not torch.equal(after_both[k], initial[k]) for k in answerer_keys)
    assert all(torch.equal(after_searcher[k], initial[k]) for k in answerer_keys)
    # and the base never moves
    base_keys = [k for k in initial if ".lora_" not in k]
    assert all(torch.equal(after_both[k], initial[k]) for k in base_keys)


def test_a_shared_adapter_learns_from_every_agent(tmp_path, smollm2_tokenizer, team_trainer):
    trainer = team_trainer(tmp_path, policy_map={})
    assert trainer.weights.names == ["policy"]
    assert trainer.sampling.by_agent()["searcher"] is trainer.sampling.by_agent()["answerer"]
    transitions = [t for t in team_transitions(trainer) if t.agent == "answerer"]
    initial = snapshot(trainer.weights.model)
    trainer.update(transitions)
    after = snapshot(trainer.weights.model)
    assert any(not torch.equal(after[k], initial[k]) for k in adapter_keys(initial, "policy"))


def test_agents_with_their_own_full_models(tmp_path, smollm2_tokenizer, team_trainer):
    trainer = team_trainer(tmp_path, lora_r=0)
    searcher, answerer = trainer.weights.modules["searcher"], trainer.weights.modules["answerer"]
    assert searcher is not answerer
    initial_answerer = snapshot(answerer)
    trainer.update([t for t in team_transitions(trainer) if t.agent == "searcher"])
    assert all(torch.equal(v, initial_answerer[k]) for k, v in snapshot(answerer).items())
    assert any(not torch.equal(v, initial_answerer[k]) for k, v in snapshot(searcher).items())


def test_untrained_agents_act_with_the_base_and_it_stays_bit_identical(
    tmp_path, smollm2_tokenizer, team_trainer
):
    trainer = team_trainer(tmp_path, train_agents=["searcher"], policy_map={})
    frozen = trainer.sampling.by_agent()["answerer"]
    assert frozen is trainer.sampling.frozen and frozen.adapter is None  # adapters switched off
    base_before = {k: v for k, v in snapshot(trainer.weights.model).items() if ".lora_" not in k}
    lora_before = snapshot_lora(trainer)
    prompt = trainer.sampling.trained["policy"].encode_chat(
        [{"role": "user", "content": "What is 2 + 3?"}]
    )
    frozen.sampling = frozen.sampling.__class__(4, 0.0, 1.0, ())
    before = frozen.generate_from_ids([prompt])[0]
    trainer.update([t for t in team_transitions(trainer) if t.agent == "searcher"])
    after_state = snapshot(trainer.weights.model)
    assert any(not torch.equal(after_state[k], v) for k, v in lora_before.items())  # it learned
    assert all(torch.equal(after_state[k], v) for k, v in base_before.items())
    after = frozen.generate_from_ids([prompt])[0]
    assert after.response_token_ids == before.response_token_ids
    assert after.logprobs == before.logprobs


def test_bf16_falls_back_to_fp32_where_the_cpu_has_no_native_bf16(
    tmp_path, team_trainer, monkeypatch
):
    # On an AVX2-only CPU emulated bf16 took 31x fp32's time to train and 3x to sample: what
    # must hold is that asking for bf16 there runs fp32, and says so; where bf16 is native it
    # is used.
    monkeypatch.setattr(models, "native_bf16", lambda device: False)
    settings = dict(sampler="copy", sampler_precision="bf16", precision="bf16")
    with pytest.warns(UserWarning, match="no native bf16") as warned:
        trainer = team_trainer(tmp_path / "avx2", **settings)
    said = " ".join(str(w.message) for w in warned)
    assert "the learner runs fp32" in said and "the sampling copy is fp32" in said
    assert not trainer.learner.use_bf16
    for name in ("searcher", "answerer"):
        assert next(trainer.sampling.trained[name].model.parameters()).dtype == torch.float32
    trainer.close()
    monkeypatch.setattr(models, "native_bf16", lambda device: True)
    trainer = team_trainer(tmp_path / "avx512", **settings)
    assert trainer.learner.use_bf16
    assert next(trainer.sampling.trained["searcher"].model.parameters()).dtype == torch.bfloat16
    trainer.close()


def test_a_bf16_sampling_copy_is_synced_after_every_update(
    tmp_path, smollm2_tokenizer, team_trainer, monkeypatch
):
    monkeypatch.setattr(models, "native_bf16", lambda device: True)  # whatever this CPU has
    trainer = team_trainer(tmp_path, sampler="copy", sampler_precision="bf16", steps=2)
    searcher = trainer.sampling.trained["searcher"]
    assert searcher.model is not trainer.weights.model and searcher.adapter is None
    assert next(searcher.model.parameters()).dtype == torch.bfloat16
    trainer.update(team_transitions(trainer))
    trainer.step += 1
    trainer.sampling.sync(["searcher", "answerer"], trainer.step)
    for name in ("searcher", "answerer"):
        merged = merged_state_dict(trainer.weights.model, name)
        copy = trainer.sampling.trained[name].model.state_dict()
        assert copy.keys() == merged.keys()
        assert all(torch.equal(copy[k], merged[k].to(torch.bfloat16)) for k in merged)
        assert trainer.sampling.trained[name].version == 1
    # the two copies differ: each holds its own adapter's merge
    a, b = trainer.sampling.trained["searcher"].model, trainer.sampling.trained["answerer"].model
    assert any(not torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


def test_an_fp32_sampling_copy_reproduces_the_learners_logprobs(
    tmp_path, smollm2_tokenizer, team_trainer
):
    from boltzoo.lightningrl.rollout import rollout
    from boltzoo.lightningrl.sequences import response_logprobs

    trainer = team_trainer(tmp_path, sampler="copy", sampler_precision="fp32", policy_map={})
    trainer.update(team_transitions(trainer))
    trainer.step += 1
    trainer.sampling.sync(["policy"], trainer.step)
    transitions = flatten(
        rollout(
            trainer.env_id,
            trainer.sampling.by_agent(),
            tasks=[2],
            seed=1,
            progress=False,
            **trainer.config.env_kwargs,
        ),
        "identical",
        list(AGENTS),
    )
    assert all(t.policy_version == 1 for t in transitions)
    learner = trainer.weights.module("policy")
    with torch.no_grad():
        pad = trainer.sampling.trained["policy"].pad_token_id
        logprobs, mask, _ = response_logprobs(learner, transitions, 1.0, pad)
    for row, t in enumerate(transitions):
        recomputed = logprobs[row][mask[row]].tolist()
        np.testing.assert_allclose(recomputed, t.logprobs, atol=1e-4)


def test_micro_batches_by_episode_keep_an_episodes_calls_together():
    def t(episode, length):
        return Transition("a", "t", 0, episode, 0, 0, 0, [1] * length, [2], None, 0.0)

    batch = [t("x", 10), t("y", 40), t("x", 50), t("z", 5)]
    buckets = micro_batches(batch, max_tokens=60, by_episode=True)
    assert [sorted({x.episode_id for x in b}) for b in buckets] == [["z"], ["y"], ["x"]]
    assert sum(len(b) for b in buckets) == 4


def test_episode_aggregation_does_not_depend_on_the_micro_batch_size(
    tmp_path, smollm2_tokenizer, team_trainer
):
    results = []
    for budget in (64, 100_000):
        trainer = team_trainer(
            tmp_path / str(budget),
            policy_map={},
            aggregation="episode",
            micro_batch_tokens=budget,
        )
        transitions = team_transitions(trainer)
        trainer.update(transitions)
        results.append(snapshot(trainer.weights.model))
    small, whole = results
    for k in small:
        torch.testing.assert_close(small[k], whole[k], rtol=1e-5, atol=1e-6)


def test_tensorboard_gets_every_metric(tmp_path, smollm2_tokenizer, team_trainer):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    trainer = team_trainer(tmp_path, tensorboard=True, steps=2)
    history = trainer.train()
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"reward", "success_rate", "lr", "reward/searcher", "reward/answerer"} <= tags
    rewards = [e.value for e in events.Scalars("reward")]
    assert rewards == pytest.approx([m["reward"] for m in history])


@pytest.mark.slow
def test_lora_runs_resume_bit_for_bit(tmp_path, smollm2_tokenizer, team_trainer):
    straight = team_trainer(tmp_path / "a", steps=2, save_every=1)
    straight.train()
    first = team_trainer(tmp_path / "b", steps=1, save_every=1)
    first.train()
    resumed = team_trainer(tmp_path / "b", steps=2, save_every=1)
    assert resumed.resume() and resumed.step == 1
    resumed.train()
    a, b = snapshot(straight.weights.model), snapshot(resumed.weights.model)
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_export_merges_each_agents_adapter(tmp_path, smollm2_tokenizer, trainer_config):
    from transformers import AutoModelForCausalLM

    from boltzoo.agents.models import load_model
    from boltzoo.lightningrl.policies import export_run

    base = tmp_path / "base"
    tiny_model(len(smollm2_tokenizer)).save_pretrained(base)
    smollm2_tokenizer.save_pretrained(base)
    model, tokenizer = load_model(base, device="cpu")
    config = trainer_config(
        tmp_path,
        env="rag-v0",
        env_kwargs=ENV_KWARGS,
        model=str(base),
        max_new_tokens=6,
        lora_r=4,
        policy_map={"searcher": "searcher", "answerer": "answerer"},
    )
    trainer = Trainer(config, model=model.float(), tokenizer=tokenizer)
    trainer.update(team_transitions(trainer))  # move both adapters off their no-op start
    trainer.save()
    export_run(tmp_path / "run", tmp_path / "out")
    ids = torch.tensor(
        [trainer.sampling.trained["searcher"].encode_chat([{"role": "user", "content": "2 + 3?"}])]
    )
    for name in AGENTS:
        exported = AutoModelForCausalLM.from_pretrained(tmp_path / "out" / name)
        with torch.no_grad():
            expected = trainer.weights.module(name)(input_ids=ids).logits
            got = exported(input_ids=ids).logits
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
        with torch.no_grad(), trainer.weights.model.disable_adapter():
            plain = trainer.weights.model(input_ids=ids).logits
        assert not torch.allclose(got, plain, atol=1e-4)  # the adapter is in there


@pytest.mark.parametrize("aggregation", ["token", "sequence", "episode"])
def test_calls_with_zero_advantage_are_skipped_without_changing_the_gradient(
    tmp_path, smollm2_tokenizer, aggregation, team_trainer
):
    trainer = team_trainer(tmp_path, policy_map={}, lora_r=0, aggregation=aggregation)
    transitions = team_transitions(trainer)
    for t in transitions[::2]:
        t.advantage = 0.0
    assert any(t.advantage for t in transitions)
    # the gradient of the whole batch in one pass, each call its own sequence, zero-advantage
    # calls included (the update skips them, and packs the calls that continue each other)
    model = trainer.weights.modules["policy"]
    model.train()
    trainer.learner.micro_batch_loss("policy", pack_calls(transitions, merge=False)).loss.backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    assert trainer.learner.policy_gradient_backward("policy", transitions, {}, 1.0)
    got = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    assert got.keys() == expected.keys()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-4, atol=1e-7)


def test_a_policy_map_entry_for_an_agent_that_does_not_learn_is_refused(tmp_path, team_trainer):
    from boltzoo.errors import ConfigError

    with pytest.raises(ConfigError, match=r"policy_map names agents that do not learn: "
                       r"\['answerer'\]"):  # fmt: skip
        team_trainer(tmp_path, train_agents=["searcher"])  # (both are in the fixture's map)
