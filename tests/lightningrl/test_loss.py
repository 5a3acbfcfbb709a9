"""Tests of boltzoo/lightningrl/loss.py: the clipped policy loss, worked by hand."""

from __future__ import annotations

import math

import pytest
import torch

from boltzoo.lightningrl.loss import aggregate, kl_penalty, policy_loss


def assert_values(tensor, expected):
    """Assert that ``tensor`` holds ``expected`` (nested lists), to float precision."""
    torch.testing.assert_close(tensor, torch.tensor(expected, dtype=tensor.dtype))


def run(ratios, advantages, mask=None, **kwargs):
    """Return (output, grad of logprobs) for tokens whose ratio to old logprobs 0 is ``ratios``."""
    logprobs = torch.tensor(ratios, dtype=torch.float64).log().requires_grad_()
    old = torch.zeros_like(logprobs)
    mask = torch.ones_like(logprobs) if mask is None else torch.tensor(mask, dtype=torch.float64)
    out = policy_loss(logprobs, old, torch.tensor(advantages, dtype=torch.float64), mask, **kwargs)
    out.loss.backward()
    return out, logprobs.grad


def test_inside_the_band_the_loss_is_minus_mean_ratio_times_advantage():
    # ratios 1.1 and 0.9 are inside [0.8, 1.2]; A = 2: loss = -(1.1 * 2 + 0.9 * 2) / 2 = -2
    out, grad = run([[1.1, 0.9]], [2.0])
    assert out.loss.item() == pytest.approx(-2.0)
    assert out.pg_loss == pytest.approx(-2.0)
    # d/dlogp of -ratio * A / 2 = -ratio * A / 2 = [-1.1, -0.9]
    assert_values(grad, [[-1.1, -0.9]])
    assert out.clip_fraction == 0.0
    assert out.ratio_mean == pytest.approx(1.0)
    assert out.tokens == 2


def test_clipped_high_with_positive_advantage_has_no_gradient():
    # A = 1, ratio 1.5 > 1.2: min(1.5 * 1, 1.2 * 1) = 1.2 -> loss -1.2, the clipped term is active
    out, grad = run([[1.5]], [1.0])
    assert out.loss.item() == pytest.approx(-1.2)
    assert grad.tolist() == [[0.0]]
    assert out.clip_fraction == 1.0


def test_clipped_low_with_negative_advantage_has_no_gradient():
    # A = -1, ratio 0.5 < 0.8: min(0.5 * -1, 0.8 * -1) = -0.8 -> loss 0.8
    out, grad = run([[0.5]], [-1.0])
    assert out.loss.item() == pytest.approx(0.8)
    assert grad.tolist() == [[0.0]]
    assert out.clip_fraction == 1.0


def test_outside_the_band_in_the_harmless_direction_is_not_clipped():
    # A = 1, ratio 0.5: min(0.5, 0.8) = 0.5 -> loss -0.5, gradient -ratio * A = -0.5
    out, grad = run([[0.5]], [1.0])
    assert out.loss.item() == pytest.approx(-0.5)
    assert_values(grad, [[-0.5]])
    assert out.clip_fraction == 0.0
    # A = -1, ratio 1.5: min(-1.5, -1.2) = -1.5 -> loss 1.5 (below the dual clip of 3)
    out, grad = run([[1.5]], [-1.0])
    assert out.loss.item() == pytest.approx(1.5)
    assert_values(grad, [[1.5]])
    assert out.clip_fraction == 0.0


def test_clip_eps_high_widens_the_upper_bound_only():
    # [1 - 0.2, 1 + 0.28]: ratio 1.25 with A = 1 is inside -> loss -1.25
    out, _ = run([[1.25]], [1.0], clip_eps_high=0.28)
    assert out.loss.item() == pytest.approx(-1.25)
    # ratio 0.7 with A = -1 is still clipped low -> loss 0.8
    out, _ = run([[0.7]], [-1.0], clip_eps_high=0.28)
    assert out.loss.item() == pytest.approx(0.8)


