"""Training tokens/s of a LightningRL update against a plain PyTorch step, in one run.

    python scripts/bench_learner.py [--model smollm2-135m|tiny] [--transitions 32] [--repeats 3]

Both sides train the same model on the same transitions: N single calls with varied lengths
(prompts of 100-300 tokens, responses of 8-64, random token ids from a seeded rng, sampling
logprobs from a no-grad forward so ratios start at 1, random advantages). The LightningRL side
is the real code, ``Trainer.update`` (length-bucketed micro-batches, ``response_logprobs`` over
the response positions only, ``policy_loss``, gradient accumulation, clipping, one AdamW step).
The baseline is plain PyTorch as a user would write it: the transitions in their given order,
cut into micro-batches of the same token budget, each right-padded to the longest sequence of
all, the transformer's hidden states, the output layer and log_softmax at the response positions
only (``--baseline full-logits``: at every position, the naive way), gather of the response
tokens, a REINFORCE loss ``-(A * logp).mean()`` over the response tokens, backward, gradient
clipping and one AdamW step. Runs alternate (baseline, LightningRL, ...)
and medians are compared: training tokens/s is response tokens per second of update wall time.
The aim: LightningRL at least 0.9 of the baseline (bucketing may beat padding).

Peak memory: on CUDA ``torch.cuda.max_memory_allocated`` above what was allocated before the
update; on CPU the resident set size sampled every few milliseconds during the update, above
the RSS before it (allocator caching makes this approximate), plus the whole process's RSS peak
(``ru_maxrss``), which covers both sides and model loading.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchlib import write_record
from boltzoo.agents.models import load_model, smollm2_tokenizer_dir, tiny_model
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.memory import peak_rss_mib, rss_mib
from boltzoo.lightningrl.sequences import micro_batches, response_logprobs
from boltzoo.lightningrl.trainer import Trainer
from boltzoo.lightningrl.transitions import Transition

MICRO_BATCH_TOKENS = 8192


class PeakMemory:
    """Peak memory of a block above its start: CUDA allocated bytes, or sampled CPU RSS."""

    def __init__(self, device: torch.device):
        self.device = device
        self.peak_bytes = 0
        self._stop = threading.Event()

    @staticmethod
    def _rss() -> int:
        return int(rss_mib() * 2**20)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self._max = max(self._max, self._rss())

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._start = torch.cuda.memory_allocated()
        else:
            self._start = self._max = self._rss()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            self.peak_bytes = torch.cuda.max_memory_allocated() - self._start
        else:
            self._stop.set()
            self._thread.join()
            self.peak_bytes = max(self._max, self._rss()) - self._start


def make_transitions(
    model: Any, n: int, vocab_size: int, pad: int, seed: int, use_bf16: bool
) -> list[Transition]:
    """Return ``n`` transitions of varied lengths whose logprobs are the model's own."""
    rng = np.random.default_rng(seed)
    transitions = []
    for i in range(n):
        prompt_len, response_len = int(rng.integers(100, 301)), int(rng.integers(8, 65))
        transitions.append(
            Transition(
                agent="writer",
                task_id=f"task-{i}",
                task_index=i,
                episode_id=f"episode-{i}",
                group=i // 4,
                turn=0,
                call=0,
                prompt_token_ids=rng.integers(0, vocab_size, prompt_len).tolist(),
                response_token_ids=rng.integers(0, vocab_size, response_len).tolist(),
                logprobs=None,
                reward=0.0,
                advantage=float(rng.normal()),
                policy_version=0,
                temperature=1.0,
            )
        )
    device = next(model.parameters()).device
    model.eval()
    with (
        torch.no_grad(),
        torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16),
    ):
        for batch in micro_batches(transitions, MICRO_BATCH_TOKENS):
            logprobs, _, _ = response_logprobs(model, batch, 1.0, pad)
            for row, t in enumerate(batch):
                t.logprobs = logprobs[row, -len(t.response_token_ids) :].float().tolist()
    return transitions


