"""Calls packed into one sequence: same logprobs, same gradient, one forward pass."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import boltzoo
from boltzoo.agents.models import tiny_model
from boltzoo.agents.scripted import ScriptedPolicy
from boltzoo.agents.transformers_policy import shared_heads
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.sequences import (
    PackedCalls,
    micro_batches,
    pack_calls,
    predicting,
    response_logprobs,
)
from boltzoo.lightningrl.trainer import Trainer
from boltzoo.lightningrl.transitions import flatten


@pytest.fixture
def two_turn_calls(smollm2_tokenizer):
    """math-v0 solver calls with real token ids: a calculator call, then (after the tool's
    output) the answer; three episodes, advantages that differ call by call."""
    policy = ScriptedPolicy(lambda turn: turn.env.oracle_action(turn.agent), smollm2_tokenizer)
    episodes = boltzoo.rollout("math-v0", {"solver": policy}, tasks=[0, 1, 2], progress=False)
    transitions = flatten(episodes)
    for i, t in enumerate(transitions):
        t.advantage = [1.0, -0.5, 0.25, 2.0, -1.0, 0.5][i]
    return transitions


def test_calls_that_continue_each_other_are_one_sequence(two_turn_calls):
    rows = pack_calls(two_turn_calls)
    assert len(two_turn_calls) == 6 and len(rows) == 3
    for row in rows:
        first, second = row.calls
        assert first.episode_id == second.episode_id and (first.turn, second.turn) == (0, 1)
        assert row.token_ids == second.prompt_token_ids + second.response_token_ids
        assert row.response_starts == [len(first.prompt_token_ids), len(second.prompt_token_ids)]
        # the tool's output lies between the two responses, and is no response token
        assert row.response_tokens < row.window
    assert len(pack_calls(two_turn_calls, merge=False)) == 6
    # A call whose prompt does not start with the previous call's tokens stays apart.
    changed = dataclasses.replace(
        two_turn_calls[1], prompt_token_ids=[7, *two_turn_calls[1].prompt_token_ids]
    )
    assert len(pack_calls([two_turn_calls[0], changed])) == 2


def test_packed_logprobs_equal_each_call_scored_alone(two_turn_calls, smollm2_tokenizer):
    model = tiny_model(len(smollm2_tokenizer))
    pad = smollm2_tokenizer.pad_token_id
    rows = pack_calls(two_turn_calls)
    with torch.no_grad():
        packed, mask, _ = response_logprobs(model, rows, 0.7, pad)
        alone, alone_mask, _ = response_logprobs(model, two_turn_calls, 0.7, pad)
    got = [packed[i][mask[i]] for i in range(len(rows))]
    # each row's masked positions are its first call's response, then its second's
    expected = [
        torch.cat([alone[2 * i][alone_mask[2 * i]], alone[2 * i + 1][alone_mask[2 * i + 1]]])
        for i in range(len(rows))
    ]
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("share_prompts", [False, True])
def test_the_head_runs_only_where_a_response_token_is_predicted(
    two_turn_calls, smollm2_tokenizer, share_prompts
):
    # A packed row's window holds the tool's output between its two responses: what must hold
    # is that the vocabulary-wide head never runs there (for the Agents SDK, search hits are
    # most of the window), while the response tokens' logprobs stay those of a full pass.
    model = tiny_model(len(smollm2_tokenizer))
    rows = pack_calls(two_turn_calls)
    head_positions = []
    hook = model.get_output_embeddings().register_forward_pre_hook(
        lambda module, args: head_positions.append(args[0].shape[1])
    )
    with torch.no_grad():
        logprobs, mask, entropy = response_logprobs(
            model, rows, 0.7, smollm2_tokenizer.pad_token_id, True, share_prompts=share_prompts
        )
    hook.remove()
    responded = mask.any(0)
    # (with shared prompts, the heads' pass first: one position, for its KV cache only)
    assert head_positions == [1] * share_prompts + [int(responded.sum())]
    assert head_positions[-1] < mask.shape[1]
    assert not responded.all()  # some column is the tool's output in every row
    # columns no row answers in are 0; the others are real logprobs and entropies
    assert torch.all(logprobs[:, ~responded] == 0) and torch.all(entropy[:, ~responded] == 0)
    assert torch.all(logprobs[mask] < 0) and torch.all(entropy[mask] > 0)


def test_a_response_with_no_token_before_it_is_refused_not_wrapped():
    # Position p predicts token p + 1: the window's columns 1 and 3 of a 6-token sequence whose
    # window is its last 4 tokens are predicted by positions 2 and 4.
    assert predicting(torch.tensor([1, 3]), length=6, window=4).tolist() == [2, 4]
    # A sequence that starts with a response (an empty prompt): no position predicts its first
    # token, and index -1 would silently read the last position's logits.
    with pytest.raises(ValueError, match="every call needs a prompt"):
        predicting(torch.tensor([0, 1]), length=4, window=4)


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_a_packed_update_has_the_gradient_of_the_calls_one_by_one(
    tmp_path, two_turn_calls, smollm2_tokenizer, aggregation
):
    # with the sequence mean, each call of a packed row must still weigh as one sequence
    # (its tokens' mean), not the row as one: the calls here differ in length and advantage
    config = TrainerConfig(
        env="math-v0",
        model="tiny",
        output_dir=str(tmp_path),
        progress=False,
        lora_r=0,
        sampler="shared",
        aggregation=aggregation,
    )
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    model = trainer.weights.modules["policy"]
    model.train()
    gradients = []
    for merge in (False, True):
        model.zero_grad(set_to_none=True)
        trainer.learner.micro_batch_loss(
            "policy", pack_calls(two_turn_calls, merge=merge)
        ).loss.backward()
        gradients.append(
            {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        )
    separate, packed = gradients
    assert separate.keys() == packed.keys() and separate
    for name in separate:
        torch.testing.assert_close(packed[name], separate[name], rtol=1e-4, atol=1e-7)


@pytest.fixture
def grouped_rows(two_turn_calls):
    """GRPO-shaped rows: each episode's packed two-call row plus two more samples of its first
    call (other responses, other lengths), so that three rows start with each prompt."""
    rows = pack_calls(two_turn_calls)
    samples = []
    for k, row in enumerate(rows):
        first = row.calls[0]
        for j, length in enumerate((3, 9)):
            response = [(first.response_token_ids[0] + 7 * j + k + i) % 5000 for i in range(length)]
            other = dataclasses.replace(
                first,
                episode_id=f"{first.episode_id}-{j}",
                response_token_ids=response,
                logprobs=None,
                advantage=[0.5, -1.5][j],
            )
            samples.append(pack_calls([other])[0])
    return rows + samples


def test_rows_of_one_prompt_share_its_pass_and_get_the_logprobs_of_a_pass_each(
    grouped_rows, smollm2_tokenizer
):
    model = tiny_model(len(smollm2_tokenizer))
    pad = smollm2_tokenizer.pad_token_id
    assert len({row.prompt for row in grouped_rows}) == 3 and len(grouped_rows) == 9
    heads, _ = shared_heads([row.prompt for row in grouped_rows])
    seen = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    with torch.no_grad():
        shared, mask, _ = response_logprobs(model, grouped_rows, 0.7, pad)
        hook.remove()
        alone, alone_mask, _ = response_logprobs(model, grouped_rows, 0.7, pad, share_prompts=False)
    # one pass over the starts the prompts share, then every row from there on
    assert seen[0] == (len(heads), max(map(len, heads))) and len(heads) < 3
    assert len(seen) == 2 and seen[1][0] == 9
    assert torch.equal(mask, alone_mask) and shared.shape == alone.shape
    torch.testing.assert_close(shared[mask], alone[mask], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("lora_r", [0, 4])
@pytest.mark.slow
def test_an_update_over_shared_prompts_has_the_gradient_of_a_pass_each(
    tmp_path, grouped_rows, smollm2_tokenizer, lora_r
):
    gradients = []
    for share in (False, True):
        config = TrainerConfig(
            env="math-v0",
            model="tiny",
            output_dir=str(tmp_path / str(share)),
            progress=False,
            share_prompts=share,
            lora_r=lora_r,
            kl_coef=0.1,  # the reference's logprobs go through the shared pass too
        )
        model = tiny_model(len(smollm2_tokenizer))
        trainer = Trainer(config, model=model, tokenizer=smollm2_tokenizer)
        model = trainer.weights.modules["policy"]
        model.train()
        trainer.learner.micro_batch_loss("policy", grouped_rows).loss.backward()
        gradients.append({n: p.grad for n, p in model.named_parameters() if p.grad is not None})
    alone, shared = gradients
    assert alone.keys() == shared.keys() and alone
    for name in alone:
        torch.testing.assert_close(shared[name], alone[name], rtol=1e-4, atol=1e-7)


def test_micro_batches_keep_rows_that_start_alike_together_and_count_the_start_once(
    grouped_rows,
):
    base = grouped_rows[0].calls[0]
    schemas = {"a": list(range(100, 400)), "b": list(range(500, 800))}  # 300 tokens each

    def row(schema: str, question: int, answer: int) -> PackedCalls:
        call = dataclasses.replace(
            base,
            prompt_token_ids=[*schemas[schema], question, question],
            response_token_ids=[7] * answer,
            logprobs=None,
        )
        return pack_calls([call])[0]

    rows = [row(s, q, n) for s in "ab" for q, n in ((1, 20), (1, 30), (2, 25), (3, 40))]
    # one schema and its rows: 300 + 4 x (2 + 40) tokens; both schemas' rows do not fit
    batches = micro_batches(rows, 300 + 4 * 42, share_prompts=True)
    assert sorted(len(b) for b in batches) == [4, 4]
    assert all(len({r.prompt[:300] for r in batch}) == 1 for batch in batches)
    # without sharing each row counts its whole prompt: one row a micro-batch
    assert len(micro_batches(rows, 300 + 4 * 42)) == 8
    # tails alone over the budget: a schema's rows are split, every row still there once
    split = micro_batches(rows, 2 * 42 - 1, share_prompts=True)
    assert sorted(map(id, (r for batch in split for r in batch))) == sorted(map(id, rows))
    assert max(len(batch) for batch in split) < 4
