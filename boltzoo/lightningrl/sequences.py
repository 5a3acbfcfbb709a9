"""What the learner runs its model on: calls packed into sequences, micro-batches, logprobs.

A transition is one LLM call, but the calls of one agent in one episode usually continue each
other: the prompt of call 2 is the prompt of call 1, its response and the tool's output (a
calculator result, search hits). ``pack_calls`` puts such calls into one sequence, so the
learner runs one forward pass over ``prompt 1 + response 1 + tool + response 2`` instead of two
passes that both re-read the shared start (Agent Lightning v1 merges calls the same way). Each
response token keeps its own call's advantage, sampling logprob and temperature; tool and prompt
tokens are never targets. Calls whose ids do not continue (another prompt, a response the
template re-tokenises differently) stay sequences of their own.

Sequences whose prompts start alike (a GRPO group: one task, several samples; sql-v0 tasks on
one database: one schema) share one pass over that start (``shared_heads``):
``micro_batches(..., share_prompts=True)`` keeps such rows in one micro-batch and
``response_logprobs`` runs the shared head once, copies its KV cache rows to each row, then runs
each row's tokens after it. The gradient flows through the copied cache into the one prompt pass, so
the loss and its gradient are those of a full pass per row (up to rounding), at a fraction of the
compute when the prompt is long (sql-v0: prompts of 400-1,000 tokens, answers of up to 96).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from boltzoo.agents.transformers_policy import kv_cache_argument, left_padded, shared_heads
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
    def prompt(self) -> tuple[int, ...]:
        """Return the first call's prompt ids: what the rows of a group have in common."""
        return tuple(self.token_ids[: self.response_starts[0]])

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


def micro_batches(
    rows: list[Any], max_tokens: int, by_episode: bool = False, share_prompts: bool = False
) -> list[list[Any]]:
    """Return ``rows`` (transitions or packed sequences) in micro-batches of similar length
    (sorted), each padded size ``sequences * longest`` at most ``max_tokens`` (a longer single
    unit goes alone).

    With ``by_episode`` an episode's rows stay in one micro-batch (the episode-mean loss then
    splits exactly across micro-batches). With ``share_prompts`` (packed rows only) the rows
    that start with the same prompt go together, the prompt counted once: a micro-batch costs
    ``prompts * longest prompt + rows * longest window`` tokens (what ``response_logprobs`` then
    runs), and a group whose windows alone exceed ``max_tokens`` is split.
    """
    if share_prompts and not by_episode:
        return _prompt_sharing_batches(rows, max_tokens)

    def length(row: Any) -> int:
        if isinstance(row, PackedCalls):
            return len(row.token_ids)
        return len(row.prompt_token_ids) + len(row.response_token_ids)

    units: dict[Any, list[Any]] = {}
    for i, row in enumerate(rows):
        units.setdefault(row.episode_id if by_episode else i, []).append(row)
    order = sorted(units.values(), key=lambda unit: max(map(length, unit)))
    return _fill(order, lambda batch: len(batch) * max(map(length, batch)), max_tokens)


def _fill(units: list[list[Any]], cost: Any, max_tokens: int) -> list[list[Any]]:
    """Put ``units`` (in their order) into batches, each as full as ``cost(batch) <=
    max_tokens`` allows; a unit is never split, and one over the budget goes alone."""
    batches: list[list[Any]] = []
    current: list[Any] = []
    for unit in units:
        if current and cost(current + unit) > max_tokens:
            batches.append(current)
            current = []
        current.extend(unit)
    if current:
        batches.append(current)
    return batches


def _prompt_sharing_batches(rows: list[PackedCalls], max_tokens: int) -> list[list[PackedCalls]]:
    """``micro_batches`` with ``share_prompts``: units are the rows whose prompts share a head
    (``shared_heads``; split where their tails exceed ``max_tokens``), packed greedily by
    length while the cost (heads x longest head + rows x longest tail) stays within it."""
    heads, source = shared_heads([row.prompt for row in rows])
    head_of = {id(row): len(heads[h]) for row, h in zip(rows, source, strict=True)}

    def tail(row: PackedCalls) -> int:
        return len(row.token_ids) - head_of[id(row)]

    groups: dict[int, list[PackedCalls]] = {}
    for row, h in zip(rows, source, strict=True):
        groups.setdefault(h, []).append(row)
    units: list[list[PackedCalls]] = []
    for group in groups.values():
        chunk: list[PackedCalls] = []
        for row in sorted(group, key=tail):  # tails ascending: the last is the longest so far
            if chunk and (len(chunk) + 1) * tail(row) > max_tokens:
                units.append(chunk)
                chunk = []
            chunk.append(row)
        units.append(chunk)

    def cost(batch: list[PackedCalls]) -> int:
        longest_head = max(head_of[id(row)] for row in batch)
        return len({row.prompt[:longest_head] for row in batch}) * longest_head + len(batch) * max(
            map(tail, batch)
        )

    units.sort(key=lambda unit: max(len(row.token_ids) for row in unit))
    return _fill(units, cost, max_tokens)


