"""A Hugging Face transformers model as a batched policy that records exact tokens and logprobs.

Sampling is written out here, one token at a time over a KV cache, so that each sampled token's
log-probability comes from the same forward pass that sampled it (no second pass, no
re-tokenisation). For sampling temperature T and logits z, the token is drawn from
``softmax(z / T)`` restricted to the top-p nucleus and renormalised, and its recorded logprob is
``log_softmax(z / T)[token]``: the tempered distribution *before* top-p truncation, which is what
the learner recomputes with the same temperature. Greedy decoding (T = 0) records
``log_softmax(z)[token]``.

Prompts of a batch are left-padded; rows that finish (end-of-sequence token, a stop string, or
``max_new_tokens``) are dropped from the batch as it goes, so no compute is spent on them.
Prompts of a batch that start alike (a GRPO group: one task, several samples; tasks on one
database: one schema) prefill their shared start once and copy its KV cache rows, as vLLM's
prefix caching does: on long prompts the prefill is most of a batch's time. More prompts than
``max_batch_size`` are batched by length, so that short prompts are not padded to long ones.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from boltzoo.agents.base import SamplingParams, Turn, encode_chat, encode_observation
from boltzoo.episode import Completion
from boltzoo.errors import PromptTooLongError, shorten

# One lock per model: policies sharing a peft model (one adapter each, or the base with the
# adapters off) may sample from several threads (a gateway each), and selecting an adapter is a
# switch on the shared model, so their batches must take turns.
_MODEL_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_MODEL_LOCKS_LOCK = threading.Lock()


def _model_lock(model: Any) -> threading.Lock:
    with _MODEL_LOCKS_LOCK:
        return _MODEL_LOCKS.setdefault(model, threading.Lock())


__all__ = [
    "PromptTooLongError",
    "TransformersPolicy",
    "kv_cache_argument",
    "left_padded",
    "sample_token",
    "shared_heads",
]

StreamCallback = Callable[[int, float | None], None]  # (token id, logprob): see Turn.stream


def sample_token(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(tokens, logprobs)`` sampled from ``logits`` of shape (batch, vocab).

    ``logprobs[i] = log_softmax(logits[i] / T)[tokens[i]]``, before top-p truncation.
    """
    logits = logits.float()
    if temperature <= 0:
        tokens = logits.argmax(dim=-1)
        logprobs = torch.log_softmax(logits, dim=-1)
        return tokens, logprobs.gather(-1, tokens[:, None])[:, 0]
    logprobs = torch.log_softmax(logits / temperature, dim=-1)
    probs = logprobs.exp()
    if top_p < 1.0:
        # Keep the smallest set of most likely tokens whose mass reaches top_p.
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    tokens = torch.multinomial(probs, 1, generator=generator)[:, 0]
    return tokens, logprobs.gather(-1, tokens[:, None])[:, 0]