def test_dual_clip_bounds_the_loss_for_negative_advantages():
    # A = -2, ratio 5: -min(5 * -2, 1.2 * -2) = 10, capped at -c * A = 3 * 2 = 6; no gradient
    out, grad = run([[5.0]], [-2.0])
    assert out.loss.item() == pytest.approx(6.0)
    assert grad.tolist() == [[0.0]]
    assert out.dual_clip_fraction == 1.0
    assert out.clip_fraction == 0.0
    # without the dual clip: loss 10, gradient -ratio * A = 10
    out, grad = run([[5.0]], [-2.0], dual_clip=None)
    assert out.loss.item() == pytest.approx(10.0)
    assert_values(grad, [[10.0]])


def test_mask_excludes_padding():
    # second token is padding with an absurd logprob; only the first counts:
    # ratio 1.1, A = 1 -> loss -1.1, tokens 1, and no gradient reaches the padding
    logprobs = torch.tensor([[math.log(1.1), 50.0]], requires_grad=True)
    old = torch.zeros(1, 2)
    mask = torch.tensor([[1, 0]])
    out = policy_loss(logprobs, old, torch.tensor([1.0]), mask)
    out.loss.backward()
    assert out.loss.item() == pytest.approx(-1.1)
    assert out.tokens == 1
    assert out.ratio_mean == pytest.approx(1.1)
    assert_values(logprobs.grad, [[-1.1, 0.0]])
    assert torch.isfinite(logprobs.grad).all()


# Three sequences of uneven lengths (1, 3 and 2 tokens), all ratios 1, so a token's loss is -A:
#   seq 0 (episode "a"): A = 1   -> [-1]
#   seq 1 (episode "a"): A = 4   -> [-4, -4, -4]
#   seq 2 (episode "b"): A = -2  -> [2, 2]
UNEVEN_MASK = [[1, 0, 0], [1, 1, 1], [1, 1, 0]]
UNEVEN_ADV = [1.0, 4.0, -2.0]


def test_token_aggregation_averages_over_all_real_tokens():
    # (-1 - 4 - 4 - 4 + 2 + 2) / 6 = -9 / 6 = -1.5
    out, grad = run([[1.0] * 3] * 3, UNEVEN_ADV, UNEVEN_MASK, aggregation="token")
    assert out.loss.item() == pytest.approx(-1.5)
    # each real token: -A / 6
    assert_values(grad, [[-1 / 6, 0, 0], [-4 / 6] * 3, [2 / 6, 2 / 6, 0]])


def test_sequence_aggregation_averages_sequence_means():
    # sequence means -1, -4, 2 -> (-1 - 4 + 2) / 3 = -1
    out, grad = run([[1.0] * 3] * 3, UNEVEN_ADV, UNEVEN_MASK, aggregation="sequence")
    assert out.loss.item() == pytest.approx(-1.0)
    # each real token: -A / (3 sequences * its length)
    assert_values(grad, [[-1 / 3, 0, 0], [-4 / 9] * 3, [2 / 6, 2 / 6, 0]])


def test_episode_aggregation_averages_episode_means():
    # episode a: (-1 - 4) / 2 = -2.5; episode b: 2 -> (-2.5 + 2) / 2 = -0.25
    out, _ = run(
        [[1.0] * 3] * 3,
        UNEVEN_ADV,
        UNEVEN_MASK,
        aggregation="episode",
        episode_ids=["a", "a", "b"],
    )
    assert out.loss.item() == pytest.approx(-0.25)
    assert out.pg_loss == pytest.approx(-0.25)


