"""The weights behind each trained policy: a full model, or a LoRA adapter on a shared base.

With ``lora_r > 0`` the trainer wraps the base model once with peft and gives every policy name
its own adapter (``add_lora_adapters``); the base weights never change, so agents that are not
trained act with the adapters switched off. To hand a policy's weights to a separate sampler (a
bf16 copy, a vLLM engine) or to export them, ``merged_state_dict`` returns the plain
transformers ``state_dict`` of base + adapter, computed without touching the base:
``W' = W + (alpha / r) * B @ A`` for every adapted layer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from boltzoo.errors import MissingDependencyError


def _import_peft() -> Any:
    try:
        import peft
    except ImportError:
        raise MissingDependencyError(
            "LoRA training needs peft: pip install 'boltzoo[train]'"
        ) from None
    return peft


def is_peft_model(model: Any) -> bool:
    """Return whether ``model`` is a peft model (it has LoRA adapters)."""
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


def add_lora_adapters(
    model: Any,
    names: Sequence[str],
    *,
    r: int,
    alpha: float,
    dropout: float = 0.0,
    target_modules: list[str] | str = "all-linear",
) -> Any:
    """Wrap ``model`` with one LoRA adapter per name (peft); return the peft model.

    Every adapter starts as a no-op (peft initialises ``B = 0``), so at step 0 each policy is the
    base model. Names must be plain identifiers (peft uses them in parameter names).
    """
    peft = _import_peft()
    if not names:
        raise ValueError("add_lora_adapters needs at least one adapter name")
    for name in names:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
            raise ValueError(f"adapter name {name!r}: use letters, digits, '_' and '-' only")
    tied = getattr(getattr(model, "config", None), "tie_word_embeddings", False)
    targets = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    if tied and "lm_head" in targets:
        # The merged lm_head would no longer equal the embeddings it is tied to.
        raise ValueError(
            "lora_target_modules names lm_head, but this model ties it to the input embeddings; "
            "adapt the attention and MLP projections instead (e.g. 'all-linear')"
        )
    config = peft.LoraConfig(
        r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, bias="none"
    )
    peft_model = peft.get_peft_model(model, config, adapter_name=names[0])
    for name in names[1:]:
        peft_model.add_adapter(name, config)
    return peft_model


def adapter_parameters(model: Any, name: str) -> list[torch.nn.Parameter]:
    """Return the parameters of adapter ``name`` of a peft model."""
    pattern = re.compile(rf"\.lora_\w+\.{re.escape(name)}(\.|$)")
    params = [p for n, p in model.named_parameters() if pattern.search(n)]
    if not params:
        raise ValueError(f"the model has no LoRA adapter named {name!r}")
    return params


def lora_state_dict(model: Any, adapters: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """Return the LoRA weights of a peft model's adapters (what a checkpoint stores): every
    adapter's, or those named in ``adapters``."""
    weights = {k: v for k, v in model.state_dict().items() if ".lora_" in k}
    if adapters is None:
        return weights
    return {k: v for k, v in weights.items() if any(f".{a}." in k for a in adapters)}


@torch.no_grad()
def add_frozen_copy(model: Any, adapter: str, copy: str) -> None:
    """Add adapter ``copy`` to peft ``model``: the weights of ``adapter`` now, frozen (a KL
    reference on the shared base: a few MB, where a copy of the model would be all of it)."""
    model.add_adapter(copy, model.peft_config[adapter])
    parameters = dict(model.named_parameters())
    for name, parameter in parameters.items():
        if ".lora_" in name and f".{adapter}." in name:
            target = parameters[name.replace(f".{adapter}.", f".{copy}.")]
            target.copy_(parameter)
    for name, parameter in parameters.items():
        if f".{copy}." in name:
            parameter.requires_grad_(False)


@torch.no_grad()
def merged_state_dict(model: Any, adapter: str | None = None) -> dict[str, torch.Tensor]:
    """Return the plain transformers ``state_dict`` of ``model`` with ``adapter`` merged.

    For a model without adapters this is its ``state_dict``. For a peft model, the names lose
    peft's wrapping (``...q_proj.base_layer.weight`` becomes ``...q_proj.weight``) and each
    adapted layer's weight is ``W + delta`` of ``adapter`` (``None``: the base model alone).
    The base weights themselves are never modified.
    """
    if not is_peft_model(model):
        return dict(model.state_dict())
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    merged = {
        name.replace(".base_layer.", "."): tensor
        for name, tensor in base.state_dict().items()
        if ".lora_" not in name
    }
    if adapter is None:
        return merged
    if adapter not in model.peft_config:
        raise ValueError(f"the model has no LoRA adapter named {adapter!r}")
    for name, module in base.named_modules():
        if isinstance(module, LoraLayer) and adapter in module.lora_A:
            weight = module.get_base_layer().weight
            merged[f"{name}.weight"] = weight + module.get_delta_weight(adapter).to(weight.dtype)
    return merged