class TransformersPolicy:
    """A causal LM and its tokenizer as a policy: chats in, Completions with token ids out.

    Args:
        model: a transformers causal LM (``AutoModelForCausalLM``).
        tokenizer: its tokenizer, with a chat template.
        name: the model's name, recorded in every Completion.
        max_new_tokens: new tokens per response at most.
        temperature: the sampling temperature (0: greedy).
        top_p: nucleus sampling's probability mass.
        stop: strings that end a response, cut from its text (its tokens are kept).
        seed: seeds the sampling generator, so a run samples the same tokens again.
        max_batch_size: turns sampled together at most (more are split into batches).
        max_prompt_tokens: a longer prompt raises :class:`PromptTooLongError` for its turn
            (default: the model's context length minus ``max_new_tokens``).
        adapter: for a peft model with several LoRA adapters, the one this policy samples with;
            ``None`` samples from the base model with the adapters switched off. Several
            policies can share one peft model, each with its own adapter.
        share_prefill: prefill what prompts of a batch share once (``shared_heads``; ``False``:
            every prompt whole, the baseline ``scripts/bench_sampler.py`` measures against).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str | None = None,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        seed: int = 0,
        max_batch_size: int = 64,
        max_prompt_tokens: int | None = None,
        adapter: str | None = None,
        share_prefill: bool = True,
    ):
        self.model = model
        self.share_prefill = bool(share_prefill)
        self.adapter = adapter
        self.tokenizer = tokenizer
        self.name = name or getattr(model.config, "_name_or_path", None) or type(model).__name__
        self.sampling = SamplingParams(max_new_tokens, temperature, top_p, stop)
        self.max_batch_size = int(max_batch_size)
        context = getattr(model.config, "max_position_embeddings", None) or 2048
        self.max_prompt_tokens = max_prompt_tokens or max(1, context - max_new_tokens)
        self.version = 0  # set by the learner with each update of the weights (load_weights)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        eos = {tokenizer.eos_token_id, *_as_list(model.generation_config.eos_token_id)}
        self.eos_token_ids = {t for t in eos if t is not None}
        self.pad_token_id = (
            tokenizer.pad_token_id
            if tokenizer.pad_token_id is not None
            else min(self.eos_token_ids)
        )
        self.last_stats: dict[str, float] = {}
        self._cache_name = kv_cache_argument(model)

    @property
    def device(self) -> torch.device:
        """Return the device the model's weights are on."""
        return next(self.model.parameters()).device

    @property
    def sampling_params(self) -> dict[str, Any]:
        """Return the sampling parameters every Completion records."""
        return self.sampling.to_dict()

    def encode_chat(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Return the prompt token ids of ``messages`` under the model's chat template."""
        return encode_chat(self.tokenizer, messages)

    # --- the Policy protocol ---------------------------------------------------------------

    accepts_prompt_ids = True  # observations may give a raw prompt (see encode_observation)

    def act(self, turns: Sequence[Turn]) -> list[Completion]:
        """Return one Completion per turn, all sampled together in batches."""
        prompts = [
            self._checked(encode_observation(self.tokenizer, turn.observation)) for turn in turns
        ]
        return self.generate_from_ids(prompts, [turn.stream for turn in turns])

    def generate(
        self,
        chats: Sequence[Sequence[dict[str, Any]]],
        streams: Sequence[StreamCallback | None] | None = None,
    ) -> list[Completion]:
        """Return a Completion for each chat (a list of role/content messages); ``streams[i]``,
        when given, is called with each token id and logprob of chat ``i`` as it is sampled."""
        prompts = [self._checked(self.encode_chat(chat)) for chat in chats]
        return self.generate_from_ids(prompts, streams)

    def _checked(self, ids: list[int]) -> list[int]:
        """Return ``ids``, a prompt, if it is within ``max_prompt_tokens`` and the vocabulary."""
        if len(ids) > self.max_prompt_tokens:
            raise PromptTooLongError(
                f"the prompt has {len(ids)} tokens, over this policy's max_prompt_tokens="
                f"{self.max_prompt_tokens}; shorten the observation (fewer schema rows, fewer "
                f"passages) or raise the limit"
            )
        vocabulary = self.model.get_input_embeddings().num_embeddings
        if ids and not 0 <= min(ids) <= max(ids) < vocabulary:
            raise ValueError(f"prompt token ids must be in [0, {vocabulary}): {shorten(ids)}")
        return ids

    def generate_from_ids(
        self,
        prompts: Sequence[Sequence[int]],
        streams: Sequence[StreamCallback | None] | None = None,
    ) -> list[Completion]:
        """Return a Completion for each prompt given as token ids (no chat template applied);
        ``streams`` as in :meth:`generate`."""
        started, new_tokens = time.perf_counter(), 0
        streams = list(streams) if streams is not None else [None] * len(prompts)
        order = list(range(len(prompts)))
        if len(prompts) > self.max_batch_size:  # batches of similar lengths: less left padding
            order.sort(key=lambda i: len(prompts[i]))
        by_position: dict[int, Completion] = {}
        for start in range(0, len(order), self.max_batch_size):
            rows = order[start : start + self.max_batch_size]
            batch = [list(prompts[i]) for i in rows]
            sampled = self._sample_batch(batch, [streams[i] for i in rows])
            by_position.update(zip(rows, sampled, strict=True))
        completions = [by_position[i] for i in range(len(prompts))]
        new_tokens = sum(len(c.response_token_ids) for c in completions)
        elapsed = time.perf_counter() - started
        self.last_stats = {
            "sequences": len(completions),
            "new_tokens": new_tokens,
            "seconds": elapsed,
            "tokens_per_second": new_tokens / elapsed if elapsed > 0 else 0.0,
        }
        return completions

    @torch.no_grad()
    def load_weights(self, state_dict: Mapping[str, torch.Tensor], *, version: int) -> None:
        """Copy new weights (a full transformers ``state_dict``) into this policy's model, cast
        to its dtype; later Completions carry ``version`` (the learner's count of updates: it
        alone numbers the weights). The same call as :meth:`VLLMPolicy.load_weights`, so a
        learner can sync either backend."""
        self.model.load_state_dict(dict(state_dict), strict=True)
        self.version = int(version)

    # --- sampling --------------------------------------------------------------------------

    def _active_weights(self) -> contextlib.AbstractContextManager:
        """Select this policy's adapter on a shared peft model (or switch adapters off)."""
        if not hasattr(self.model, "peft_config"):
            if self.adapter is not None:
                raise ValueError(f"adapter={self.adapter!r} but the model has no LoRA adapters")
            return contextlib.nullcontext()
        if self.adapter is None:
            return self.model.disable_adapter()
        self.model.set_adapter(self.adapter)
        return contextlib.nullcontext()

    @torch.inference_mode()
    def _sample_batch(
        self, prompts: list[list[int]], streams: list[StreamCallback | None]
    ) -> list[Completion]:
        with _model_lock(self.model), self._active_weights():
            return self._sample_batch_with_active_weights(prompts, streams)

    def _sample_batch_with_active_weights(
        self, prompts: list[list[int]], streams: list[StreamCallback | None]
    ) -> list[Completion]:
        device = self.device
        heads, source = shared_heads(prompts) if self.share_prefill else ([], [])
        cache = None
        if heads and len(heads) < len(prompts) and all(heads):
            # Prompts that start alike (a group's copies of one prompt; one database's schema)
            # prefill their shared head once; its cache rows are copied to each prompt, whose
            # own tail then runs after it (padding between head and tail is masked).
            head_ids, head_mask = left_padded(heads, self.pad_token_id, device)
            out = self.model(
                input_ids=head_ids,
                attention_mask=head_mask,
                position_ids=(head_mask.cumsum(-1) - 1).clamp(min=0),
                use_cache=True,
                logits_to_keep=1,
            )
            cache = getattr(out, self._cache_name)
            rows = torch.tensor(source, device=device)
            cache.batch_select_indices(rows)
            tails = [p[len(heads[h]) :] for p, h in zip(prompts, source, strict=True)]
            input_ids, tail_mask = left_padded(tails, self.pad_token_id, device)
            head_mask = head_mask[rows]
            attention_mask = torch.cat([head_mask, tail_mask], dim=1)
            position_ids = head_mask.sum(-1, keepdim=True) + (tail_mask.cumsum(-1) - 1).clamp(min=0)
        else:
            input_ids, attention_mask = left_padded(prompts, self.pad_token_id, device)
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)

        responses: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        finish = ["length"] * len(prompts)
        texts = [""] * len(prompts)
        active = torch.arange(len(prompts), device=device)  # rows still sampling
        step_ids, step_positions = input_ids, position_ids

        for _ in range(self.sampling.max_new_tokens):
            out = self.model(
                input_ids=step_ids,
                attention_mask=attention_mask,
                position_ids=step_positions,
                use_cache=True,
                logits_to_keep=1,  # only the last position's logits: (batch, 1, vocab)
                **{self._cache_name: cache},
            )
            cache = getattr(out, self._cache_name)
            tokens, token_logprobs = sample_token(
                out.logits[:, -1, :], self.sampling.temperature, self.sampling.top_p, self.generator
            )
            still = []
            for i, row in enumerate(active.tolist()):
                token = int(tokens[i])
                responses[row].append(token)
                logprobs[row].append(float(token_logprobs[i]))
                if streams[row] is not None:
                    streams[row](token, logprobs[row][-1])
                if token in self.eos_token_ids:
                    finish[row] = "stop"
                    continue
                if self.sampling.stop:
                    text = self.tokenizer.decode(responses[row], skip_special_tokens=True)
                    if any(s in text for s in self.sampling.stop):
                        finish[row] = "stop"
                        continue
                still.append(i)
            if not still:
                break
            keep = torch.tensor(still, device=device)
            if len(still) < len(active):  # drop finished rows from the batch and the cache
                cache.batch_select_indices(keep)
                attention_mask = attention_mask[keep]
                tokens, step_positions = tokens[keep], step_positions[keep]
                active = active[keep]
            attention_mask = torch.cat(
                [attention_mask, attention_mask.new_ones((len(active), 1))], dim=1
            )
            step_ids = tokens[:, None]
            step_positions = step_positions[:, -1:] + 1

        completions = []
        for row, prompt in enumerate(prompts):
            text = self.tokenizer.decode(responses[row], skip_special_tokens=True)
            for stop in self.sampling.stop:  # the stop string ends the text and is not part of it
                if stop in text:
                    text = text[: text.index(stop)]
            texts[row] = text
            completions.append(
                Completion(
                    text=text,
                    prompt_token_ids=prompt,
                    response_token_ids=responses[row],
                    logprobs=logprobs[row],
                    sampling_params=self.sampling_params,
                    model=self.name,
                    policy_version=self.version,
                    finish_reason=finish[row],
                )
            )
        return completions

    def __repr__(self) -> str:
        return f"TransformersPolicy({self.name!r}, version={self.version})"