def response_logprobs(
    model: Any,
    batch: Sequence[Transition | PackedCalls],
    temperature: float,
    pad_token_id: int,
    with_entropy: bool = False,
    per_call_temperature: bool = False,
    share_prompts: bool = True,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Return ``(logprobs, mask, entropy)`` of the response tokens, each (B, W).

    Sequences are left-padded (each ends at the right edge, positions counted from its first
    real token, as in sampling); W is the longest window (a row's tokens from its first response
    on). Logits are computed only at the positions that predict a response token of some row
    (``log_softmax(z / T)`` of the token that followed): a window's tool outputs (search hits,
    query rows) are never targets, and the head is a vocabulary-wide product, softmax and
    backward per position. ``mask`` marks response tokens (tool outputs and padding in a
    window are not); ``logprobs`` and ``entropy`` are 0 in the columns no row responds in.
    ``T`` is ``temperature``, or with ``per_call_temperature`` each call's recorded
    temperature (``temperature`` where it recorded none). With ``share_prompts``, rows that
    start with the same prompt share one pass over it (see the module's docstring).
    """
    rows = [r if isinstance(r, PackedCalls) else pack_calls([r])[0] for r in batch]
    device = next(model.parameters()).device
    window = max(r.window for r in rows)
    mask = torch.zeros((len(rows), window), dtype=torch.bool)
    temperatures = torch.full((len(rows), window), float(temperature))
    for i, row in enumerate(rows):
        for call, begin, end in call_spans(row, window):
            mask[i, begin:end] = True
            if per_call_temperature and call.temperature is not None:
                temperatures[i, begin:end] = float(call.temperature)
    columns = scored_columns(mask)  # (on the CPU: predicting checks them without a sync)
    kept = columns.to(device)
    mask = mask.to(device)
    heads, source = shared_heads([row.prompt for row in rows]) if share_prompts else ([], [])
    if heads and len(heads) < len(rows) and all(heads):
        input_ids, logits = _logits_over_shared_heads(
            model, rows, heads, source, window, pad_token_id, columns
        )
    else:
        input_ids, attention = left_padded([r.token_ids for r in rows], pad_token_id, device)
        out = model(
            input_ids=input_ids,
            attention_mask=attention,
            position_ids=(attention.cumsum(-1) - 1).clamp(min=0),
            logits_to_keep=predicting(columns, input_ids.shape[1], window).to(device),
        )
        logits = out.logits
    logits = logits.float()
    # z / T per token (T = 0, greedy sampling, leaves the logits as they are)
    temperatures = temperatures[:, columns].to(device)
    logits = logits / torch.where(temperatures > 0, temperatures, 1.0).unsqueeze(-1)
    logprobs_all = torch.log_softmax(logits, dim=-1)
    targets = input_ids[:, input_ids.shape[1] - window :][:, kept]
    kept_logprobs = logprobs_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    # back to (B, W): the kept columns in place, 0 elsewhere (still in the autograd graph)
    logprobs = kept_logprobs.new_zeros((len(rows), window)).index_copy(1, kept, kept_logprobs)
    entropy = None
    if with_entropy:
        kept_entropy = -(logprobs_all.exp() * logprobs_all).sum(-1)
        entropy = kept_entropy.new_zeros((len(rows), window)).index_copy(1, kept, kept_entropy)
    return logprobs, mask, entropy


def scored_columns(mask: torch.Tensor) -> torch.Tensor:
    """Return the columns (1-D, ascending) of a ``(B, W)`` response mask where some row has a
    response token: the only window positions whose logits ``response_logprobs`` computes."""
    return mask.any(0).nonzero().squeeze(-1)


def predicting(columns: torch.Tensor, length: int, window: int) -> torch.Tensor:
    """Return the positions of a sequence of ``length`` tokens whose logits predict
    ``columns`` of its last ``window`` tokens (position p predicts token p + 1).

    Raises:
        ValueError: a column's token is the sequence's first (no position predicts it: a call
            with an empty prompt), which negative indexing would silently wrap.
    """
    offset = length - window - 1
    if len(columns) and offset + int(columns[0]) < 0:
        raise ValueError("a response token starts its sequence: every call needs a prompt")
    return columns + offset


def _logits_over_shared_heads(
    model: Any,
    rows: list[PackedCalls],
    heads: list[tuple[int, ...]],
    source: list[int],
    window: int,
    pad_token_id: int,
    columns: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(input_ids, logits)``: the rows' tails (right-aligned, each holding its last
    ``window + 1`` tokens or more) and the logits that predict the window's ``columns`` (a CPU
    tensor), as one left-padded pass per row would give them, with each shared head run once.

    ``heads[source[i]]`` is the start row ``i``'s prompt shares with others (``shared_heads``),
    at least one token shorter than it. Each head goes through the model once (its KV cache
    keeps the graph, so gradients reach it); the cache rows are copied to the rows that start
    with it; then each row runs from there on (left-padded: padding sits between a head and its
    row's tail, masked, with positions counted on from the head's).
    """
    device = next(model.parameters()).device
    cache_name = kv_cache_argument(model)
    head_ids, head_mask = left_padded(heads, pad_token_id, device)
    out = model(
        input_ids=head_ids,
        attention_mask=head_mask,
        position_ids=(head_mask.cumsum(-1) - 1).clamp(min=0),
        use_cache=True,
        logits_to_keep=1,
    )
    cache = getattr(out, cache_name)
    rows_head = torch.tensor(source, device=device)
    cache.batch_select_indices(rows_head)
    head_mask = head_mask[rows_head]
    # each tail holds at least the prompt's last token and the window: window + 1 or more
    tails = [row.token_ids[len(heads[h]) :] for row, h in zip(rows, source, strict=True)]
    input_ids, tail_mask = left_padded(tails, pad_token_id, device)
    positions = head_mask.sum(-1, keepdim=True) + (tail_mask.cumsum(-1) - 1).clamp(min=0)
    out = model(
        input_ids=input_ids,
        attention_mask=torch.cat([head_mask, tail_mask], dim=1),
        position_ids=positions,
        use_cache=True,
        logits_to_keep=predicting(columns, input_ids.shape[1], window).to(device),
        **{cache_name: cache},
    )
    return input_ids, out.logits
