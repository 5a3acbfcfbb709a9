"""A warm start killed with kill -9 resumes (boltzoo sft --resume) to the metrics and the final
weights of a run that was never interrupted."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

import boltzoo
from boltzoo.agents import OraclePolicy
from boltzoo.episode import save_episodes


@pytest.fixture
def setup(tmp_path, smollm2_tokenizer):
    from boltzoo.agents.models import tiny_model

    model_dir = tmp_path / "model"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model_dir)
    smollm2_tokenizer.save_pretrained(model_dir)
    demos = tmp_path / "demos.jsonl"
    episodes = boltzoo.rollout("math-v0", {"solver": OraclePolicy()}, tasks=range(16),
                               progress=False, level="medium")  # fmt: skip
    save_episodes(demos, episodes)
    return model_dir, demos


def sft(model_dir, demos, out, *more) -> subprocess.Popen:
    argv = [sys.executable, "-m", "boltzoo", "sft", "math-v0", "--model", str(model_dir),
            "--demos", str(demos), "--output-dir", str(out), "--eval-tasks", "0",
            "--lora-r", "4", "--batch-size", "2", "--epochs", "4", "--save-every", "3",
            "--sampler", "shared", "--progress", "false", *more]  # fmt: skip
    log = open(out.parent / f"{out.name}.log", "ab")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def final_weights(out):
    folder = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()
    return folder.name, load_file(folder / "model.safetensors")


def losses(out):
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["sft_loss"]) for r in rows if "sft_loss" in r]


@pytest.mark.slow
def test_a_killed_warm_start_resumes_to_the_weights_of_an_uninterrupted_one(setup, tmp_path):
    model_dir, demos = setup
    straight = tmp_path / "straight"
    assert sft(model_dir, demos, straight).wait(timeout=300) == 0

    killed = tmp_path / "killed"
    kills = 0
    for _ in range(3):  # killed again and again, each time after a checkpoint newer than before
        process = sft(model_dir, demos, killed, *(["--resume"] if kills else []))
        pointer = killed / "checkpoints" / "latest"
        before = pointer.read_text() if pointer.exists() else None
        deadline = time.monotonic() + 120
        while process.poll() is None and time.monotonic() < deadline:
            if pointer.exists() and pointer.read_text() != before:
                time.sleep(0.05 * kills)  # mid-step, or mid-write of the next checkpoint
                os.kill(process.pid, signal.SIGKILL)
                kills += 1
                break
            time.sleep(0.005)
        process.wait(timeout=60)
        if process.returncode == 0:
            break
    assert kills >= 2, "the runs ended before they could be killed: make them longer"
    if process.returncode != 0:  # finish it
        assert sft(model_dir, demos, killed, "--resume").wait(timeout=300) == 0

    name, weights = final_weights(killed)
    straight_name, straight_weights = final_weights(straight)
    assert name == straight_name
    assert weights.keys() == straight_weights.keys()
    assert all(torch.equal(weights[k], straight_weights[k]) for k in weights)
    assert losses(killed) == losses(straight)