def shared_heads(
    prompts: Sequence[Sequence[int]], min_share: float = 0.5
) -> tuple[list[tuple[int, ...]], list[int]]:
    """Group prompts by how they start; return ``(heads, source)``: ``heads[source[i]]`` is the
    start that prompt ``i`` shares with its group, at least one token shorter than it.

    Prompts are sorted, and one joins the group before it while their common start is at least
    ``min_share`` of the group's shortest prompt: copies of one prompt share all but its last
    token; sql-v0 prompts on one database share the schema, not the instructions alone. Heads
    are what a model runs once for its group (``TransformersPolicy``'s prefill, the learner's
    ``share_prompts``).
    """
    order = sorted(range(len(prompts)), key=lambda i: list(prompts[i]))
    heads: list[tuple[int, ...]] = []
    source = [0] * len(prompts)
    head_length, shortest, previous = 0, 0, None
    for i in order:
        prompt = prompts[i]
        if previous is not None:
            common = 0
            limit = min(head_length, len(prompt) - 1)
            while common < limit and prompt[common] == previous[common]:
                common += 1
            if common >= min_share * min(shortest, len(prompt)) and common > 0:
                head_length, shortest = common, min(shortest, len(prompt))
                heads[-1] = tuple(prompt[:common])
                source[i], previous = len(heads) - 1, prompt
                continue
        head_length, shortest, previous = len(prompt) - 1, len(prompt), prompt
        heads.append(tuple(prompt[:head_length]))
        source[i] = len(heads) - 1
    return heads, source


def left_padded(
    sequences: Sequence[Sequence[int]], pad_token_id: int, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(input_ids, attention_mask)`` of token id sequences left-padded to the longest
    (every sequence ends at the right edge, as a batch is sampled and scored)."""
    width = max(len(ids) for ids in sequences)
    input_ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, ids in enumerate(sequences):
        if ids:
            input_ids[i, width - len(ids) :] = torch.tensor(list(ids))
            attention[i, width - len(ids) :] = 1
    return input_ids.to(device), attention.to(device)


def kv_cache_argument(model: Any) -> str:
    """Return the name of ``model``'s KV-cache argument and output: ``cache`` since
    transformers 5 renamed it, ``past_key_values`` before."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # peft
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple, set)) else [value]
