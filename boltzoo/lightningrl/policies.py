"""The learner's weights: one set per policy name, and each one's KL reference.

Every trained agent maps to a policy name (``TrainerConfig.policy_map``; by default all share
``"policy"``). Each name's weights are

* with ``lora_r > 0``: a LoRA adapter of its own on one shared base, which never changes;
* else: a full copy of the model (the first name trains the given module itself).

The agents that are not trained act with the initial weights: the base with the adapters off,
or a frozen copy of the model (``initial``, made only when something reads it).

A policy's KL reference (``kl_coef > 0``) is where its training started: the base with the
adapters off (LoRA from scratch), the frozen initial copy (full copies), and after a warm start
(:meth:`PolicySet.anchor_references`) the weights it loaded: a frozen copy of each adapter on
the same base, or a frozen copy of each model.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import torch

from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.weights import (
    adapter_parameters,
    add_frozen_copy,
    add_lora_adapters,
    lora_state_dict,
)

REFERENCE_SUFFIX = "_reference"  # a LoRA policy's KL reference: a frozen copy of its adapter


class PolicySet:
    """The weights of each trained policy name, on the learner's device.

    Args:
        model: the initial model (a ``transformers`` causal LM), already on its device.
        names: the policy names, sorted; the first trains ``model`` itself (full copies).
        config: the run's config (``lora_*``, ``kl_coef``).
        keep_initial: keep a frozen copy of the initial weights (full copies only; LoRA reads
            them as the base with the adapters off): the untrained agents sample from it.

    Attributes:
        names: the policy names.
        lora: whether each name is a LoRA adapter on one shared base.
        model: the module that holds every name's weights (LoRA), or the first name's model.
        modules: name -> the module whose forward pass is that policy (with LoRA: ``model``).
        parameters: name -> its trainable parameters.
        initial: the frozen initial model, or None.
    """

    def __init__(
        self, model: Any, names: list[str], config: TrainerConfig, *, keep_initial: bool
    ) -> None:
        self.names = list(names)
        self.lora = config.lora_r > 0
        self.initial: Any = None
        if self.lora:
            self.model = add_lora_adapters(
                model,
                self.names,
                r=config.lora_r,
                alpha=config.lora_alpha,
                dropout=config.lora_dropout,
                target_modules=config.lora_target_modules,
            )
            self.modules = {name: self.model for name in self.names}
            self.parameters = {name: adapter_parameters(self.model, name) for name in self.names}
        else:
            if config.kl_coef or keep_initial:
                self.initial = copy.deepcopy(model).eval().requires_grad_(False)
            self.model = model
            self.modules = {
                name: model if i == 0 else copy.deepcopy(model) for i, name in enumerate(self.names)
            }
            self.parameters = {
                name: [p for p in m.parameters() if p.requires_grad]
                for name, m in self.modules.items()
            }
        # name -> a frozen module, or an adapter's frozen copy (LoRA after a warm start); a
        # name not here with LoRA: the base with the adapters off
        self.references: dict[str, Any] = {}
        if config.kl_coef and self.initial is not None:
            self.references = {name: self.initial for name in self.names}

    def initial_module(self) -> Any:
        """Return the module that samples with the initial weights: the frozen copy, or (LoRA)
        the shared model, whose adapters the untrained agents' sampler switches off."""
        return self.initial if self.initial is not None else self.model

    def trainable(self) -> list[torch.nn.Parameter]:
        """Return every policy's trainable parameters (what the optimiser updates)."""
        return [p for name in self.names for p in self.parameters[name]]

    def module(self, name: str) -> Any:
        """Return the module whose forward pass is policy ``name`` (selecting its adapter)."""
        module = self.modules[name]
        if self.lora:
            module.set_adapter(name)
        return module

    def set_mode(self, train: bool, names: list[str] | None = None) -> None:
        """Put the modules of ``names`` (default: all) in training or evaluation mode."""
        for name in self.names if names is None else names:
            self.modules[name].train(train)

    @contextlib.contextmanager
    def reference(self, name: str) -> Iterator[Any]:
        """Yield the module whose forward pass is policy ``name``'s KL reference (see the module
        docstring); the policy's adapter is active again after."""
        reference = self.references.get(name)
        if reference is not None and not isinstance(reference, str):
            yield reference
            return
        module = self.modules[name]
        if reference is None:
            with module.disable_adapter():
                yield module
            return
        module.set_adapter(reference)
        try:
            yield module
        finally:
            module.set_adapter(name)

    def anchor_references(self) -> None:
        """Make each policy's KL reference a frozen copy of its current weights (after a warm
        start: the KL holds a policy near where RL starts, as TRL's reference is the SFT
        model)."""
        if self.lora:  # a frozen copy of each adapter, on the same base
            for name in self.names:
                add_frozen_copy(self.model, name, f"{name}{REFERENCE_SUFFIX}")
                self.references[name] = f"{name}{REFERENCE_SUFFIX}"
            self.model.set_adapter(self.names[0])  # (adding one made it active)
        else:
            self.references = {
                name: copy.deepcopy(m).eval().requires_grad_(False)
                for name, m in self.modules.items()
            }

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Return what a checkpoint stores: every adapter's LoRA weights (not their KL
        references'), or the full model (one policy), or each policy's under ``"{name}/"``."""
        if self.lora:
            return lora_state_dict(self.model, self.names)
        if len(self.names) == 1:
            return self.model.state_dict()
        return {
            f"{name}/{key}": value
            for name, module in self.modules.items()
            for key, value in module.state_dict().items()
        }

    def load_state_dict(self, weights: dict[str, torch.Tensor]) -> None:
        """Load weights that :meth:`state_dict` returned (a checkpoint's).

        Raises:
            ValueError: LoRA weights whose keys are not this set's adapters'.
        """
        if self.lora:
            expected = set(lora_state_dict(self.model, self.names))
            if set(weights) != expected:
                raise ValueError(
                    "the checkpoint's LoRA weights do not match this run's adapters "
                    f"({sorted(set(weights) ^ expected)[:3]} ...): same policy_map and lora_*?"
                )
            self.model.load_state_dict(weights, strict=False)
        elif len(self.names) == 1:
            self.model.load_state_dict(weights)
        else:
            for name, module in self.modules.items():
                prefix = f"{name}/"
                module.load_state_dict(
                    {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
                )
