"""Run folders from elsewhere: a checkpoint never runs code, never leads outside its folder, and
a damaged one is one clear error; what a save writes a safe load reads back."""

import os
import random

import numpy as np
import pytest
import torch

from boltzoo import cli
from boltzoo.errors import RunFolderError
from boltzoo.lightningrl.checkpoint import (
    check_checkpoint,
    check_run_folder,
    clear_run_folder,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)

WEIGHTS = {"layer.weight": torch.arange(6.0).reshape(2, 3)}


class MakesADirectory:
    """Unpickling this calls os.mkdir: what a crafted state.pt could do instead."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


def crafted_checkpoint(root, sentinel):
    folder = save_checkpoint(root, 1, WEIGHTS, {"step": 1}, {"model": "x"})
    torch.save({"step": 1, "optimizer": MakesADirectory(sentinel)}, folder / "state.pt")
    return folder


def test_a_crafted_state_pt_is_refused_unread(tmp_path):
    sentinel = tmp_path / "ran"
    folder = crafted_checkpoint(tmp_path / "checkpoints", sentinel)
    with pytest.raises(RunFolderError, match=r"state\.pt holds objects that boltzoo never writes"):
        load_checkpoint(folder)
    assert not sentinel.exists()
    torch.load(folder / "state.pt", weights_only=False)  # the file does what the test says
    assert sentinel.is_dir()


def test_export_of_a_crafted_run_is_one_line_and_exit_2(tmp_path, capsys):
    from boltzoo.agents.models import tiny_model

    base = tmp_path / "base"
    tiny_model(64).save_pretrained(base)
    sentinel = tmp_path / "ran"
    folder = crafted_checkpoint(tmp_path / "run" / "checkpoints", sentinel)
    (folder / "config.json").write_text(f'{{"model": "{base}", "lora_r": 0}}')
    assert cli.main(["export", str(tmp_path / "run"), str(tmp_path / "out")]) == 2
    printed = capsys.readouterr().err  # (and the tiny model's save above: a progress bar)
    assert "Traceback" not in printed
    [error] = [line for line in printed.splitlines() if line.startswith("boltzoo: ")]
    assert "never writes" in error and "posix.mkdir" in error
    assert not sentinel.exists() and not (tmp_path / "out").exists()


def test_latest_never_leads_outside_its_folder(tmp_path):
    elsewhere = save_checkpoint(tmp_path / "elsewhere", 7, WEIGHTS, {"step": 7}, {})
    root = tmp_path / "run" / "checkpoints"
    save_checkpoint(root, 1, WEIGHTS, {"step": 1}, {})
    for pointer in (str(elsewhere), "../../elsewhere/step-000007", "step-000001/../../x"):
        (root / "latest").write_text(pointer + "\n")
        with pytest.raises(RunFolderError, match="never leads outside itself"):
            latest_checkpoint(root)


@pytest.mark.parametrize("damage", ["truncated", "empty", "text"])
def test_a_damaged_state_pt_is_one_clear_error(tmp_path, damage):
    folder = save_checkpoint(tmp_path, 1, WEIGHTS, {"step": 1, "t": torch.ones(500)}, {})
    data = (folder / "state.pt").read_bytes()
    damaged = {"truncated": data[: len(data) // 2], "empty": b"", "text": b"not a checkpoint"}
    (folder / "state.pt").write_bytes(damaged[damage])
    with pytest.raises(RunFolderError, match=r"state\.pt cannot be read .*a damaged checkpoint"):
        load_checkpoint(folder)


def test_a_damaged_weights_file_is_one_clear_error(tmp_path):
    folder = save_checkpoint(tmp_path, 1, WEIGHTS, {"step": 1}, {})
    (folder / "model.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(RunFolderError, match=r"model\.safetensors cannot be read"):
        load_checkpoint(folder)
    with pytest.raises(RunFolderError, match=r"model\.safetensors cannot be read"):
        check_checkpoint(folder)  # (what the CLI reads before the model loads: the header)


def test_the_rng_states_a_save_writes_a_safe_load_restores(tmp_path):
    np.random.seed(3)
    random.seed(3)
    state = {
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
        "torch_rng": torch.get_rng_state(),
        "task_rng": np.random.default_rng(5).bit_generator.state,
    }
    expected = (np.random.random(3), random.random(), torch.rand(2))
    folder = save_checkpoint(tmp_path, 1, WEIGHTS, state, {})
    np.random.seed(99)
    random.seed(99)
    torch.manual_seed(99)
    weights, loaded = load_checkpoint(folder)
    np.random.set_state(loaded["numpy_rng"])
    random.setstate(loaded["python_rng"])
    torch.set_rng_state(loaded["torch_rng"])
    generator = np.random.default_rng(0)
    generator.bit_generator.state = loaded["task_rng"]
    assert np.array_equal(np.random.random(3), expected[0])
    assert random.random() == expected[1] and torch.equal(torch.rand(2), expected[2])
    assert generator.random() == np.random.default_rng(5).random()
    assert torch.equal(weights["layer.weight"], WEIGHTS["layer.weight"])


def test_an_older_checkpoints_numpy_state_still_loads(tmp_path):
    folder = save_checkpoint(tmp_path, 1, WEIGHTS, {"step": 1}, {})
    older = {"step": 1, "numpy_rng": np.random.RandomState(4).get_state()}  # an ndarray inside
    torch.save(older, folder / "state.pt")
    _, state = load_checkpoint(folder)
    np.random.set_state(state["numpy_rng"])
    assert np.random.random() == np.random.RandomState(4).random()


def write_metrics(folder, steps):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.jsonl").write_text("".join(f'{{"step": {s}}}\n' for s in steps))


def test_a_folder_holding_a_run_is_refused_unless_resumed(tmp_path):
    run = tmp_path / "run"
    check_run_folder(run, resume=False)  # nothing there yet
    write_metrics(run, [0, 1, 2])
    save_checkpoint(run / "checkpoints", 2, WEIGHTS, {"step": 2}, {})
    with pytest.raises(RunFolderError, match=r"holds a run \(metrics to step 2, checkpoint "
                       r"step-000002\) \(--resume continues it\): --overwrite"):  # fmt: skip
        check_run_folder(run, resume=False)
    check_run_folder(run, resume=True)


def test_resume_without_a_checkpoint_refuses_trained_steps_and_redoes_step_0(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, [0, 1, 2])  # save_every=0 and killed: two steps that nothing can resume
    with pytest.raises(RunFolderError, match="no checkpoint to resume from: --overwrite"):
        check_run_folder(run, resume=True)
    write_metrics(run, [0])  # killed in its first step: only the step-0 evaluation was logged
    check_run_folder(run, resume=True)
    with pytest.raises(RunFolderError, match="holds a run"):
        check_run_folder(run, resume=False)


def test_overwrite_deletes_what_a_run_wrote_and_nothing_else(tmp_path):
    run = tmp_path / "run"
    write_metrics(run, [1])
    save_checkpoint(run / "checkpoints", 1, WEIGHTS, {"step": 1}, {})
    (run / "loss.png").write_bytes(b"png")
    (run / "notes.txt").write_text("mine")
    clear_run_folder(run)
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
    check_run_folder(run, resume=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunFolderError, match="is a file"):
        check_run_folder(tmp_path / "file", resume=False)
