"""After a run: learning-curve figures and a plain transformers export of the latest checkpoint."""

from __future__ import annotations

import json

import pytest
import torch

from boltzoo.cli import main
from boltzoo.errors import DatasetError, RunFolderError
from boltzoo.lightningrl.policies import export_run
from boltzoo.lightningrl.report import (
    compare_evaluations,
    compare_runs,
    paired_outcomes,
    plot_run,
    read_metrics,
    trailing_mean,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def write_metrics(run, rows):
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def full_rows():
    rows = [{"step": 0, "eval_success_rate": 0.1, "eval_score": 0.2}]
    for step in range(1, 6):
        rows.append(
            {
                "step": step,
                "reward": 0.1 * step,
                "score": 0.08 * step,
                "success_rate": 0.05 * step,
                "pg_loss": 0.5 / step,
                "kl": 0.01 * step,
                "entropy": 2.0 - 0.1 * step,
                "clip_fraction": 0.02 * step,
                "grad_norm": 1.0 + step,
                "lr": 1e-5,
                "rollout_seconds": 2.0 + 0.1 * step,
                "update_seconds": 1.0 + 0.05 * step,
                "train_tokens_per_second": 500.0 + step,
            }
        )
        if step % 2 == 0:
            rows[-1].update(eval_success_rate=0.1 + 0.1 * step, eval_score=0.2 + 0.1 * step)
    return rows


def assert_png(path):
    assert path.exists()
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert len(data) > 5_000


@pytest.mark.slow
def test_plot_writes_three_png_figures(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, full_rows())
    paths = plot_run(run, tmp_path / "figures")
    names = ["learning_curve.png", "loss.png", "throughput.png"]
    assert paths == [tmp_path / "figures" / n for n in names]
    for path in paths:
        assert_png(path)
    assert [p.name for p in plot_run(run)] == names  # default: beside the metrics
    assert all((run / n).exists() for n in names)


def test_plot_skips_a_figure_whose_metrics_are_all_absent(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, [{"step": s, "reward": 0.1 * s, "score": 0.2 * s} for s in range(1, 4)])
    paths = plot_run(run)
    assert [p.name for p in paths] == ["learning_curve.png"]
    assert_png(paths[0])
    assert not (run / "loss.png").exists() and not (run / "throughput.png").exists()


def test_bad_metrics_line_is_a_dataset_error_naming_the_line(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, full_rows()[:2])
    with (run / "metrics.jsonl").open("a") as f:
        f.write('{"step": 3, "reward": \n')
    with pytest.raises(DatasetError, match="line 3"):
        read_metrics(run)
    with pytest.raises(DatasetError, match="line 3"):
        plot_run(run)


def test_missing_metrics_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics.jsonl"):
        read_metrics(tmp_path)


def test_plot_through_the_cli_prints_the_paths(tmp_path, capsys):
    run = tmp_path / "run"
    write_metrics(run, full_rows())
    assert main(["plot", str(run), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [
        str(tmp_path / "out" / n) for n in ("learning_curve.png", "loss.png", "throughput.png")
    ]


def test_trailing_mean_averages_the_window_ending_at_each_step():
    assert trailing_mean([1.0, 0.0, 1.0, 1.0, 0.0], 2) == [1.0, 0.5, 0.5, 1.0, 0.5]
    assert trailing_mean([0.0, 1.0, 1.0], 10) == [0.0, 0.5, pytest.approx(2 / 3)]
    assert trailing_mean([0.3, 0.7], 1) == [0.3, 0.7]
    with pytest.raises(ValueError, match="window"):
        trailing_mean([1.0], 0)


def test_compare_draws_several_runs_and_prints_their_held_out_side_by_side(tmp_path, capsys):
    first, second = tmp_path / "uniform", tmp_path / "learnability"
    write_metrics(first, full_rows())
    other = full_rows()
    for row in other:
        row.pop("eval_success_rate", None)
    other[0]["eval_success_rate"] = 0.1
    other[3]["eval_success_rate"] = 0.55  # step 3: evaluated only in this run
    write_metrics(second, other)
    assert main(["plot", str(first), str(second), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == str(tmp_path / "out" / "compare.png")
    assert_png(tmp_path / "out" / "compare.png")
    assert lines[1:] == [
        "held-out success",
        "step\tuniform\tlearnability",
        "0\t10.0%\t10.0%",
        "2\t30.0%\t",
        "3\t\t55.0%",
        "4\t50.0%\t",
    ]
    assert not (first / "learning_curve.png").exists()  # a comparison writes only compare.png


def evaluation(step, task_ids, right):
    return {
        "step": step,
        "eval_success_rate": len(right) / len(task_ids),
        "eval_task_ids": list(task_ids),
        "eval_right": list(right),
    }


def test_paired_outcomes_count_the_tasks_that_changed_and_test_them():
    before = evaluation(0, range(10), [0, 1, 2])
    after = evaluation(20, range(10), [1, 2, 3, 4, 5, 6, 7, 8, 9])
    paired = paired_outcomes(before, after)
    assert (paired.tasks, paired.kept, paired.gained, paired.lost) == (10, 2, 7, 1)
    # exact two-sided sign test on the 8 changed tasks: 2 * P(X <= 1), X ~ Binomial(8, 1/2)
    assert paired.p_value == pytest.approx(2 * (1 + 8) / 2**8)
    assert str(paired) == (
        "10 tasks: 2 right in both, +7 newly right, -1 newly wrong (net +6, McNemar p=0.07)"
    )
    # an even split, and nothing changed, are no evidence at all
    assert paired_outcomes(after, after).p_value == 1.0
    assert (
        paired_outcomes(
            evaluation(0, range(6), [0, 1, 2]), evaluation(1, range(6), [3, 4, 5])
        ).p_value
        == 1.0
    )
    # only the tasks both evaluations played are compared
    paired = paired_outcomes(evaluation(0, [0, 1, 2, 3], [0, 3]), evaluation(5, [2, 3, 4], [2, 4]))
    assert (paired.tasks, paired.kept, paired.gained, paired.lost) == (2, 0, 1, 1)


def test_paired_outcomes_of_an_evaluation_without_them_is_a_clear_error():
    with pytest.raises(ValueError, match="step 0 has no task-by-task outcomes"):
        paired_outcomes({"step": 0, "eval_success_rate": 0.1}, evaluation(2, [0], [0]))


def test_compare_prints_each_run_against_the_first_task_by_task(tmp_path, capsys):
    first, second = tmp_path / "r5", tmp_path / "r7"
    write_metrics(first, [evaluation(0, range(10), [0, 1]), evaluation(20, range(10), [0, 1, 2])])
    write_metrics(second, [evaluation(0, range(10), [0, 1]), evaluation(20, range(10), [2, 3, 4])])
    assert main(["plot", str(first), str(second), "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == (
        "r7 against r5 at step 20: 10 tasks: 1 right in both, +2 newly right, -2 newly wrong "
        "(net +0, McNemar p=1)"
    )


def test_compare_refuses_mismatched_labels_and_a_missing_out(tmp_path, capsys):
    first, second = tmp_path / "a", tmp_path / "b"
    write_metrics(first, full_rows())
    write_metrics(second, full_rows())
    assert main(["plot", str(first), str(second)]) == 2
    assert "--out is required" in capsys.readouterr().err
    assert main(["plot", str(first), str(second), "--out", str(tmp_path), "--labels", "x"]) == 2
    assert "1 labels for 2 runs" in capsys.readouterr().err
    with pytest.raises(ValueError, match="1 labels for 2 runs"):
        compare_runs([first, second], tmp_path / "c.png", labels=["x"])
    assert not (tmp_path / "compare.png").exists() and not (tmp_path / "c.png").exists()


@pytest.fixture
def trained_run(tmp_path, smollm2_tokenizer, trainer_config):
    """A one-step run of a tiny model saved as a base folder; returns (run, base, trainer)."""
    from boltzoo.agents.models import load_model, tiny_model
    from boltzoo.lightningrl.trainer import Trainer

    base = tmp_path / "base"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(base)
    smollm2_tokenizer.save_pretrained(base)
    model, tokenizer = load_model(base, device="cpu")
    config = trainer_config(
        tmp_path,
        # Half the vocabulary is rewarded, so rewards differ within a group of two four-token
        # replies and the single step moves the weights (with 3,000 of 49,152 all score 0).
        env_kwargs={"vocab_size": len(smollm2_tokenizer), "target_size": 24000},
        model=str(base),
        max_new_tokens=4,
        save_every=1,
        device="cpu",
    )
    trainer = Trainer(config, model=model.float(), tokenizer=tokenizer)
    trainer.train()
    return tmp_path / "run", base, trainer


def assert_exported(out, base, trainer):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    exported = AutoModelForCausalLM.from_pretrained(out).state_dict()
    trained = trainer.weights.model.state_dict()
    original = AutoModelForCausalLM.from_pretrained(base).state_dict()
    assert exported.keys() == trained.keys()
    assert all(torch.equal(exported[k], trained[k].cpu()) for k in trained)
    assert any(not torch.equal(exported[k], original[k]) for k in original)
    assert len(AutoTokenizer.from_pretrained(out)) == len(AutoTokenizer.from_pretrained(base))


@pytest.mark.slow
def test_export_writes_a_loadable_folder_of_the_trained_weights(trained_run, tmp_path):
    run, base, trainer = trained_run
    out = tmp_path / "exported" / "model"
    assert export_run(run, out) == out
    assert_exported(out, base, trainer)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temporary left
    export_run(run, out)  # again over an existing folder
    assert_exported(out, base, trainer)


@pytest.mark.slow
def test_export_through_the_cli(trained_run, tmp_path, capsys):
    run, base, trainer = trained_run
    out = tmp_path / "cli-export"
    assert main(["export", str(run), str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert_exported(out, base, trainer)


@pytest.mark.slow
def test_export_refuses_lora_weights_that_do_not_fit_the_config(
    tmp_path, smollm2_tokenizer, trainer_config, capsys
):
    # A checkpoint whose adapters are not the ones its config.json describes must not export the
    # base model (unchanged, as if trained): a clear error, and nothing written.
    from boltzoo.agents.models import tiny_model
    from boltzoo.lightningrl.checkpoint import latest_checkpoint
    from boltzoo.lightningrl.trainer import Trainer

    base = tmp_path / "base"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(base)
    smollm2_tokenizer.save_pretrained(base)
    config = trainer_config(tmp_path, model=str(base), lora_r=4, lora_alpha=8.0, save_every=1)
    Trainer(
        config, model=tiny_model(len(smollm2_tokenizer), seed=0), tokenizer=smollm2_tokenizer
    ).train()
    saved = latest_checkpoint(tmp_path / "run" / "checkpoints") / "config.json"
    settings = json.loads(saved.read_text())
    saved.write_text(json.dumps(settings | {"lora_target_modules": ["q_proj"]}))
    with pytest.raises(RunFolderError, match="do not fit the model and adapters"):
        export_run(tmp_path / "run", tmp_path / "out")
    assert main(["export", str(tmp_path / "run"), str(tmp_path / "out")]) == 2
    assert "do not fit" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_export_without_a_checkpoint_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        export_run(tmp_path, tmp_path / "out")
    assert main(["export", str(tmp_path), str(tmp_path / "out")]) == 2
    assert "no checkpoint" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def write_run(run, rows, **env_kwargs):
    write_metrics(run, rows)
    config = {"env": "math-v0", "env_kwargs": env_kwargs, "eval_env_kwargs": {"split": "test"}}
    (run / "config.json").write_text(json.dumps(config))


def test_compare_evaluations_groups_the_changed_tasks_by_a_task_field(tmp_path, capsys):
    import boltzoo

    tasks = boltzoo.make("math-v0", split="test").unwrapped.tasks
    template = tasks[0].template
    same = [i for i in range(40) if tasks[i].template == template]
    other = [i for i in range(40) if tasks[i].template != template]
    assert len(same) >= 2 and len(other) >= 2
    run = tmp_path / "rl"
    # step 0: two tasks of `template` right; step 30: both lost, two tasks of others gained
    write_run(
        run,
        [
            evaluation(0, range(40), same[:2]),
            {"step": 10, "reward": 0.5},
            evaluation(30, range(40), other[:2]),
        ],
    )
    result = compare_evaluations(run, by="template")
    assert (result["before"]["step"], result["after"]["step"]) == (0, 30)
    paired = result["paired"]
    assert (paired.tasks, paired.kept, paired.gained, paired.lost) == (40, 0, 2, 2)
    groups = {g["value"]: g for g in result["groups"]}
    assert sum(g["tasks"] for g in groups.values()) == 40
    assert groups[template] == {
        "value": template,
        "tasks": len(same),
        "right_before": 2,
        "right_after": 0,
    }
    assert result["groups"][-1]["value"] == template  # the most lost last
    assert main(["compare", str(run), "--by", "template"]) == 0
    out = capsys.readouterr().out
    assert "-2 newly wrong" in out and f"{template}" in out and "2 -> 0 of" in out
    # another run's evaluation at a given step against this one's first
    second = tmp_path / "rl2"
    write_run(second, [evaluation(0, range(40), same[:2]), evaluation(5, range(40), same[:3])])
    result = compare_evaluations(run, second, after_step=5)
    assert result["after"] == {"run": str(second), "step": 5, "success_rate": 3 / 40}
    assert (result["paired"].kept, result["paired"].gained) == (2, 1)
    assert main(["compare", str(run), str(second), "--after-step", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["paired"]["gained"] == 1


def test_compare_evaluations_refuses_what_it_cannot_compare(tmp_path, capsys):
    run, other_env = tmp_path / "rl", tmp_path / "medium"
    write_run(run, [evaluation(0, range(4), [0]), evaluation(3, range(4), [1])])
    write_run(other_env, [evaluation(0, range(4), [0])], level="medium")
    # other env arguments over the same tasks compare: a turn limit does not change the tasks
    more_turns = tmp_path / "turns"
    write_run(more_turns, [evaluation(0, range(4), [1, 2])], max_turns=4)
    paired = compare_evaluations(run, more_turns)["paired"]
    assert (paired.kept, paired.gained, paired.lost) == (0, 2, 1)
    with pytest.raises(ValueError, match="no held-out evaluation at step 7"):
        compare_evaluations(run, after_step=7)
    with pytest.raises(ValueError, match="different tasks"):
        compare_evaluations(run, other_env)
    with pytest.raises(ValueError, match="no field 'colour'"):
        compare_evaluations(run, by="colour")
    old = tmp_path / "old"
    write_run(old, [{"step": 0, "eval_success_rate": 0.5}])
    assert main(["compare", str(old)]) == 2
    assert "no task-by-task outcomes" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "missing")]) == 2
    assert "no metrics file" in capsys.readouterr().err
