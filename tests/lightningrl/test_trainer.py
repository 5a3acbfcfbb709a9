"""The LightningRL trainer, for real: a tiny model learns, selection, kill and resume, NaN guard."""

from __future__ import annotations

import functools
import itertools
import json
from pathlib import Path

import pytest
import torch

from boltzoo.agents.models import tiny_model
from boltzoo.lightningrl import checkpoint as checkpoint_module
from boltzoo.lightningrl.rollout import evaluation_tasks
from boltzoo.lightningrl.sequences import micro_batches
from boltzoo.lightningrl.trainer import Trainer
from boltzoo.registration import make


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.slow
def test_tiny_model_learns_to_write_target_tokens(tmp_path, smollm2_tokenizer, tokens_config):
    # Reward: the fraction of response tokens in a fixed set of 3,000 of 49,152 ids (about 6%
    # by chance at the start). A working learner raises it well above that in a few steps.
    config = tokens_config(tmp_path)
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    history = trainer.train()
    start, end = history[0]["reward"], sum(m["reward"] for m in history[-2:]) / 2
    assert start < 0.15
    assert end > 0.3 and end > 3 * start
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == list(range(1, 9))
    assert trainer.sampling.trained["policy"].version == 8


@pytest.mark.slow
def test_untrained_agents_keep_bit_identical_weights(tmp_path, smollm2_tokenizer, trainer_config):
    config = trainer_config(
        tmp_path,
        env="sql-v0",
        env_kwargs={"split": "test"},
        train_agents=["writer"],
        steps=2,
        entropy_coef=0.1,
    )
    model = tiny_model(len(smollm2_tokenizer))
    before = weights(model)
    trainer = Trainer(config, model=model, tokenizer=smollm2_tokenizer)
    policies = trainer.sampling.by_agent()
    assert policies["writer"] is trainer.sampling.trained["policy"]
    assert policies["checker"] is policies["rewriter"] is trainer.sampling.frozen
    trainer.train()
    frozen = weights(trainer.sampling.frozen.model)
    assert all(torch.equal(frozen[k], before[k]) for k in before)
    trained = weights(trainer.weights.model)
    assert any(not torch.equal(trained[k], before[k]) for k in before)  # the writer learned


