"""What the learner runs its model on: calls packed into sequences, micro-batches, logprobs.

A transition is one LLM call, but the calls of one agent in one episode usually continue each
other: the prompt of call 2 is the prompt of call 1, its response and the tool's output (a
calculator result, search hits). ``pack_calls`` puts such calls into one sequence, so the
learner runs one forward pass over ``prompt 1 + response 1 + tool + response 2`` instead of two
passes that both re-read the shared start (Agent Lightning v1 merges calls the same way). Each
response token keeps its own call's advantage, sampling logprob and temperature; tool and prompt
tokens are never targets. Calls whose ids do not continue (another prompt, a response the
template re-tokenises differently) stay sequences of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from boltzoo.lightningrl.transitions import Transition


@dataclass
class PackedCalls:
    """One sequence of token ids holding one or more calls of one agent in one episode: call
    ``k``'s prompt is ``token_ids[:response_starts[k]]``, its response the next
    ``len(calls[k].response_token_ids)`` ids."""

    calls: list[Transition]
    token_ids: list[int]
    response_starts: list[int]

    @property
    def episode_id(self) -> str:
        """Return the episode the calls come from."""
        return self.calls[0].episode_id

    @property
    def window(self) -> int:
        """Return how many tokens, from the first response on, the learner scores."""
        return len(self.token_ids) - self.response_starts[0]

    @property
    def response_tokens(self) -> int:
        """Return how many response (target) tokens the calls hold together."""
        return sum(len(c.response_token_ids) for c in self.calls)


def pack_calls(transitions: Sequence[Transition], merge: bool = True) -> list[PackedCalls]:
    """Return the transitions as sequences: consecutive calls of one agent in one episode whose
    token ids continue each other (``prompt_k+1`` starts with ``prompt_k + response_k``) share
    one sequence when ``merge``; every other call is a sequence of its own. Order: by first call.
    """
    packed: list[tuple[int, PackedCalls]] = []  # (index of its first call, sequence)
    last: dict[tuple[str, str], PackedCalls] = {}  # (episode, agent) -> its open sequence
    order = sorted(
        range(len(transitions)), key=lambda i: (transitions[i].turn, transitions[i].call)
    )
    for i in order:
        t = transitions[i]
        key = (t.episode_id, t.agent)
        current = last.get(key)
        prompt, response = t.prompt_token_ids, t.response_token_ids
        if merge and current is not None and prompt[: len(current.token_ids)] == current.token_ids:
            current.calls.append(t)
            current.response_starts.append(len(prompt))
            current.token_ids = list(prompt) + list(response)
            continue
        last[key] = PackedCalls([t], list(prompt) + list(response), [len(prompt)])
        packed.append((i, last[key]))
    return [row for _, row in sorted(packed, key=lambda pair: pair[0])]


def call_spans(row: PackedCalls, width: int) -> list[tuple[Transition, int, int]]:
    """Return ``(call, begin, end)`` per call of ``row``: where its response tokens sit in a
    window of ``width`` scored positions whose right edge is the row's last token."""
    offset = width - len(row.token_ids)
    return [
        (call, start + offset, start + offset + len(call.response_token_ids))
        for call, start in zip(row.calls, row.response_starts, strict=True)
    ]


def micro_batches(rows: list[Any], max_tokens: int, by_episode: bool = False) -> list[list[Any]]:
    """Return ``rows`` (transitions or packed sequences) in micro-batches of similar length
    (sorted), each padded size ``sequences * longest`` at most ``max_tokens`` (a longer single
    unit goes alone).

    With ``by_episode`` an episode's rows stay in one micro-batch (the episode-mean loss then
    splits exactly across micro-batches).
    """

    def length(row: Any) -> int:
        if isinstance(row, PackedCalls):
            return len(row.token_ids)
        return len(row.prompt_token_ids) + len(row.response_token_ids)

    units: dict[Any, list[Any]] = {}
    for i, row in enumerate(rows):
        units.setdefault(row.episode_id if by_episode else i, []).append(row)
    order = sorted(units.values(), key=lambda unit: max(map(length, unit)))
    batches: list[list[Any]] = []
    current: list[Any] = []
    for unit in order:
        longest = max(map(length, unit))  # the longest so far: units come sorted
        if current and (len(current) + len(unit)) * longest > max_tokens:
            batches.append(current)
            current = []
        current.extend(unit)
    if current:
        batches.append(current)
    return batches


def response_logprobs(
    model: Any,
    batch: Sequence[Transition | PackedCalls],
    temperature: float,
    pad_token_id: int,
    with_entropy: bool = False,
    per_call_temperature: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Return ``(logprobs, mask, entropy)`` of the response tokens, each (B, W).

    Sequences are left-padded (each ends at the right edge, positions counted from its first
    real token, as in sampling), and only the last W + 1 positions' logits are computed, W the
    longest window (a row's tokens from its first response on): ``log_softmax(z / T)`` of the
    token that followed each position. ``mask`` marks response tokens (tool outputs and padding
    in a window are not). ``T`` is ``temperature``, or with ``per_call_temperature`` each call's
    recorded temperature (``temperature`` where it recorded none).
    """
    rows = [r if isinstance(r, PackedCalls) else pack_calls([r])[0] for r in batch]
    device = next(model.parameters()).device
    width = max(len(r.token_ids) for r in rows)
    window = max(r.window for r in rows)
    input_ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), window), dtype=torch.bool)
    temperatures = torch.full((len(rows), window), float(temperature))
    for i, row in enumerate(rows):
        input_ids[i, width - len(row.token_ids) :] = torch.tensor(row.token_ids)
        attention[i, width - len(row.token_ids) :] = 1
        for call, begin, end in call_spans(row, window):
            mask[i, begin:end] = True
            if per_call_temperature and call.temperature is not None:
                temperatures[i, begin:end] = float(call.temperature)
    input_ids, attention, mask = input_ids.to(device), attention.to(device), mask.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=positions,
        logits_to_keep=window + 1,
    )
    # Position p predicts token p + 1: the last W + 1 logits, less the very last, predict the
    # last W tokens (each row's window, right-aligned).
    logits = out.logits[:, :-1, :].float()
    # z / T per token (T = 0, greedy sampling, leaves the logits as they are)
    temperatures = temperatures.to(device)
    logits = logits / torch.where(temperatures > 0, temperatures, 1.0).unsqueeze(-1)
    logprobs_all = torch.log_softmax(logits, dim=-1)
    targets = input_ids[:, width - window :]
    logprobs = logprobs_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
    return logprobs, mask, entropy