def test_aggregate_skips_sequences_without_tokens():
    values = torch.tensor([[1.0, 1.0], [5.0, 5.0], [3.0, 0.0]])
    mask = torch.tensor([[1, 1], [0, 0], [1, 0]])
    # token: (1 + 1 + 3) / 3; sequence: (1 + 3) / 2; episode a = {0, 1} -> 1, b -> 3 -> 2
    assert aggregate(values, mask, "token").item() == pytest.approx(5 / 3)
    assert aggregate(values, mask, "sequence").item() == pytest.approx(2.0)
    assert aggregate(values, mask, "episode", ["a", "a", "b"]).item() == pytest.approx(2.0)


def test_sequence_aggregation_with_calls_averages_each_call_apart():
    # row 0 packs two calls (tokens 0-1: call 0, token 3: call 1; token 2 a tool's output, no
    # response token); row 1 is call 2: means 2, 6, 1 -> 3, where the row means give (2, 1)
    values = torch.tensor([[1.0, 3.0, 9.0, 6.0], [1.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 1], [1, 0, 0, 0]])
    calls = torch.tensor([[0, 0, 0, 1], [2, 0, 0, 0]])
    assert aggregate(values, mask, "sequence", calls=calls).item() == pytest.approx(3.0)
    assert aggregate(values, mask, "sequence").item() == pytest.approx((10 / 3 + 1) / 2)
    # numbers no real token carries do not count as calls; no real token at all gives 0
    assert aggregate(values, mask, "sequence", calls=calls * 3).item() == pytest.approx(3.0)
    assert aggregate(values, torch.zeros_like(mask), "sequence", calls=calls).item() == 0.0


def kl_run(estimator):
    # old = new (ratio 1) and A = 0, so the loss is the KL term alone.
    logprobs = torch.tensor([[-1.0, -2.0]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-2.0, -2.5]], dtype=torch.float64)
    return policy_loss(
        logprobs,
        logprobs.detach(),
        torch.tensor([0.0], dtype=torch.float64),
        torch.ones(1, 2),
        ref_logprobs=ref,
        kl_coef=0.1,
        kl_estimator=estimator,
    )


def test_k1_kl_by_hand():
    # k1 = logp - ref = [-1 + 2, -2 + 2.5] = [1, 0.5]; mean 0.75; loss 0.1 * 0.75
    out = kl_run("k1")
    assert out.kl == pytest.approx(0.75)
    assert out.loss.item() == pytest.approx(0.075)


def test_k3_kl_by_hand():
    # d = ref - logp = [-1, -0.5]; k3 = e^d - d - 1 = [e^-1, e^-0.5 - 0.5]
    #   = [0.367879, 0.106531]; mean 0.237205; loss 0.1 * that
    expected = (math.exp(-1) + math.exp(-0.5) - 0.5) / 2
    assert expected == pytest.approx(0.237205, rel=1e-5)
    out = kl_run("k3")
    assert out.kl == pytest.approx(expected)
    assert out.loss.item() == pytest.approx(0.1 * expected)


def test_kl_penalty_k2_and_unknown():
    lp, ref = torch.tensor([-1.0]), torch.tensor([-2.0])
    # k2 = (logp - ref)^2 / 2 = 0.5
    assert kl_penalty(lp, ref, "k2").tolist() == [0.5]
    with pytest.raises(ValueError, match="k1.*k2.*k3"):
        kl_penalty(lp, ref, "k4")


def test_kl_is_zero_on_padding():
    logprobs = torch.tensor([[-1.0, -1.0]])
    ref = torch.tensor([[-2.0, -9.0]])
    out = policy_loss(
        logprobs,
        logprobs,
        torch.tensor([0.0]),
        torch.tensor([[1, 0]]),
        ref_logprobs=ref,
        kl_coef=1.0,
        kl_estimator="k1",
    )
    # only the first token: k1 = -1 + 2 = 1
    assert out.kl == pytest.approx(1.0)


