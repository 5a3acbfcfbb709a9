"""Calls packed into one sequence: same logprobs, same gradient, one forward pass."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import boltzoo
from boltzoo.agents.models import tiny_model
from boltzoo.agents.scripted import ScriptedPolicy
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.sequences import pack_calls, response_logprobs
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


def test_a_packed_update_has_the_gradient_of_the_calls_one_by_one(
    tmp_path, two_turn_calls, smollm2_tokenizer
):
    config = TrainerConfig(env="math-v0", model="tiny", output_dir=str(tmp_path), progress=False)
    trainer = Trainer(config, model=tiny_model(len(smollm2_tokenizer)), tokenizer=smollm2_tokenizer)
    model = trainer.models["policy"]
    model.train()
    gradients = []
    for merge in (False, True):
        model.zero_grad(set_to_none=True)
        trainer._micro_batch_loss(model, pack_calls(two_turn_calls, merge=merge)).loss.backward()
        gradients.append(
            {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        )
    separate, packed = gradients
    assert separate.keys() == packed.keys() and separate
    for name in separate:
        torch.testing.assert_close(packed[name], separate[name], rtol=1e-4, atol=1e-7)
