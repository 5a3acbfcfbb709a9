"""Where a LightningRL run samples its rollouts, and how the samplers get new weights.

The kinds (``TrainerConfig.sampler``):

* ``shared``: the learner's own modules (with LoRA, each policy's adapter selected per call):
  new weights at once, nothing to copy;
* ``copy``: a separate model in ``sampler_precision``, loaded with the merged weights after
  each update (sampling runs without LoRA's extra matmuls, and bf16 on a CPU);
* ``vllm``: a vLLM engine (``boltzoo[vllm]``), loaded with the merged weights after each update.

With ``rollout_workers > 0`` every Ray worker holds its own copy of each sampler (``shared``
becomes ``copy``: a worker cannot share the learner's memory), built there from what the learner
ships (``DeferredSampler``: the learner builds no sampling model or engine of its own); after each
update the merged weights go to the workers as one object in Ray's object store.

The samplers own the policy version: the number of learner updates whose weights a sampler
holds, stamped on every Completion it returns (the initial weights are version 0). Backends
never count on their own; ``sync`` sets it on every copy, local and remote.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping
from typing import Any

import torch

from boltzoo.agents.models import bf16_where_native
from boltzoo.agents.transformers_policy import TransformersPolicy
from boltzoo.episode import Episode
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.weights import is_peft_model, merged_state_dict
from boltzoo.rollout import WorkerPool, generator_state, greedy_sampling, rollout

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
        policy = VLLMPolicy(
            cfg.model,
            seed=cfg.seed + index,
            max_prompt_tokens=cfg.max_prompt_tokens,
            **engine,
            **sampling,
        )
        if adapter is not None:
            policy.load_weights(merged_state_dict(model, adapter), version=0)
        return policy
    if kind == "copy":
        base = model.get_base_model() if is_peft_model(model) else model
        model = _copy_model(cfg, base.config, merged_state_dict(model, adapter), device)
        adapter = None
    return TransformersPolicy(
        model,
        tokenizer,
        name=name,
        seed=cfg.seed + index,
        max_prompt_tokens=cfg.max_prompt_tokens,
        adapter=adapter,
        **sampling,
    )


def _copy_model(
    config: TrainerConfig, model_config: Any, weights: dict[str, torch.Tensor], device: Any
) -> Any:
    """Return a fresh model of ``model_config`` in ``sampler_precision`` (fp32 where ``device``
    has no native bf16) holding ``weights`` (merged), on ``device``: what a ``copy`` sampler
    samples with."""
    from transformers import AutoModelForCausalLM

    bf16 = bf16_where_native(
        config.sampler_precision == "bf16",
        device,
        "sampler_precision='bf16'",
        "the sampling copy is",
    )
    dtype = torch.bfloat16 if bf16 else torch.float32
    model = AutoModelForCausalLM.from_config(model_config, dtype=dtype)
    model.load_state_dict(weights)
    return model.to(device).eval()


class DeferredSampler:
    """A sampler built in the process that samples with it: with Ray rollout workers the learner
    never samples, so it holds only this and ships it; each worker builds its own copy there (a
    ``copy`` model from the learner's weights merged when shipped, or a vLLM engine from the model
    folder). No sampling model or engine is ever built in the learner's process for them.

    Pickled in one object with the gateways and agent programs in front of it, the copy a worker
    builds is the one those serve there (pickle's memo keeps the references one object).
    """

    def __init__(
        self,
        config: TrainerConfig,
        model: Any,
        adapter: str | None,
        tokenizer: Any,
        device: torch.device,
        name: str,
        index: int,
        kind: str,
    ) -> None:
        self.config, self.model, self.adapter, self.tokenizer = config, model, adapter, tokenizer
        self.device, self.name, self.index, self.kind = str(device), name, index, kind
        self.version = 0

    def act(self, turns: Any) -> Any:
        raise RuntimeError(f"{self.name} samples on the rollout workers only")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        if self.kind == "vllm":  # (the workers load the merged weights right after)
            args: tuple[Any, ...] = (None, None)
        else:
            base = self.model.get_base_model() if is_peft_model(self.model) else self.model
            merged = merged_state_dict(self.model, self.adapter)
            args = (base.config, {k: v.detach().cpu() for k, v in merged.items()})
        return (
            _built_sampler,
            (self.config, *args, self.tokenizer, self.device, self.name, self.index, self.kind),
        )


def _built_sampler(
    config: TrainerConfig,
    model_config: Any,
    weights: dict[str, torch.Tensor] | None,
    tokenizer: Any,
    device: str,
    name: str,
    index: int,
    kind: str,
) -> Any:
    """Build what a :class:`DeferredSampler` stands for, where it was unpickled."""
    model = None
    if kind == "copy":  # (a model of the sampler's own; "shared" below samples with it as it is)
        assert weights is not None
        model, kind = _copy_model(config, model_config, weights, device), "shared"
    return make_sampler(config, model, None, tokenizer, torch.device(device), name, index, kind)


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
        # with workers, each builds its own copies: the learner keeps recipes (DeferredSampler)
        build = DeferredSampler if config.rollout_workers else make_sampler
        self.trained = {
            name: build(
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
            self.frozen = build(
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
        self.agent_policies: dict[str, Any] = {}
        self.pool: WorkerPool | None = None
        self._installed = False  # whether the workers hold the samplers yet
        self.version = 0  # the learner updates the samplers' weights hold
        if config.rollout_workers:
            # a vLLM sampler needs a GPU on its worker
            options = {"num_gpus": 1} if self.kind == "vllm" else None
            self.pool = WorkerPool(config.rollout_workers, config.ray_address, options)

    def named(self) -> dict[str, Any]:
        """Return every sampler of this process by name (``FROZEN`` included)."""
        named = dict(self.trained)
        if self.frozen is not None:
            named[FROZEN] = self.frozen
        return named

    def set_agent_policies(self, policies: Mapping[str, Any]) -> None:
        """Let ``policies`` (agent -> policy) act for those agents instead of their samplers:
        framework agents whose gateway is in front of a sampler. Call it before the first
        rollout: the workers get them with the samplers, in one pickle, so that on a worker
        each gateway serves that worker's copy of its sampler."""
        if self._installed:
            raise RuntimeError("set_agent_policies must come before the first rollout or sync")
        self.agent_policies = dict(policies)

    def by_agent(self) -> dict[str, Any]:
        """Return the policy of every agent: its sampler, or the policy set for it."""
        named = self.named()
        return {agent: named[name] for agent, name in self.agent_names.items()} | dict(
            self.agent_policies
        )

    def _workers(self) -> WorkerPool:
        """Return the worker pool, giving it the samplers (and agent policies) the first time."""
        assert self.pool is not None
        if not self._installed:
            # an agent's own policy travels as one more named sampler
            own = {f"@agent:{agent}": policy for agent, policy in self.agent_policies.items()}
            agents = self.agent_names | {agent: f"@agent:{agent}" for agent in self.agent_policies}
            self.pool.install(self.named() | own, agents)
            self._installed = True
            if self.kind == "vllm":  # a vLLM sampler is rebuilt from the model folder there
                self.pool.load_weights(self._merged(list(self.trained)), self.version)
        return self.pool

    def _merged(self, names: list[str]) -> dict[str, dict[str, Any]]:
        return {
            name: merged_state_dict(self.models[name], name if self.lora else None)
            for name in names
        }

    def sync(self, names: list[str], version: int) -> None:
        """Give the samplers of ``names`` the learner's current weights and stamp every
        sampler's Completions with ``version`` from now on. With workers, only the workers'
        copies are loaded: they do all the sampling."""
        self.version = version
        weights = self._merged(names) if self.kind != "shared" else {}
        if self.pool is not None:
            if weights:
                self._workers().load_weights(weights, version)
            self._workers().set_version(list(self.trained), version)
            return
        for name, state_dict in weights.items():
            self.trained[name].load_weights(state_dict, version=version)
        for policy in self.trained.values():
            policy.version = version

    def load_frozen(self, state_dict: Mapping[str, Any], version: int) -> None:
        """Give the untrained agents' sampler these full weights (a warm start's policy, merged)
        for the rest of the run: :meth:`sync` never touches it."""
        if self.frozen is None:
            raise RuntimeError("every agent learns: there is no frozen sampler to load")
        if self.pool is not None:
            self._workers().load_weights({FROZEN: dict(state_dict)}, version)
        else:
            self.frozen.load_weights(state_dict, version=version)

    def generator_states(self) -> dict[str, Any]:
        """Return the samplers' random generator states: ``{"here": {name: state}}``, and with
        workers ``"workers": [{name: state}, ...]``, one per worker."""
        states: dict[str, Any] = {"here": {n: generator_state(p) for n, p in self.named().items()}}
        if self.pool is not None:
            states["workers"] = self._workers().generator_states()
        return states

    def set_generator_states(self, states: Mapping[str, Any]) -> None:
        """Restore :meth:`generator_states` (workers' states only to as many workers)."""
        for name, sampler in self.named().items():
            saved = states.get("here", {}).get(name)
            if saved is not None:
                sampler.generator.set_state(saved)
        workers = states.get("workers")
        if self.pool is not None and workers:
            if len(workers) == len(self.pool.workers):
                self._workers().set_generator_states(workers)
            else:
                warnings.warn(
                    f"the checkpoint holds {len(workers)} workers' sampling states, this run has "
                    f"{len(self.pool.workers)} workers: they sample afresh",
                    stacklevel=2,
                )

    def rollout(
        self,
        env_id: str,
        tasks: list[int],
        *,
        group_size: int = 1,
        seed: int = 0,
        greedy: bool = False,
        episode_timeout_s: float | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> list[Episode]:
        """Play ``tasks`` (each ``group_size`` times) with every agent's policy
        (:meth:`by_agent`) here, or with the workers' copies; ``greedy`` decodes at temperature
        0 and leaves the sampling state as it was."""
        if self.pool is not None:
            return self._workers().rollout(
                env_id,
                tasks=tasks,
                group_size=group_size,
                seed=seed,
                episode_timeout_s=episode_timeout_s,
                progress=False,
                greedy=greedy,
                env_kwargs=env_kwargs,
            )
        with greedy_sampling(self.named().values()) if greedy else contextlib.nullcontext():
            return rollout(
                env_id,
                self.by_agent(),
                tasks=tasks,
                group_size=group_size,
                seed=seed,
                episode_timeout_s=episode_timeout_s,
                progress=False,
                env_kwargs=env_kwargs,
            )

    def close(self) -> None:
        """Stop the Ray workers (if any)."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None
