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
import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from boltzoo.envs.data.cache import write_folder
from boltzoo.errors import RunFolderError
from boltzoo.lightningrl.checkpoint import (
    WEIGHT_SETTINGS,
    init_folders,
    latest_checkpoint,
    load_checkpoint,
)
from boltzoo.lightningrl.config import RunConfig
from boltzoo.lightningrl.weights import (
    adapter_parameters,
    add_frozen_copy,
    add_lora_adapters,
    lora_state_dict,
    merged_state_dict,
)

REFERENCE_SUFFIX = "_reference"  # a LoRA policy's KL reference: a frozen copy of its adapter


class PolicySet:
    """The weights of each trained policy name, on the learner's device.

    Args:
        model: the initial model (a ``transformers`` causal LM), already on its device.
        names: the policy names, sorted; the first trains ``model`` itself (full copies).
        config: the run's config (its ``lora_*`` settings).
        keep_initial: keep a frozen copy of the initial weights (full copies only; LoRA reads
            them as the base with the adapters off): the untrained agents sample from it.
        kl_reference: each policy's KL reference is the initial weights (until
            :meth:`anchor_references`).

    Attributes:
        names: the policy names.
        lora: whether each name is a LoRA adapter on one shared base.
        model: the module that holds every name's weights (LoRA), or the first name's model.
        modules: name -> the module whose forward pass is that policy (with LoRA: ``model``).
        parameters: name -> its trainable parameters.
        initial: the frozen initial model, or None.
    """

    def __init__(
        self,
        model: Any,
        names: list[str],
        config: RunConfig,
        *,
        keep_initial: bool = False,
        kl_reference: bool = False,
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
            if kl_reference or keep_initial:
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
        if kl_reference and self.initial is not None:
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

    def load_from(self, init_from: str | Path | dict[str, str], config: RunConfig) -> list[Path]:
        """Load the trained weights of a run's latest checkpoint (a warm start, an RL run), or
        with ``init_from`` a dict (policy name -> run folder) each policy's from its folder:
        that run's only policy, or its policy of the same name. Return the checkpoints'
        folders.

        Raises:
            RunFolderError: no checkpoint, or one trained with another model, other ``lora_*``
                settings or other policy names than ``config`` and this set (a dict: not every
                policy of this set named, or a folder without the policy).
        """
        folders = init_folders(init_from)
        if None not in folders and set(folders) != set(self.names):
            raise RunFolderError(
                f"init_from names policies {sorted(folders)}; this run has {self.names}: name "
                "each policy once (policy_map and train_agents say which there are)"
            )
        weights: dict[str, torch.Tensor] = {}
        checkpoints = []
        for name, run_dir in folders.items():
            folder, theirs, names = self._read_run(run_dir, config, whole=name is None)
            checkpoints.append(folder)
            if name is None:
                weights = theirs
            elif len(names) == 1 or name in names:
                source = names[0] if len(names) == 1 else name
                weights |= self._placed(theirs, names, source, name)
            else:
                raise RunFolderError(
                    f"init_from[{name!r}]={str(run_dir)!r} trained policies {names}: none "
                    f"is {name!r}, and there are several to take one from"
                )
        self.load_state_dict(weights)
        return checkpoints

    def _read_run(
        self, run_dir: Path, config: RunConfig, *, whole: bool
    ) -> tuple[Path, dict[str, torch.Tensor], list[str]]:
        """Return a run's latest checkpoint folder, its weights and its policy names, checked
        against ``config`` (and, ``whole``, against this set's policy names)."""
        folder = latest_checkpoint(run_dir / "checkpoints")
        if folder is None:
            raise RunFolderError(
                f"init_from={str(run_dir)!r}: no checkpoint in {run_dir / 'checkpoints'}"
            )
        saved = json.loads((folder / "config.json").read_text())
        ours = dataclasses.asdict(config)
        different = [k for k in WEIGHT_SETTINGS if saved.get(k) != ours[k]]
        weights, state = load_checkpoint(folder)
        names = state.get("policy_names", ["policy"])
        if different or (whole and names != self.names):
            theirs = {k: saved.get(k) for k in different} | {"policy names": names}
            raise RunFolderError(
                f"init_from={str(run_dir)!r} trained {theirs}; this run has "
                f"{ {k: ours[k] for k in different} | {'policy names': self.names} }: "
                "use the same model, lora_* settings, train_agents and policy_map"
            )
        return folder, weights, names

    def _placed(
        self, weights: dict[str, torch.Tensor], names: list[str], source: str, name: str
    ) -> dict[str, torch.Tensor]:
        """Return policy ``source``'s weights of a checkpoint that holds ``names``, keyed as
        this set's :meth:`state_dict` keys policy ``name``'s."""
        if self.lora:  # the adapter's name is a segment of each key: ...lora_A.<name>.weight
            pattern = re.compile(rf"(\.lora_\w+\.){re.escape(source)}\.")
            return {
                pattern.sub(rf"\g<1>{name}.", key): value
                for key, value in weights.items()
                if pattern.search(key)
            }
        if len(names) > 1:  # full copies: each policy's under "{name}/"
            prefix = f"{source}/"
            weights = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
        if len(self.names) == 1:
            return weights
        return {f"{name}/{key}": value for key, value in weights.items()}

    def merged(self, name: str) -> dict[str, torch.Tensor]:
        """Return policy ``name``'s weights as a plain transformers ``state_dict`` (its LoRA
        adapter merged)."""
        return merged_state_dict(self.modules[name], name if self.lora else None)

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


def export_run(run_dir: str | Path, out_dir: str | Path) -> Path:
    """Save the latest checkpoint of a run as plain transformers folders; return ``out_dir``.

    The base model named in the checkpoint's ``config.json`` is loaded and the trained weights
    are put into it (a :class:`PolicySet` as the run had it, its keys checked): LoRA adapters
    merged (``W + alpha / r * B A``), or full weights. A run with one policy is written to
    ``out_dir`` itself; a run with several (``policy_map``) writes one folder per policy,
    ``out_dir/<policy name>``. Each folder (model and the base's tokenizer) is written beside
    its place and renamed into it, so it is whole or absent.

    Raises:
        FileNotFoundError: the run has no checkpoint.
        RunFolderError: its weights do not fit the model and adapters its config describes.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from boltzoo.agents.models import resolve_model

    run_dir, out = Path(run_dir), Path(out_dir)
    folder = latest_checkpoint(run_dir / "checkpoints")
    if folder is None:
        raise FileNotFoundError(
            f"no checkpoint in {run_dir / 'checkpoints'}: train with save_every > 0 first"
        )
    saved = json.loads((folder / "config.json").read_text())
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    # (a config.json from before LoRA existed trained the full weights)
    settings = RunConfig(**{k: v for k, v in saved.items() if k in fields} | {
        "lora_r": saved.get("lora_r", 0)
    })  # fmt: skip
    weights, state = load_checkpoint(folder)
    names = state.get("policy_names", ["policy"])
    base = resolve_model(settings.model)
    policies = PolicySet(
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), names, settings
    )
    try:
        policies.load_state_dict(weights)  # a LoRA name mismatch would export the base model
    except (ValueError, RuntimeError) as error:
        raise RunFolderError(
            f"{folder}: the checkpoint's weights do not fit the model and adapters its "
            f"config.json describes ({str(error).splitlines()[0]})"
        ) from None
    tokenizer = AutoTokenizer.from_pretrained(base)
    plain = (
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32) if policies.lora else None
    )
    for name in names:
        model = policies.modules[name]
        if plain is not None:  # a plain model with the adapter merged in
            plain.load_state_dict(policies.merged(name))
            model = plain

        def build(tmp: Path, model: Any = model) -> None:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)

        write_folder(out if len(names) == 1 else out / name, build)
    return out