def test_entropy_bonus_is_subtracted():
    # A = 0; entropies [0.5, 1.5] mean 1.0; loss = -0.01 * 1.0
    logprobs = torch.zeros(1, 2, requires_grad=True)
    entropy = torch.tensor([[0.5, 1.5]], requires_grad=True)
    out = policy_loss(
        logprobs,
        logprobs.detach(),
        torch.tensor([0.0]),
        torch.ones(1, 2),
        entropy=entropy,
        entropy_coef=0.01,
    )
    out.loss.backward()
    assert out.entropy == pytest.approx(1.0)
    assert out.loss.item() == pytest.approx(-0.01)
    assert_values(entropy.grad, [[-0.005, -0.005]])


def test_clip_fraction_counts_tokens_where_the_clipped_term_is_active():
    # seq 0, A = 1:  ratios [1.5, 1.0] -> token 0 clipped high; losses [-1.2, -1.0]
    # seq 1, A = -1: ratios [0.5, 5.0] -> token 0 clipped low (0.8), token 1 dual-clipped (3)
    # clip_fraction 2/4; dual 1/4; ratio_mean (1.5 + 1 + 0.5 + 5) / 4 = 2;
    # loss (-1.2 - 1.0 + 0.8 + 3.0) / 4 = 0.4
    out, grad = run([[1.5, 1.0], [0.5, 5.0]], [1.0, -1.0])
    assert out.clip_fraction == 0.5
    assert out.dual_clip_fraction == 0.25
    assert out.ratio_mean == pytest.approx(2.0)
    assert out.loss.item() == pytest.approx(0.4)
    # only the unclipped token (ratio 1, A = 1) has a gradient: -1 * 1 / 4
    assert_values(grad, [[0.0, -0.25], [0.0, 0.0]])


def test_stats_are_python_floats():
    out, _ = run([[1.1]], [1.0])
    for name in ("pg_loss", "kl", "entropy", "clip_fraction", "ratio_mean"):
        assert type(getattr(out, name)) is float
    assert type(out.tokens) is int
    assert out.loss.dim() == 0


def test_per_token_advantages_equal_per_sequence_ones_broadcast():
    logprobs = torch.tensor([[-1.0, -2.0], [-0.5, -0.1]], requires_grad=True)
    old = torch.tensor([[-1.1, -1.9], [-0.6, -0.1]])
    mask = torch.ones(2, 2)
    per_sequence = policy_loss(logprobs, old, torch.tensor([1.0, -2.0]), mask)
    per_token = policy_loss(logprobs, old, torch.tensor([[1.0, 1.0], [-2.0, -2.0]]), mask)
    assert per_token.loss.item() == pytest.approx(per_sequence.loss.item())
    # and each token follows its own advantage
    mixed = policy_loss(logprobs, old, torch.tensor([[1.0, 0.0], [0.0, -2.0]]), mask)
    (grad,) = torch.autograd.grad(mixed.loss, logprobs)
    assert grad[0, 1] == 0 and grad[1, 0] == 0 and grad[0, 0] != 0 and grad[1, 1] != 0


def test_bad_arguments_raise():
    x = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="same"):
        policy_loss(x, torch.zeros(2, 2), torch.zeros(2), x)
    with pytest.raises(ValueError, match="one value per sequence"):
        policy_loss(x, x, torch.zeros(3), x)
    with pytest.raises(ValueError, match="one value per sequence"):
        policy_loss(x, x, torch.zeros(2, 2), x)
    with pytest.raises(ValueError, match="token.*sequence.*episode"):
        policy_loss(x, x, torch.zeros(2), x, aggregation="batch")
    with pytest.raises(ValueError, match="episode_ids"):
        policy_loss(x, x, torch.zeros(2), x, aggregation="episode")
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(x, x, torch.zeros(2), x, kl_coef=0.1)
    with pytest.raises(ValueError, match="entropy="):
        policy_loss(x, x, torch.zeros(2), x, entropy_coef=0.1)
    with pytest.raises(ValueError, match="dual_clip"):
        policy_loss(x, x, torch.zeros(2), x, dual_clip=0.5)