def baseline_update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    transitions: list[Transition],
    pad: int,
    max_tokens: int,
    use_bf16: bool,
    full_logits: bool = False,
) -> float:
    """One plain PyTorch step on right-padded micro-batches; return the loss. The output layer
    runs at the response positions only, or with ``full_logits`` at every position."""
    device = next(model.parameters()).device
    width = max(len(t.prompt_token_ids) + len(t.response_token_ids) for t in transitions)
    rows = max(1, max_tokens // width)
    total = sum(len(t.response_token_ids) for t in transitions)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for start in range(0, len(transitions), rows):
        batch = transitions[start : start + rows]
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        mask = torch.zeros((len(batch), width - 1))  # on the targets: token p + 1 of position p
        for row, t in enumerate(batch):
            ids = t.prompt_token_ids + t.response_token_ids
            input_ids[row, : len(ids)] = torch.tensor(ids)
            attention[row, : len(ids)] = 1
            mask[row, len(t.prompt_token_ids) - 1 : len(ids) - 1] = 1.0
        input_ids, attention, mask = input_ids.to(device), attention.to(device), mask.to(device)
        advantages = torch.tensor([t.advantage for t in batch], device=device)[:, None]
        at = mask.bool()  # the positions that predict a response token
        targets = input_ids[:, 1:][at]
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
            if full_logits:
                logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1][at]
            else:
                hidden = model.base_model(input_ids=input_ids, attention_mask=attention)
                logits = model.get_output_embeddings()(hidden.last_hidden_state[:, :-1][at])
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets[:, None]).squeeze(-1)
        loss = -(advantages.expand_as(mask)[at] * logp).sum() / mask.sum()
        (loss * (mask.sum().item() / total)).backward()
        loss_sum += loss.item() * mask.sum().item() / total
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    model.eval()
    return loss_sum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="smollm2-135m, tiny or a folder")
    parser.add_argument("--transitions", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--micro-batch-tokens", type=int, default=MICRO_BATCH_TOKENS)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda if present)")
    parser.add_argument(
        "--precision", choices=("auto", "fp32", "bf16"), default="auto", help="auto: bf16 on CUDA"
    )
    parser.add_argument(
        "--baseline",
        choices=("response-logits", "full-logits"),
        default="response-logits",
        help="where the baseline runs the output layer",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    precision = args.precision
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" else "fp32"
    torch.manual_seed(args.seed)
    if args.model == "tiny":
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())
        model = tiny_model(len(tokenizer), seed=args.seed)
    else:
        model, tokenizer = load_model(args.model, device=str(device))
    model = model.float().to(device)  # fp32 master weights, as the Trainer keeps them
    vocab_size = model.config.vocab_size

    with tempfile.TemporaryDirectory() as output_dir:
        config = TrainerConfig(
            env="tokens-v0",
            model=args.model,
            output_dir=output_dir,
            micro_batch_tokens=args.micro_batch_tokens,
            device=str(device),
            precision=precision,
            seed=args.seed,
            save_every=0,
            progress=False,
            # the full weights against a plain loop over them, as recorded in BENCHMARKS.md
            lora_r=0,
            lr=1e-5,
            sampler="shared",
        )
        trainer = Trainer(config, model=model, tokenizer=tokenizer)
        pad = trainer.sampling.trained["policy"].pad_token_id
        # the baseline autocasts as the learner does (fp32 where the CPU has no native bf16)
        use_bf16 = trainer.learner.use_bf16
        transitions = make_transitions(
            model, args.transitions, vocab_size, pad, args.seed, trainer.learner.use_bf16
        )
        tokens = sum(len(t.response_token_ids) for t in transitions)
        lengths = [len(t.prompt_token_ids) + len(t.response_token_ids) for t in transitions]
        baseline_optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            lr=config.lr,
            weight_decay=config.weight_decay,
        )
        # One untimed step of each: allocator and AdamW state warm-up.
        full_logits = args.baseline == "full-logits"
        baseline_update(
            model,
            baseline_optimizer,
            transitions,
            pad,
            args.micro_batch_tokens,
            use_bf16,
            full_logits,
        )
        trainer.update(transitions)

        runs: dict[str, list[float]] = {"baseline": [], "lightningrl": []}
        memory: dict[str, list[int]] = {"baseline": [], "lightningrl": []}
        for repeat in range(args.repeats):
            for side in ("baseline", "lightningrl"):
                with PeakMemory(device) as peak:
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    started = time.perf_counter()
                    if side == "baseline":
                        loss = baseline_update(
                            model,
                            baseline_optimizer,
                            transitions,
                            pad,
                            args.micro_batch_tokens,
                            use_bf16,
                            full_logits,
                        )
                    else:
                        loss = trainer.update(transitions)["pg_loss"]
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    elapsed = time.perf_counter() - started
                runs[side].append(tokens / elapsed)
                memory[side].append(peak.peak_bytes)
                print(
                    f"repeat {repeat} {side}: {tokens / elapsed:.1f} train tok/s "
                    f"({elapsed:.2f} s, loss {loss:.4f}, peak +{peak.peak_bytes / 2**20:.0f} MiB)",
                    flush=True,
                )
        buckets = len(micro_batches(transitions, args.micro_batch_tokens))

    baseline = statistics.median(runs["baseline"])
    lightning = statistics.median(runs["lightningrl"])
    ratio = lightning / baseline
    peak_mib = {side: max(values) / 2**20 for side, values in memory.items()}
    process_peak_mib = peak_rss_mib()
    memory_kind = "CUDA allocated" if device.type == "cuda" else "sampled RSS"
    print(
        f"{args.model} on {device.type} ({precision}), {args.transitions} transitions, "
        f"{tokens} response tokens, {sum(lengths)} tokens: baseline {baseline:.1f} train tok/s, "
        f"LightningRL {lightning:.1f} train tok/s, ratio {ratio:.3f}; peak memory "
        f"({memory_kind}, above the start) baseline {peak_mib['baseline']:.0f} MiB, "
        f"LightningRL {peak_mib['lightningrl']:.0f} MiB; process RSS peak "
        f"{process_peak_mib:.0f} MiB"
    )
    if args.out:
        write_record(
            args.out,
            [
                {
                    "model": args.model,
                    "baseline": args.baseline,
                    "device": device.type,
                    "precision": precision,
                    "transitions": args.transitions,
                    "micro_batch_tokens": args.micro_batch_tokens,
                    "response_tokens": tokens,
                    "total_tokens": sum(lengths),
                    "padded_tokens_baseline": len(transitions) * max(lengths),
                    "lightningrl_micro_batches": buckets,
                    "baseline_tokens_per_s": baseline,
                    "lightningrl_tokens_per_s": lightning,
                    "ratio": ratio,
                    "baseline_runs": runs["baseline"],
                    "lightningrl_runs": runs["lightningrl"],
                    "peak_memory_kind": memory_kind,
                    "baseline_peak_mib": peak_mib["baseline"],
                    "lightningrl_peak_mib": peak_mib["lightningrl"],
                    "process_rss_peak_mib": process_peak_mib,
                }
            ],
        )


if __name__ == "__main__":
    main()
