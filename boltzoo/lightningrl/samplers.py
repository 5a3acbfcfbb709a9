"""Where a LightningRL run samples its rollouts, and how the samplers get new weights.

The kinds (``TrainerConfig.sampler``):

* ``shared``: the learner's own modules (with LoRA, each policy's adapter selected per call):
  new weights at once, nothing to copy;
* ``copy``: a separate model in ``sampler_precision``, loaded with the merged weights after
  each update (sampling runs without LoRA's extra matmuls, and bf16 on a CPU);
* ``vllm``: a vLLM engine (``boltzoo[vllm]``), loaded with the merged weights after each update.

With ``rollout_workers > 0`` every Ray worker holds its own copy of each sampler (``shared``
becomes ``copy``: a worker cannot share the learner's memory); after each update the merged
weights go to the workers as one object in Ray's object store.

The samplers own the policy version: the number of learner updates whose weights a sampler
holds, stamped on every Completion it returns (the initial weights are version 0). Backends
never count on their own; ``sync`` sets it on every copy, local and remote.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

import torch

from boltzoo.agents.transformers_policy import TransformersPolicy
from boltzoo.episode import Episode
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.weights import is_peft_model, merged_state_dict
from boltzoo.rollout import WorkerPool, greedy_sampling, rollout

FROZEN = "@frozen"  # the name of the untrained agents' sampler (in checkpoints too)


def make_sampler(
    config: TrainerConfig,
    model: Any,
    adapter: str | None,
    tokenizer: Any,
    device: torch.device,
    name: str,
    index: int,
    kind: str | None = None,
) -> Any:
    """Return a sampling policy of ``kind`` (default ``config.sampler``) over ``model``'s
    weights (with LoRA ``adapter`` selected, or merged into a copy); ``index`` offsets its
    seed, so that every sampler of a run draws its own random numbers."""
    cfg = config
    kind = kind or cfg.sampler
    sampling = dict(max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature, top_p=cfg.top_p)
    if kind == "vllm":
        from boltzoo.agents.vllm_policy import VLLMPolicy

        dtype = "bfloat16" if cfg.sampler_precision == "bf16" else "float32"
        engine = {"dtype": dtype} | cfg.sampler_kwargs
        policy = VLLMPolicy(cfg.model, seed=cfg.seed + index, **engine, **sampling)
        if adapter is not None:
            policy.load_weights(merged_state_dict(model, adapter), version=0)
        return policy
    if kind == "copy":
        from transformers import AutoModelForCausalLM

        base = model.get_base_model() if is_peft_model(model) else model
        dtype = torch.bfloat16 if cfg.sampler_precision == "bf16" else torch.float32
        sampling_model = AutoModelForCausalLM.from_config(base.config, dtype=dtype)
        sampling_model.load_state_dict(merged_state_dict(model, adapter))
        model, adapter = sampling_model.to(device).eval(), None
    return TransformersPolicy(
        model,
        tokenizer,
        name=name,
        seed=cfg.seed + index,
        max_prompt_tokens=cfg.max_prompt_tokens,
        adapter=adapter,
        **sampling,
    )


class Samplers:
    """The samplers of one run: one per trained policy name, plus ``FROZEN`` for the agents
    that are not trained (when there are any), in this process or on Ray workers.

    Args:
        config: the run's config (``sampler``, ``sampler_precision``, ``rollout_workers``, ...).
        models: the learner's module of each trained policy name.
        lora: whether the policy names are LoRA adapters on one shared base.
        frozen_source: the module with the initial weights, for the untrained agents (None:
            every agent is trained).
        agent_names: agent -> sampler name (a trained policy name or ``FROZEN``).
    """

    def __init__(
        self,
        config: TrainerConfig,
        models: Mapping[str, Any],
        tokenizer: Any,
        device: torch.device,
        *,
        lora: bool,
        frozen_source: Any = None,
        agent_names: Mapping[str, str],
    ):
        self.config = config
        self.models = dict(models)
        self.lora = lora
        # a worker cannot share the learner's memory: it holds a copy
        self.kind = (
            "copy" if config.rollout_workers and config.sampler == "shared" else config.sampler
        )
        self.trained = {
            name: make_sampler(
                config,
                model,
                name if lora else None,
                tokenizer,
                device,
                f"{config.model}:{name}",
                i,
                self.kind,
            )
            for i, (name, model) in enumerate(self.models.items())
        }
        self.frozen = None
        if frozen_source is not None:
            # the frozen weights never change: a shared sampler reads them in place
            self.frozen = make_sampler(
                config,
                frozen_source,
                None,
                tokenizer,
                device,
                f"{config.model}@0",
                len(self.models),
                self.kind,
            )
        self.agent_names = dict(agent_names)
        self.pool: WorkerPool | None = None
        if config.rollout_workers:
            self.pool = WorkerPool(config.rollout_workers, config.ray_address)
            self.pool.install(self.named(), self.agent_names)

    def named(self) -> dict[str, Any]:
        """Return every sampler of this process by name (``FROZEN`` included)."""
        named = dict(self.trained)
        if self.frozen is not None:
            named[FROZEN] = self.frozen
        return named

    def by_agent(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Return the policy of every agent (``overrides``: agent -> another policy, e.g. a
        framework agent behind a gateway to the sampler)."""
        named = self.named()
        return {agent: named[name] for agent, name in self.agent_names.items()} | dict(
            overrides or {}
        )

    def sync(self, names: list[str], version: int) -> None:
        """Give the samplers of ``names`` the learner's current weights and stamp every
        sampler's Completions with ``version`` from now on. With workers, only the workers'
        copies are loaded: they do all the sampling."""
        weights = {}
        if self.kind != "shared":
            weights = {
                name: merged_state_dict(self.models[name], name if self.lora else None)
                for name in names
            }
        if self.pool is not None:
            if weights:
                self.pool.load_weights(weights, version)
            self.pool.set_version(list(self.trained), version)
            return
        for name, state_dict in weights.items():
            self.trained[name].load_weights(state_dict, version=version)
        for policy in self.trained.values():
            policy.version = version

    def rollout(
        self,
        env_id: str,
        policies: Mapping[str, Any],
        tasks: list[int],
        *,
        group_size: int = 1,
        seed: int = 0,
        greedy: bool = False,
        episode_timeout_s: float | None = None,
        **env_kwargs: Any,
    ) -> list[Episode]:
        """Play ``tasks`` (each ``group_size`` times) with ``policies`` (agent -> policy) here,
        or with the workers' copies of the samplers; ``greedy`` decodes at temperature 0 and
        leaves the sampling state as it was."""
        if self.pool is not None:
            return self.pool.rollout(
                env_id,
                tasks=tasks,
                group_size=group_size,
                seed=seed,
                episode_timeout_s=episode_timeout_s,
                progress=False,
                greedy=greedy,
                **env_kwargs,
            )
        with greedy_sampling(self.named().values()) if greedy else contextlib.nullcontext():
            return rollout(
                env_id,
                policies,
                tasks=tasks,
                group_size=group_size,
                seed=seed,
                episode_timeout_s=episode_timeout_s,
                progress=False,
                **env_kwargs,
            )

    def close(self) -> None:
        """Stop the Ray workers (if any)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
