"""A short check of the GPU path: bf16 sampling through the transformers backend, a LoRA step.

    python scripts/gpu_check.py [--device cuda|cpu] [--hidden 256] [--layers 4]

A small random Llama (``tiny_model``, SmolLM2's vocabulary and tokenizer; no network, no
downloads) goes to the device in bf16. Stage 1 samples 16 short chats with 32 new tokens through
:class:`~boltzoo.agents.transformers_policy.TransformersPolicy` and reports tokens/s. Stage 2
wraps the model with a peft LoRA adapter (r=16 on q/k/v/o) and runs one update on the sampled
completions with the learner's math (``micro_batches``, ``response_logprobs``, ``policy_loss``,
gradient accumulation, clipping, AdamW on the LoRA weights) under bf16 autocast, and checks the
loss is finite and the LoRA weights changed. Each stage prints one line, with peak memory
(``torch.cuda.max_memory_allocated`` on CUDA, the process RSS peak on CPU); ``OK`` at the end.
Any error prints it and exits 1. The default device is CUDA when there is one; ``--device cuda``
without CUDA exits 1. Well under five minutes on a GPU (about a minute on a laptop CPU).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
import traceback

import torch

from boltzoo.agents.models import smollm2_tokenizer_dir, tiny_model
from boltzoo.agents.transformers_policy import TransformersPolicy
from boltzoo.lightningrl.loss import policy_loss
from boltzoo.lightningrl.sequences import micro_batches, response_logprobs
from boltzoo.lightningrl.transitions import Transition

TOPICS = ["prime numbers", "the moon", "rivers", "sorting", "tea", "bridges", "owls", "rain"]


def peak_memory(device: torch.device) -> str:
    """Return the peak memory so far, as text: CUDA allocated, or the process RSS peak."""
    if device.type == "cuda":
        return f"peak CUDA memory {torch.cuda.max_memory_allocated(device) / 2**20:.0f} MiB"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return f"process RSS peak {rss:.0f} MiB"


def check(args: argparse.Namespace, device: torch.device) -> None:
    from transformers import AutoTokenizer

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())
    model = tiny_model(len(tokenizer), seed=0, hidden_size=args.hidden, layers=args.layers)
    model = model.to(device=device, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"model: random Llama, hidden {args.hidden}, {args.layers} layers, {params / 1e6:.1f}M "
        f"params, bf16 on {device} ({time.perf_counter() - started:.1f} s)",
        flush=True,
    )

    # 1. sampling
    policy = TransformersPolicy(
        model, tokenizer, name="gpu-check", max_new_tokens=args.max_new_tokens, seed=0
    )
    chats = [
        [{"role": "user", "content": f"Write {i + 1} short sentences about {TOPICS[i % 8]}."}]
        for i in range(args.batch)
    ]
    policy.generate(chats[:2])  # warm-up: kernels, allocator
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    completions = policy.generate(chats)
    stats = policy.last_stats
    if not all(
        c.response_token_ids and len(c.logprobs) == len(c.response_token_ids) for c in completions
    ):
        raise RuntimeError("a completion has no response tokens or mismatched logprobs")
    if not all(torch.isfinite(torch.tensor(c.logprobs)).all() for c in completions):
        raise RuntimeError("non-finite sampling logprobs")
    print(
        f"sample: {stats['sequences']} chats, {stats['new_tokens']} new tokens in "
        f"{stats['seconds']:.2f} s = {stats['tokens_per_second']:.1f} tok/s; {peak_memory(device)}",
        flush=True,
    )

    # 2. a LoRA update on the sampled completions
    try:
        import peft
    except ImportError as error:
        print(f"lora: skipped, peft does not import ({error}); pip install peft")
        return
    config = peft.LoraConfig(
        r=16, lora_alpha=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    lora_model = peft.get_peft_model(model, config)
    trainable = {n: p for n, p in lora_model.named_parameters() if p.requires_grad}
    if not trainable or not all("lora_" in n for n in trainable):
        raise RuntimeError(f"unexpected trainable parameters: {sorted(trainable)[:5]}")
    before = {n: p.detach().clone() for n, p in trainable.items()}
    optimizer = torch.optim.AdamW(trainable.values(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    advantages = torch.randn(len(completions), generator=generator).tolist()
    transitions = [
        Transition(
            agent="writer",
            task_id=f"chat-{i}",
            task_index=i,
            episode_id=f"chat-{i}",
            group=0,
            turn=0,
            call=0,
            prompt_token_ids=list(c.prompt_token_ids),
            response_token_ids=list(c.response_token_ids),
            logprobs=list(c.logprobs),
            reward=advantage,
            advantage=advantage,
            temperature=1.0,
        )
        for i, (c, advantage) in enumerate(zip(completions, advantages, strict=True))
    ]
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    lora_model.train()
    optimizer.zero_grad(set_to_none=True)
    total = sum(len(t.response_token_ids) for t in transitions)
    loss_sum, ratio_sum = 0.0, 0.0
    for batch in micro_batches(transitions, args.micro_batch_tokens):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logprobs, mask, _ = response_logprobs(lora_model, batch, 1.0, policy.pad_token_id)
        width = logprobs.shape[1]
        old = logprobs.detach().clone()
        for row, t in enumerate(batch):
            old[row, width - len(t.logprobs) :] = torch.tensor(t.logprobs, device=device)
        out = policy_loss(
            logprobs, old, torch.tensor([t.advantage for t in batch], device=device), mask
        )
        if not torch.isfinite(out.loss):
            raise RuntimeError(f"non-finite loss {float(out.loss)}")
        share = out.tokens / total
        (out.loss * share).backward()
        loss_sum += float(out.loss.detach()) * share
        ratio_sum += out.ratio_mean * share
    grad_norm = torch.nn.utils.clip_grad_norm_(trainable.values(), 1.0)
    if not torch.isfinite(grad_norm):
        raise RuntimeError(f"non-finite gradient norm {float(grad_norm)}")
    optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - started
    changed = sum(not torch.equal(before[n], p.detach()) for n, p in trainable.items())
    if changed == 0:
        raise RuntimeError("no LoRA weight changed after the update")
    print(
        f"lora: {len(trainable)} LoRA tensors ({sum(p.numel() for p in trainable.values())} "
        f"params, {next(iter(trainable.values())).dtype}), {total} response tokens in "
        f"{elapsed:.2f} s = {total / elapsed:.1f} train tok/s; loss {loss_sum:.4f}, ratio mean "
        f"{ratio_sum:.4f} (sampling vs learner logprobs), grad norm {float(grad_norm):.3f}, "
        f"{changed}/{len(trainable)} LoRA tensors changed; {peak_memory(device)}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda if present)")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--micro-batch-tokens", type=int, default=8192)
    args = parser.parse_args()

    name = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        print(
            f"FAIL: --device {name} but CUDA is not available (torch {torch.__version__}, "
            f"built with CUDA {torch.version.cuda})",
            file=sys.stderr,
        )
        sys.exit(1)
    device = torch.device(name)
    if device.type == "cuda":
        print(f"device: {torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    else:
        print(
            f"device: cpu ({'requested' if args.device else 'no CUDA'}), torch {torch.__version__}"
        )
    try:
        check(args, device)
    except Exception as error:  # any failure is the check failing
        traceback.print_exc()
        print(f"FAIL: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