@pytest.mark.parametrize("sampling", ["uniform", "learnability"])
@pytest.mark.slow
def test_killed_and_resumed_run_matches_one_that_ran_straight_through(
    tmp_path, smollm2_tokenizer, tokens_config, sampling
):
    # learnability: the next tasks depend on the outcomes so far, which the checkpoint keeps
    tokens_config = functools.partial(tokens_config, task_sampling=sampling)
    straight = Trainer(
        tokens_config(tmp_path / "a", steps=4, save_every=2),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    straight_history = straight.train()

    first = Trainer(
        tokens_config(tmp_path / "b", steps=2, save_every=2),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    first.train()
    del first  # the process "dies" after its checkpoint
    resumed = Trainer(
        tokens_config(tmp_path / "b", steps=4, save_every=2),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    assert resumed.resume() and resumed.step == 2
    resumed_history = resumed.train()

    assert [m["reward"] for m in resumed_history] == [m["reward"] for m in straight_history[2:]]
    a, b = weights(straight.weights.model), weights(resumed.weights.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    if sampling == "learnability":
        assert resumed.task_sampler.state_dict() == straight.task_sampler.state_dict()
        assert all(0 < m["task_learnability"] <= 0.25 for m in straight_history)
        # the outcomes so far moved the draws off the prior (every pool 0.25)
        assert straight_history[-1]["task_learnability"] != 0.25


def test_learnability_sampling_pools_by_a_field_the_tasks_have(
    tmp_path, smollm2_tokenizer, trainer_config
):
    config = trainer_config(tmp_path, task_sampling="learnability", task_pool_field="template")
    with pytest.raises(ValueError, match="no field 'template'; theirs: prompt, task_id"):
        Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)


@pytest.mark.slow
def test_checkpoint_interrupted_mid_write_is_never_used(
    tmp_path, smollm2_tokenizer, monkeypatch, tokens_config
):
    trainer = Trainer(
        tokens_config(tmp_path, steps=2),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    trainer.train_step()
    good = trainer.save()
    trainer.train_step()

    def dies(*args, **kwargs):
        raise KeyboardInterrupt("killed while writing state.pt")

    monkeypatch.setattr(checkpoint_module.torch, "save", dies)
    with pytest.raises(KeyboardInterrupt):
        trainer.save()
    monkeypatch.undo()
    root = tmp_path / "run" / "checkpoints"
    assert checkpoint_module.latest_checkpoint(root) == good
    assert list(root.glob(".tmp-step-*"))  # the half-written folder is there, but ignored
    fresh = Trainer(
        tokens_config(tmp_path, steps=2),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    assert fresh.resume() and fresh.step == 1


@pytest.mark.slow
def test_a_run_ending_on_a_save_every_step_saves_it_once(
    tmp_path, smollm2_tokenizer, monkeypatch, tokens_config
):
    import boltzoo.lightningrl.trainer as trainer_module

    saved = []
    real_save = trainer_module.save_checkpoint
    monkeypatch.setattr(
        trainer_module,
        "save_checkpoint",
        lambda root, step, *args, **kw: saved.append(step) or real_save(root, step, *args, **kw),
    )
    config = tokens_config(tmp_path, steps=4, save_every=2)
    Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer).train()
    assert saved == [2, 4]


@pytest.mark.slow
def test_saving_a_step_again_killed_midway_keeps_its_first_copy(
    tmp_path, smollm2_tokenizer, monkeypatch, tokens_config
):
    trainer = Trainer(
        tokens_config(tmp_path, steps=2),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    trainer.train_step()
    first = trainer.save()
    weights_before = checkpoint_module.load_checkpoint(first)[0]
    real_replace = checkpoint_module.os.replace

    def dies_renaming_the_new_copy_in(source, target):
        if Path(source).name.startswith(".tmp-step-"):
            raise KeyboardInterrupt("killed between moving the old copy aside and renaming")
        real_replace(source, target)

    monkeypatch.setattr(checkpoint_module.os, "replace", dies_renaming_the_new_copy_in)
    with pytest.raises(KeyboardInterrupt):
        trainer.save()  # step 1 again
    monkeypatch.undo()
    found = checkpoint_module.latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert found is not None  # the first copy, complete, under its temporary name
    weights = checkpoint_module.load_checkpoint(found)[0]
    assert all(torch.equal(weights[k], v) for k, v in weights_before.items())
    fresh = Trainer(
        tokens_config(tmp_path, steps=2),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    assert fresh.resume() and fresh.step == 1
    assert fresh.save().name == "step-000001"  # and the next save cleans up
    assert not list((tmp_path / "run" / "checkpoints").glob(".replaced-*"))


@pytest.mark.slow
def test_non_finite_loss_skips_the_update(tmp_path, smollm2_tokenizer, monkeypatch, tokens_config):
    import boltzoo.lightningrl.update as update_module

    real_loss = update_module.policy_loss

    def nan_loss(*args, **kwargs):
        out = real_loss(*args, **kwargs)
        out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(update_module, "policy_loss", nan_loss)
    trainer = Trainer(
        tokens_config(tmp_path, steps=1),
        model=tiny_model(len(smollm2_tokenizer)),
        tokenizer=smollm2_tokenizer,
    )
    before = weights(trainer.weights.model)
    metrics = trainer.train_step()
    assert metrics["skipped_updates"] == 1
    after = weights(trainer.weights.model)
    assert all(torch.equal(after[k], before[k]) for k in before)


def test_micro_batches_bucket_by_length_within_the_token_budget():
    from boltzoo.lightningrl.transitions import Transition

    def t(prompt, response):
        return Transition("a", "t", 0, "e", 0, 0, 0, [1] * prompt, [2] * response, None, 0.0)

    batch = [t(50, 10), t(5, 5), t(100, 20), t(6, 4), t(48, 12)]
    buckets = micro_batches(batch, max_tokens=130)
    lengths = [[len(x.prompt_token_ids) + len(x.response_token_ids) for x in b] for b in buckets]
    # sorted by length; a bucket grows while (sequences x longest) stays within 130 tokens
    assert lengths == [[10, 10], [60, 60], [120]]


def test_evaluation_tasks_spread_over_the_split_without_repeats():
    # a split ordered by database or template must be sampled across, not only its head
    picked = evaluation_tasks(600, 48)
    assert len(picked) == len(set(picked)) == 48
    assert picked[0] == 0 and picked[-1] >= 600 - 13  # from the head to the tail
    assert {b - a for a, b in itertools.pairwise(picked)} == {12, 13}
    assert evaluation_tasks(5, 64) == [0, 1, 2, 3, 4]
    assert evaluation_tasks(7, 7) == list(range(7))


def test_eval_return_is_the_trained_agents_summed_reward(
    tmp_path, smollm2_tokenizer, tokens_config
):
    # tokens-v0 pays its score once, as the reward, and has no shaping: the two must agree
    # (every id is a target: each greedy response scores 1.0, whatever the random model writes)
    vocab = len(smollm2_tokenizer)
    env_kwargs = {"vocab_size": vocab, "target_size": vocab}
    config = tokens_config(tmp_path, env_kwargs=env_kwargs, eval_tasks=8)
    trainer = Trainer(config, model=tiny_model(vocab), tokenizer=smollm2_tokenizer)
    evaluation = trainer.evaluate()
    assert evaluation["eval_failed"] == 0
    assert evaluation["eval_score"] == pytest.approx(1.0)
    assert evaluation["eval_return"] == pytest.approx(1.0)  # paid once, not per step or agent


def test_an_evaluation_logs_which_tasks_it_played_and_which_it_solved(
    tmp_path, smollm2_tokenizer, tokens_config
):
    # The tiny model's greedy answer is the same token for every tokens-v0 prompt, so a
    # quarter-vocabulary target set holds it (target_seed 0: every task solved) or not
    # (target_seed 1: none): both lists must follow.
    vocab = len(smollm2_tokenizer)
    for target_seed, solved in ((0, True), (1, False)):
        env_kwargs = {"vocab_size": vocab, "target_size": vocab // 4, "target_seed": target_seed}
        config = tokens_config(tmp_path / str(target_seed), env_kwargs=env_kwargs, eval_tasks=16)
        trainer = Trainer(config, model=tiny_model(vocab), tokenizer=smollm2_tokenizer)
        evaluation = trainer.evaluate()
        kwargs = config.env_kwargs | config.eval_env_kwargs
        num_tasks = make(trainer.env_id, **kwargs).unwrapped.num_tasks
        assert evaluation["eval_task_ids"] == evaluation_tasks(num_tasks, 16)
        assert evaluation["eval_right"] == (evaluation["eval_task_ids"] if solved else [])
        assert evaluation["eval_success_rate"] == float(solved)


@pytest.mark.slow
def test_a_step_reports_the_share_of_groups_that_teach_nothing(
    tmp_path, smollm2_tokenizer, tokens_config
):
    vocab = len(smollm2_tokenizer)
    # every id a target: every sample scores 1.0, so every group's rewards are equal
    config = tokens_config(
        tmp_path / "equal", env_kwargs={"vocab_size": vocab, "target_size": vocab}
    )
    trainer = Trainer(config, model=tiny_model(vocab), tokenizer=smollm2_tokenizer)
    metrics = trainer.train_step()
    assert metrics["frac_reward_zero_std"] == 1.0 and metrics["advantage_std"] == 0.0
    # the default targets: samples score differently within a group
    config = tokens_config(tmp_path / "mixed")
    trainer = Trainer(config, model=tiny_model(vocab), tokenizer=smollm2_tokenizer)
    metrics = trainer.train_step()
    assert 0.0 <= metrics["frac_reward_zero_std"] < 1.0 and metrics["advantage_std"] > 0


@pytest.mark.parametrize("estimator", ["rloo", "reinforce++"])
@pytest.mark.slow
def test_every_estimator_spelled_as_the_config_spells_it_trains(
    tmp_path, smollm2_tokenizer, tokens_config, estimator
):
    config = tokens_config(tmp_path, steps=2, estimator=estimator)
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    before = weights(trainer.weights.model)
    history = trainer.train()
    assert [m["step"] for m in history] == [1, 2] and history[0]["advantage_std"] > 0
    assert any(not torch.equal(v, trainer.weights.model.state_dict()[k]) for k, v in before.items())


def test_micro_batches_default_to_the_devices_size_and_steps_report_memory(
    tmp_path, smollm2_tokenizer, trainer_config
):
    def trainer(**overrides):
        config = trainer_config(tmp_path, **overrides)
        return Trainer(
            config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer
        )

    assert trainer().learner.micro_batch_tokens == 1024  # the CPU's default
    with trainer(micro_batch_tokens=300) as explicit:
        assert explicit.learner.micro_batch_tokens == 300
        metrics = explicit.train_step()
    # the process's memory now and at its peak, in MiB (the kernel counts the two a little
    # differently: the peak may read a few pages under the current figure)
    assert metrics["rss_mib"] > 100 and metrics["peak_rss_mib"] > 100


def test_each_step_writes_samples_of_what_the_model_wrote_and_the_credit_it_got(
    tmp_path, smollm2_tokenizer, tokens_config
):
    config = tokens_config(tmp_path, steps=2, samples_per_step=3)
    model = tiny_model(len(smollm2_tokenizer))
    Trainer(config, model=model, tokenizer=smollm2_tokenizer).train()
    lines = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    assert [r["step"] for r in rows] == [1, 1, 1, 2, 2, 2]
    assert all(r["agent"] == "writer" and r["response"] and "prompt_end" in r for r in rows)
    assert all(isinstance(r["reward"], float) and isinstance(r["advantage"], float) for r in rows)
    assert len({r["episode_id"] for r in rows if r["step"] == 1}) == 3  # spread over episodes


def test_a_time_limited_run_expects_the_steps_its_time_holds(
    tmp_path, trainer_config, smollm2_tokenizer, capsys
):
    # The progress bar's total (and so its time estimate): with max_train_minutes, the steps the
    # time left holds at the mean step time so far, not config.steps (a run of "1000 steps"
    # that stops after 18 would show an estimate of days); unknown before the first step.
    def trainer(config):
        model = tiny_model(len(smollm2_tokenizer))
        return Trainer(config, model=model, tokenizer=smollm2_tokenizer)

    with trainer(trainer_config(tmp_path, steps=1000)) as run:
        assert run.expected_steps() == 1000  # no time limit: the steps asked for
    config = trainer_config(tmp_path / "timed", steps=1000, max_train_minutes=1.0)
    with trainer(config) as run:
        assert run.expected_steps() is None
        run.step, run.train_seconds = 2, 20.0  # 10 s a step, 40 s left: 4 more
        assert run.expected_steps() == 6
        run.step, run.train_seconds = 3, 45.0  # 15 s a step, 15 s left: 1 more
        assert run.expected_steps() == 4
        run.step, run.train_seconds = 5, 61.0  # the limit passed: this is the last
        assert run.expected_steps() == 5
        run.config.steps = 3  # steps end it sooner than the time
        run.step, run.train_seconds = 1, 1.0
        assert run.expected_steps() == 3
    # a real run with its bar: its one step passes a limit of 6 ms, and the bar ends at 1 of 1
    # (it counted to 1000 before)
    config = trainer_config(tmp_path / "real", steps=1000, max_train_minutes=0.0001)
    with trainer(config) as run:
        run.config.progress = True
        capsys.readouterr()
        assert len(run.train()) == 1
    bar = capsys.readouterr().err
    assert "1/1 [" in bar and "/1000" not in bar
