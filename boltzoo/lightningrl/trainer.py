"""The LightningRL trainer: rollouts, credit, advantages and clipped policy-gradient updates.

One step, top to bottom (``Trainer.train_step``):

1. draw ``tasks_per_step`` tasks (uniformly, or by learnability: ``curriculum.py``); run
   ``group_size`` rollouts of each (``boltzoo.rollout``);
2. drop every group that holds a failed episode (policy or env error, timeout, over-long prompt);
3. ``flatten``: one transition per LLM call of the trained agents, credited by ``credit``;
4. ``compute_advantages`` within groups of the same task;
5. optimise each policy on its own agents' transitions: calls that continue each other packed
   into one sequence (``sequences.pack_calls``), micro-batches bucketed by length (no compute
   on padding beyond the bucket), gradients accumulated and clipped per policy, one
   AdamW step, the learning-rate schedule stepped; a non-finite loss skips the update and is
   logged. With ``replay_demos``, each policy's loss also holds ``replay_coef`` times the
   cross-entropy of ``replay_calls`` demonstration calls drawn for the step (the warm start's
   loss, ``sft.py``), so that RL keeps what the demonstrations taught (InstructGPT's PPO-ptx,
   with demonstrations as its supervised data);
6. the samplers use the new weights: at once when they share the learner's weights (an adapter
   is selected per call), else loaded into the sampling copy or vLLM engine (``load_weights``);
   their Completions carry the new policy version.

Each trained agent maps to a policy name (``policy_map``): a full copy of the model, or with
``lora_r > 0`` a LoRA adapter on one shared frozen base. Agents not in ``train_agents`` act with
the initial weights (a frozen copy, or the base with adapters off), which stay bit-identical.
Checkpoints (``checkpoint.py``) make runs resumable after a kill.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from boltzoo.agents.models import load_model
from boltzoo.episode import load_episodes
from boltzoo.errors import ConfigError, DatasetError, MissingDependencyError, RunFolderError
from boltzoo.lightningrl.advantages import compute_advantages
from boltzoo.lightningrl.checkpoint import (
    adopt_weight_settings,
    check_run_folder,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from boltzoo.lightningrl.config import TrainerConfig
from boltzoo.lightningrl.curriculum import LearnabilitySampler, task_pools
from boltzoo.lightningrl.loss import aggregate, policy_loss
from boltzoo.lightningrl.memory import peak_rss_mib, release_freed_memory, rss_mib
from boltzoo.lightningrl.samplers import FROZEN, Samplers
from boltzoo.lightningrl.sequences import (
    PackedCalls,
    call_spans,
    micro_batches,
    pack_calls,
    response_logprobs,
)
from boltzoo.lightningrl.transitions import (
    Transition,
    demonstration_transitions,
    flatten,
    select_agents,
)
from boltzoo.lightningrl.weights import (
    adapter_parameters,
    add_frozen_copy,
    add_lora_adapters,
    lora_state_dict,
)
from boltzoo.registration import inspected, resolve_env_id
from boltzoo.rollout import evaluation_tasks


class Trainer:
    """Trains the selected agents' policies with LightningRL; see the module docstring.

    Which weights act for which agent:

    * every trained agent maps to a policy name (``config.policy_map``; default: all share one,
      ``"policy"``). Each name has its own weights: a LoRA adapter on one shared base when
      ``lora_r > 0``, else a full copy of the model;
    * agents that are not trained act with the initial weights (the base with adapters off, or a
      frozen copy), which never change.

    ``model`` / ``tokenizer`` may be given (tests pass a tiny model); else ``config.model`` loads.
    With ``config.framework`` set, ``agent_builders`` maps trained agents to your framework
    agent's builder (``(model_client, tools) -> AssistantAgent`` for AutoGen, ``(model, tools)
    -> Agent`` for the Agents SDK, ``(model, tools) -> graph`` for LangGraph); agents without
    one get the bundled example agent. Their calls go through a gateway per policy (``close()``
    stops them). A LangGraph :class:`~boltzoo.agents.frameworks.NodeGraph` plays its env agent
    node by node: its node names take the agent's place in ``train_agents`` and ``policy_map``,
    and its untrained nodes call the frozen initial model (through a gateway of their own).
    """

    def __init__(
        self,
        config: TrainerConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        agent_builders: dict[str, Any] | None = None,
    ):
        # what close() stops: a failure while setting up stops what was started so far
        self.gateways: dict[str, Any] = {}
        self.programs: list[Any] = []  # agent programs' policies (their hubs stop with close())
        self.sampling: Samplers | None = None
        try:
            self._set_up(config, model, tokenizer, agent_builders)
        except BaseException:
            self.close()
            raise

    def _set_up(
        self, config: TrainerConfig, model: Any, tokenizer: Any, agent_builders: Any
    ) -> None:
        self.config = cfg = config
        if cfg.init_from:  # a warm start's model and LoRA settings, unless set otherwise
            adopt_weight_settings(cfg, cfg.init_from)
        self.env_id = resolve_env_id(cfg.env)
        self.output_dir = Path(cfg.output_dir)
        self.resume_asked = False  # (then train() leaves the folder check to resume())
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir = self.output_dir / "checkpoints"
        self.metrics_path = self.output_dir / "metrics.jsonl"
        _seed_everything(cfg.seed)

        device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if model is None:
            # the learner's master weights are fp32 as stored (bf16 is autocast), never a bf16
            # load cast up
            model, tokenizer = load_model(cfg.model, device=device, dtype=torch.float32)
        self.device = torch.device(device)
        # on a CPU, small micro-batches are faster and keep activations to a few GB
        self.micro_batch_tokens = cfg.micro_batch_tokens or (
            8192 if self.device.type == "cuda" else 1024
        )
        self.tokenizer = tokenizer
        self.use_bf16 = cfg.precision == "bf16" and (
            self.device.type == "cuda"
            and torch.cuda.is_bf16_supported()
            or self.device.type == "cpu"
        )

        with inspected(self.env_id, **cfg.env_kwargs) as env:
            self.env_agents, env_tasks = list(env.possible_agents), env.tasks
        self.num_tasks = len(env_tasks)
        if agent_builders and not cfg.framework:
            raise ValueError("agent_builders needs config.framework (autogen, openai-agents, ...)")
        # env agent -> the graph that plays it node by node (its nodes are trained as agents)
        self.graphs = self._node_graphs(agent_builders or {}) if cfg.framework else {}
        nodes = {node for graph in self.graphs.values() for node in graph.nodes}
        # the names that learn: the env's agents, a graph-played agent replaced by its nodes,
        # and the roles an agent program calls the model as
        roles = set(cfg.agent_roles)
        self.agents = sorted((set(self.env_agents) - set(self.graphs)) | nodes | roles)
        self.train_agents = select_agents(self.agents, cfg.train_agents)
        unknown = set(cfg.policy_map) - set(self.agents)
        if unknown:
            raise ValueError(
                f"policy_map names agents {sorted(unknown)} that {self.env_id} does not have "
                f"(its agents: {self.agents})"
            )
        untrained_mapped = set(cfg.policy_map) - self.train_agents
        if untrained_mapped:  # (they would act with the frozen initial model, not a policy)
            raise ConfigError(
                f"policy_map names agents that do not learn: {sorted(untrained_mapped)} (train "
                f"agents: {sorted(self.train_agents)}); add them to train_agents or leave them out"
            )
        # agent -> policy name, for the trained agents only
        self.policy_of = {a: cfg.policy_map.get(a, "policy") for a in sorted(self.train_agents)}
        self.policy_names = sorted(set(self.policy_of.values()))
        untrained = set(self.agents) - self.train_agents

        # --- the learner's weights: one model per policy name, or one adapter each on a base
        self.lora = cfg.lora_r > 0
        model = model.to(self.device)
        frozen = None
        if self.lora:
            self.model = add_lora_adapters(
                model,
                self.policy_names,
                r=cfg.lora_r,
                alpha=cfg.lora_alpha,
                dropout=cfg.lora_dropout,
                target_modules=cfg.lora_target_modules,
            )
            self.models = {name: self.model for name in self.policy_names}
            self.params = {name: adapter_parameters(self.model, name) for name in self.policy_names}
        else:
            if cfg.kl_coef or (untrained and cfg.sampler == "shared"):
                frozen = copy.deepcopy(model).eval().requires_grad_(False)
            self.model = model
            self.models = {
                name: model if i == 0 else copy.deepcopy(model)
                for i, name in enumerate(self.policy_names)
            }
            self.params = {
                name: [p for p in m.parameters() if p.requires_grad]
                for name, m in self.models.items()
            }
        # the KL's reference, per policy name: a frozen module, or none (LoRA: the base with
        # adapters off); a warm start (init_from) replaces it with the weights it loads
        self.references: dict[str, Any] = (
            {name: frozen for name in self.policy_names} if cfg.kl_coef and frozen else {}
        )

        # --- the samplers: the learner's weights themselves, or copies synced after updates
        # (here or on Ray workers; samplers.py)
        self.sampling = Samplers(
            cfg,
            self.models,
            tokenizer,
            self.device,
            lora=self.lora,
            frozen_source=(frozen if frozen is not None else self.model) if untrained else None,
            agent_names={
                a: self.policy_of.get(a, FROZEN) for a in self.env_agents if a not in self.graphs
            },
        )
        self.samplers = self.sampling.trained
        self.frozen_policy = self.sampling.frozen

        # --- framework agents: each trained agent's agent calls its policy through a gateway
        self.agent_policies: dict[str, Any] = {}
        if cfg.framework:
            self._start_framework_agents(agent_builders or {})
        elif cfg.agent_command or cfg.agent_service:
            self._start_agent_program()

        trainable = [p for name in self.policy_names for p in self.params[name]]
        self.optimizer = torch.optim.AdamW(trainable, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        self.step = 0
        self.task_rng = np.random.default_rng(cfg.seed)
        self.task_sampler = None  # uniform draws from task_rng
        if cfg.task_sampling == "learnability":
            self.task_sampler = LearnabilitySampler(
                task_pools(env_tasks, cfg.task_pool_field),
                self.task_rng,
                decay=cfg.task_pool_decay,
            )
        self.skipped_updates = 0
        self.saved_step: int | None = None  # the step of this run's newest checkpoint
        self.train_seconds = 0.0  # rollouts and updates so far (the max_train_minutes clock)
        self._tensorboard = None
        # policy name -> its agents' demonstration calls, replayed in every update
        self.replay = self._replay_calls(cfg.replay_demos) if cfg.replay_demos else {}
        if cfg.init_from:
            self.load_weights_from(cfg.init_from)

    def _replay_calls(self, paths: list[str]) -> dict[str, list[Transition]]:
        episodes = [e for path in paths for e in load_episodes(path)]
        calls = demonstration_transitions(
            episodes, sorted(self.train_agents), self.tokenizer, agents=self.agents
        )
        if not calls:
            raise DatasetError(
                f"replay_demos={paths}: no LLM call of {sorted(self.train_agents)} to replay in "
                f"their {len(episodes)} episodes (failed episodes are skipped)"
            )
        by_policy: dict[str, list[Transition]] = {}
        for t in calls:
            by_policy.setdefault(self.policy_of[t.agent], []).append(t)
        return by_policy

    @property
    def policy(self) -> Any:
        """The sampling policy of the first trained policy name (the only one, by default)."""
        return self.samplers[self.policy_names[0]]

    def _node_graphs(self, builders: dict[str, Any]) -> dict[str, Any]:
        """Return env agent -> NodeGraph: the graphs in ``builders``, and with a bundled graph
        as ``config.framework``, that graph for every env agent."""
        from boltzoo.agents import examples

        graphs = {agent: b for agent, b in builders.items() if getattr(b, "nodes", None)}
        if graphs and self.config.framework not in ("langgraph", *examples.GRAPHS):
            raise ValueError(
                f"the graphs in agent_builders ({sorted(graphs)}) need framework='langgraph', "
                f"not {self.config.framework!r}"
            )
        unknown = set(graphs) - set(self.env_agents)
        if unknown:
            raise ValueError(
                f"agent_builders gives graphs for {sorted(unknown)}, which {self.env_id} does not "
                f"have (its agents: {self.env_agents})"
            )
        if self.config.framework in examples.GRAPHS:
            plain = set(builders) - set(graphs)
            if plain:
                raise ValueError(
                    f"framework={self.config.framework!r} plays every agent with its bundled "
                    f"graph; agent_builders for {sorted(plain)} must be graphs (NodeGraph) too"
                )
            bundled = examples.EXAMPLES[self.config.framework]
            for agent in self.env_agents:
                graphs.setdefault(agent, bundled(self.env_id, agent))
        return graphs

    def _start_framework_agents(self, builders: dict[str, Any]) -> None:
        from boltzoo.agents import examples, frameworks
        from boltzoo.agents.gateway import Gateway

        framework = self.config.framework
        adapter, example = frameworks.ADAPTERS[framework], examples.EXAMPLES[framework]
        unknown = set(builders) - set(self.policy_of) - set(self.graphs)
        if unknown:
            raise ValueError(f"agent_builders names agents that are not trained: {sorted(unknown)}")
        for name in self.policy_names:
            self.gateways[name] = Gateway(self.samplers[name], model_name=name).start()
        for agent, name in self.policy_of.items():
            if agent in self.env_agents and agent not in self.graphs:
                build = builders.get(agent) or example(self.env_id, agent)
                self.agent_policies[agent] = adapter(build, self.gateways[name])
        for agent, graph in self.graphs.items():
            # each node calls its own policy, or the frozen initial model
            if FROZEN not in self.gateways and set(graph.nodes) - set(self.policy_of):
                self.gateways[FROZEN] = Gateway(self.frozen_policy, model_name=FROZEN).start()
            node_gateways = {
                node: self.gateways[self.policy_of.get(node, FROZEN)] for node in graph.nodes
            }
            # the graph's own label (model, version): its first trained node's policy
            first = next((n for n in graph.nodes if n in self.policy_of), graph.nodes[0])
            self.agent_policies[agent] = frameworks.LangGraphPolicy(
                graph, node_gateways[first], node_gateways=node_gateways
            )
        self.sampling.set_agent_policies(self.agent_policies)

    def _start_agent_program(self) -> None:
        """Play every env agent with the agent program (``agent_command`` or
        ``agent_service``): one gateway routes each name the program calls the model as (env
        agents and ``agent_roles``) to its policy, or to the frozen initial model for names that
        are not trained."""
        from boltzoo.agents.programs import agent_program, program_gateway

        cfg = self.config
        named = self.sampling.named()
        routes = {agent: named[self.policy_of.get(agent, FROZEN)] for agent in self.agents}
        api_key = os.environ.get("BOLTZOO_API_KEY")
        host = cfg.agent_service.rpartition(":")[0].strip("[]") if cfg.agent_service else None
        gateway = program_gateway(
            None, host or "127.0.0.1", api_key, routes=routes, model_name=cfg.model
        )
        self.gateways["@program"] = gateway
        program = agent_program(
            gateway,
            command=cfg.agent_command,
            service=cfg.agent_service,
            timeout_s=cfg.agent_timeout_s,
            concurrency=cfg.agent_concurrency,
            api_key=api_key,
        )
        if cfg.agent_service:
            print(f"agent services claim turns at {program.claim_url}", flush=True)
        self.programs = [program]
        self.agent_policies = {agent: program for agent in self.env_agents}
        self.sampling.set_agent_policies(self.agent_policies)

    def close(self) -> None:
        """Stop the agent programs' hubs, the gateways and the Ray rollout workers (if any)."""
        for program in self.programs:
            program.close()
        self.programs = []
        for gateway in self.gateways.values():
            gateway.close()
        self.gateways.clear()
        if self.sampling is not None:
            self.sampling.close()

    @contextlib.contextmanager
    def _gateways_paused(self) -> Iterator[None]:
        """Hold the gateways' new calls while the weights change (an agent service may call
        the model between steps): none is sampled by half-updated weights."""
        with contextlib.ExitStack() as stack:
            for gateway in self.gateways.values():
                stack.enter_context(gateway.paused())
            yield

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _learner(self, name: str) -> Any:
        """Return the module whose forward pass is policy ``name`` (selecting its adapter)."""
        model = self.models[name]
        if self.lora:
            model.set_adapter(name)
        return model

    # --- schedule --------------------------------------------------------------------------

    def _lr_factor(self, step: int) -> float:
        cfg = self.config
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
        if cfg.lr_schedule == "cosine":
            return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        if cfg.lr_schedule == "linear":
            return max(0.0, 1 - progress)
        return 1.0

    # --- one step --------------------------------------------------------------------------

    def policies(self) -> dict[str, Any]:
        """Return the policy of every agent: its trained policy (or framework agent calling
        it), or the frozen initial one."""
        return self.sampling.by_agent()

    def train_step(self) -> dict[str, Any]:
        """Run one LightningRL step; return its metrics."""
        cfg = self.config
        started = time.perf_counter()
        if self.task_sampler is not None:  # where groups are likeliest to be mixed
            tasks = self.task_sampler.draw(cfg.tasks_per_step)
            learnability = self.task_sampler.learnability_of(tasks)
        else:
            tasks = self.task_rng.choice(
                self.num_tasks, size=cfg.tasks_per_step, replace=self.num_tasks < cfg.tasks_per_step
            )
        for model in self.models.values():
            model.eval()
        episodes = self.sampling.rollout(
            self.env_id,
            [int(t) for t in tasks],
            group_size=cfg.group_size,
            seed=cfg.seed * 1_000_003 + self.step * 1_009,
            episode_timeout_s=cfg.episode_timeout_s,
            env_kwargs=cfg.env_kwargs,
        )
        rollout_seconds = time.perf_counter() - started
        if self.task_sampler is not None:
            self.task_sampler.record(
                [(e.task_index, bool(e.success)) for e in episodes if not e.failed]
            )

        # 2. a group with a failed episode has no fair baseline: drop it whole
        failed_groups = {e.metadata.get("group") for e in episodes if e.failed}
        kept = [e for e in episodes if e.metadata.get("group") not in failed_groups]
        # 3-4. credit each LLM call, then baselines within groups
        transitions = flatten(
            kept,
            cfg.credit,
            sorted(self.train_agents),
            tokenizer=self.tokenizer,
            gamma=cfg.gamma,
            agents=self.agents,
        )
        group_stats = None
        if transitions:
            group_stats = compute_advantages(
                transitions,
                cfg.estimator,
                cfg.group_by,
                normalize_std=cfg.normalize_std,
                per_episode=cfg.per_episode_advantage,
            )
        # samples drawn with older weights than the learner's (a worker that missed a sync)
        stale = sum(t.policy_version not in (None, self.step) for t in transitions)
        self._write_samples(transitions)  # (what the model wrote, with the credit it got)
        update_started = time.perf_counter()
        with self._gateways_paused():
            update = self.update(transitions) if transitions else {}
            self.scheduler.step()
            self.step += 1
            # 6. the samplers act with the new weights from the next rollout on
            self.sampling.sync(sorted({self.policy_of[t.agent] for t in transitions}), self.step)
        release_freed_memory()  # else the heap keeps every step's freed tensors (memory.py)
        update_seconds = time.perf_counter() - update_started

        self.train_seconds += time.perf_counter() - started
        ok = [e for e in episodes if not e.failed]
        advantages = [t.advantage for t in transitions]
        train_tokens = sum(len(t.response_token_ids) for t in transitions)
        metrics = {
            "step": self.step,
            "reward": float(np.mean([t.reward for t in transitions])) if transitions else 0.0,
            "score": float(np.mean([e.score or 0.0 for e in ok])) if ok else 0.0,
            "success_rate": float(np.mean([bool(e.success) for e in ok])) if ok else 0.0,
            "episodes": len(episodes),
            "failed_episodes": len(episodes) - len(ok),
            "dropped_groups": len(failed_groups),
            "stale_transitions": stale,
            "transitions": len(transitions),
            "advantage_mean": float(np.mean(advantages)) if advantages else 0.0,
            "advantage_std": float(np.std(advantages)) if advantages else 0.0,
            "group_size_mean": group_stats.mean_size if group_stats else 0.0,
            "singleton_groups": group_stats.singletons if group_stats else 0,
            # the share of groups that teach nothing: all right or all wrong
            "frac_reward_zero_std": (
                group_stats.zero_std / group_stats.groups if group_stats else 0.0
            ),
            "lr": self.scheduler.get_last_lr()[0],
            "rollout_seconds": rollout_seconds,
            "update_seconds": update_seconds,
            "train_tokens_per_second": train_tokens / update_seconds if update_seconds else 0.0,
            "skipped_updates": self.skipped_updates,
            "train_seconds": self.train_seconds,
            # the process's memory: a run that grows step by step shows it here before it dies
            "rss_mib": rss_mib(),
            "peak_rss_mib": peak_rss_mib(),
            **update,
        }
        if self.task_sampler is not None:  # the drawn pools' mean p (1 - p): 0.25 at most
            metrics["task_learnability"] = learnability
        tool_counts = [e.steps[-1].info.get("tool_calls") for e in ok if e.steps]
        if any(count is not None for count in tool_counts):  # envs whose infos count tool calls
            metrics["tool_use_rate"] = float(np.mean([bool(count) for count in tool_counts]))
        if len(self.train_agents) > 1:  # who learns how fast, agent by agent
            for agent in sorted(self.train_agents):
                rewards = [t.reward for t in transitions if t.agent == agent]
                metrics[f"reward/{agent}"] = float(np.mean(rewards)) if rewards else 0.0
        return metrics

    def _write_samples(self, transitions: list[Transition]) -> None:
        """Append ``samples_per_step`` of the step's LLM calls to ``samples.jsonl``, spread over
        its episodes, as TRL's ``log_completions`` shows them: the prompt's end (the latest
        message), the response as sampled, its reward and advantage."""
        count = self.config.samples_per_step
        if not count or not transitions:
            return
        chosen = transitions[:: max(1, len(transitions) // count)][:count]
        decode = self.tokenizer.decode
        with (self.output_dir / "samples.jsonl").open("a") as f:
            for t in chosen:
                row = {
                    "step": self.step + 1,
                    "task_id": t.task_id,
                    "episode_id": t.episode_id,
                    "agent": t.agent,
                    "turn": t.turn,
                    "prompt_end": decode(t.prompt_token_ids[-120:]),
                    "response": decode(t.response_token_ids),
                    "reward": t.reward,
                    "advantage": t.advantage,
                }
                f.write(json.dumps(row) + "\n")

    def update(self, transitions: list[Transition]) -> dict[str, float]:
        """Optimise on the step's transitions; return loss statistics.

        Each policy's loss is its own mean (over its tokens, sequences or episodes, per
        ``aggregation``), so one policy's gradient never depends on another's transitions;
        gradients are clipped per policy, then one AdamW step updates them all.
        """
        cfg = self.config
        by_policy: dict[str, list[Transition]] = {}
        for t in transitions:
            by_policy.setdefault(self.policy_of[t.agent], []).append(t)
        sums: dict[str, float] = {}
        # the step's demonstration calls, drawn per policy (seeded by the step: a resumed run
        # draws the same)
        rng = np.random.default_rng([cfg.seed, self.step])
        replayed = {
            name: [calls[i] for i in sorted(rng.permutation(len(calls))[: cfg.replay_calls])]
            for name, calls in self.replay.items()
            if name in by_policy
        }
        for name in by_policy:
            self.models[name].train()
        for _ in range(cfg.epochs_per_step):
            self.optimizer.zero_grad(set_to_none=True)
            finite = True
            for name, policy_transitions in by_policy.items():
                finite = self._accumulate(name, policy_transitions, sums, 1 / len(by_policy))
                if finite and name in replayed:
                    # L = L_pg + replay_coef * CE(demonstrations)
                    ce = self.backward_cross_entropy(name, replayed[name], cfg.replay_coef)
                    finite = math.isfinite(ce)
                    sums["replay_loss"] = sums.get("replay_loss", 0.0) + ce / len(by_policy)
                if not finite:
                    break
            if not finite:  # a NaN or inf loss: no update from this step, and say so
                self.optimizer.zero_grad(set_to_none=True)
                self.skipped_updates += 1
                continue
            for name in by_policy:
                grad_norm = torch.nn.utils.clip_grad_norm_(self.params[name], cfg.max_grad_norm)
                sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm) / len(by_policy)
            self.optimizer.step()
        for model in self.models.values():
            model.eval()
        return {k: v / cfg.epochs_per_step for k, v in sums.items()}

    def _accumulate(
        self, name: str, transitions: list[Transition], sums: dict[str, float], weight: float
    ) -> bool:
        """Backpropagate policy ``name``'s loss over its transitions in micro-batches; add its
        statistics (times ``weight``) to ``sums``. Return False on a non-finite loss."""
        cfg = self.config
        model = self._learner(name)
        by_episode = cfg.aggregation == "episode"
        total_tokens = sum(len(t.response_token_ids) for t in transitions)
        total_episodes = len({t.episode_id for t in transitions})
        total_sequences = len(transitions)
        if not (cfg.kl_coef or cfg.entropy_coef):
            # A call with advantage 0 adds exactly nothing to the policy gradient: it still counts
            # in the means' denominators above, but no forward or backward pass is spent on it
            # (in sparse-reward tasks most groups are all-0 or all-1 early on).
            # With episode means, an episode stays whole unless all of its calls are 0.
            live = {t.episode_id for t in transitions if t.advantage != 0}
            transitions = [
                t for t in transitions if t.advantage != 0 or (by_episode and t.episode_id in live)
            ]
        local: dict[str, float] = {}
        covered = 0.0
        # Calls that continue each other share one forward pass (the token mean allows it: a
        # token weighs the same wherever it sits); sequence and episode means keep calls apart.
        rows = pack_calls(transitions, merge=cfg.pack_calls and cfg.aggregation == "token")
        batches = micro_batches(
            rows, self.micro_batch_tokens, by_episode=by_episode, share_prompts=cfg.share_prompts
        )
        for batch in batches:
            out = self._micro_batch_loss(model, batch, name)
            if not torch.isfinite(out.loss):
                return False
            # gradient accumulation: each micro-batch weighs its share of the policy's batch
            if cfg.aggregation == "token":
                share = sum(row.response_tokens for row in batch) / total_tokens
            elif cfg.aggregation == "sequence":
                share = sum(len(row.calls) for row in batch) / total_sequences
            else:
                share = len({row.episode_id for row in batch}) / total_episodes
            (out.loss * share).backward()
            covered += share
            for key in STATISTICS:
                local[key] = local.get(key, 0.0) + getattr(out, key) * share
        for key, value in local.items():  # the statistics are means over the calls trained on
            sums[key] = sums.get(key, 0.0) + value / covered * weight
        return True

    def backward_cross_entropy(
        self, name: str, calls: list[Transition], scale: float = 1.0
    ) -> float:
        """Backpropagate ``scale`` times policy ``name``'s cross-entropy on the response tokens of
        ``calls`` (their mean over those tokens: the warm start's loss); return the loss
        (unscaled). A non-finite micro-batch stops it and its value is returned (NaN or inf):
        the caller then discards the gradients."""
        model = self._learner(name)
        total_tokens = sum(len(t.response_token_ids) for t in calls)
        pad = getattr(self.policy, "pad_token_id", 0)  # any id will do: padding is masked
        loss_sum = 0.0
        # an episode's calls that continue each other are one sequence, one forward pass; calls
        # that start alike (one database's schema) share one pass over that start
        share = self.config.share_prompts
        rows = pack_calls(calls)
        for micro in micro_batches(rows, self.micro_batch_tokens, share_prompts=share):
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_bf16):
                logprobs, mask, _ = response_logprobs(model, micro, 1.0, pad, share_prompts=share)
            # L = -sum_t m_t log p(y_t) / sum_t m_t over all the calls' response tokens
            weight = sum(row.response_tokens for row in micro) / total_tokens
            loss = -aggregate(logprobs, mask, "token") * weight
            if not torch.isfinite(loss):
                return float(loss)
            (loss * scale).backward()
            loss_sum += float(loss.detach())
        return loss_sum

    def _micro_batch_loss(self, model: Any, batch: list[PackedCalls], name: str = "policy") -> Any:
        """The loss of one micro-batch of policy ``name`` (whose KL reference it uses)."""
        cfg = self.config
        pad = getattr(self.policy, "pad_token_id", 0)  # any id will do: padding is masked

        def logprobs_of(module: Any, with_entropy: bool = False) -> Any:
            # each call at the temperature it was sampled with (the config's if not recorded)
            return response_logprobs(
                module,
                batch,
                cfg.temperature,
                pad,
                with_entropy,
                per_call_temperature=True,
                share_prompts=cfg.share_prompts,
            )

        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.use_bf16):
            logprobs, mask, entropy = logprobs_of(model, with_entropy=cfg.entropy_coef > 0)
            ref = None
            if cfg.kl_coef:
                with torch.no_grad(), self.reference_of(name) as reference:
                    ref = logprobs_of(reference)[0]
        # Per token: its call's advantage and sampling logprob (recomputed ones stand in for
        # calls whose backend gave none: their ratio is then 1).
        old = logprobs.detach().clone()
        advantages = torch.zeros_like(old)
        for i, row in enumerate(batch):
            for call, begin, end in call_spans(row, logprobs.shape[1]):
                advantages[i, begin:end] = call.advantage
                if call.logprobs is not None:
                    old[i, begin:end] = torch.tensor(call.logprobs, device=old.device)
        return policy_loss(
            logprobs,
            old,
            advantages,
            mask,
            clip_eps=cfg.clip_eps,
            clip_eps_high=cfg.clip_eps_high,
            dual_clip=cfg.dual_clip,
            ref_logprobs=ref,
            kl_coef=cfg.kl_coef,
            kl_estimator=cfg.kl_estimator,
            entropy=entropy,
            entropy_coef=cfg.entropy_coef,
            aggregation=cfg.aggregation,
            episode_ids=[row.episode_id for row in batch],
        )

    # --- evaluation ------------------------------------------------------------------------

    def evaluate(self) -> dict[str, Any]:
        """Return held-out success rate, mean score and the trained agents' mean episode return
        (``eval_return``, each agent's rewards summed, averaged over agents), greedy decoding,
        without updating.

        The ``eval_tasks`` tasks are spread evenly over the held-out split (every task when it
        has no more), so that a split ordered by database or template is sampled across.
        ``eval_task_ids`` and ``eval_right`` (the indices of the tasks played, and of those
        solved) let two evaluations be compared task by task (``report.paired_outcomes``).
        """
        cfg = self.config
        kwargs = cfg.env_kwargs | cfg.eval_env_kwargs
        with inspected(self.env_id, **kwargs) as env:
            num_tasks = env.num_tasks
        episodes = self.sampling.rollout(
            self.env_id,
            evaluation_tasks(num_tasks, cfg.eval_tasks),
            seed=cfg.seed,
            greedy=True,
            env_kwargs=kwargs,
        )
        ok = [e for e in episodes if not e.failed]
        n = max(1, len(episodes))
        # the return includes shaping (tool and format rewards) that the score leaves out
        # (over the env agents that learn: a graph's agent stands for its trained nodes)
        learning = [
            a
            for a in self.env_agents
            if (set(self.graphs[a].nodes) if a in self.graphs else {a}) & self.train_agents
        ]
        returns = [np.mean([e.returns().get(a, 0.0) for a in learning]) for e in ok]
        return {
            "eval_success_rate": sum(bool(e.success) for e in ok) / n,
            "eval_score": sum(e.score or 0.0 for e in ok) / n,
            "eval_return": float(sum(returns)) / n,
            "eval_failed": len(episodes) - len(ok),
            "eval_task_ids": [e.task_index for e in episodes],
            "eval_right": sorted(e.task_index for e in ok if e.success),
        }

    # --- the loop --------------------------------------------------------------------------

    def train(self) -> list[dict[str, Any]]:
        """Run (or continue) the training loop to ``config.steps``; return each step's metrics."""
        cfg = self.config
        if self.step == 0 and not self.resume_asked:
            check_run_folder(self.output_dir, resume=False)
        print(f"LightningRL config:\n{json.dumps(cfg.to_dict(), indent=2)}", flush=True)
        history = []
        bar = tqdm(
            total=cfg.steps,
            initial=self.step,
            desc="lightningrl",
            unit="step",
            disable=not cfg.progress,
        )
        try:
            if cfg.eval_every and self.step == 0:
                self._log({"step": 0, **self.evaluate()})
            while self.step < cfg.steps and not self.out_of_time():
                metrics = self.train_step()
                last = self.step >= cfg.steps or self.out_of_time()
                if cfg.eval_every and (self.step % cfg.eval_every == 0 or last):
                    metrics.update(self.evaluate())  # and always after the last step
                self._log(metrics)
                history.append(metrics)
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['reward']:.3f}", score=f"{metrics['score']:.3f}")
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self.save()
            if self.saved_step != self.step:
                self.save()  # the last step, unless save_every just saved it
        finally:
            bar.close()
            if self._tensorboard is not None:
                self._tensorboard.close()
                self._tensorboard = None
        return history

    def out_of_time(self) -> bool:
        """Return whether the training time has passed ``config.max_train_minutes``."""
        limit = self.config.max_train_minutes
        return limit is not None and self.train_seconds >= 60 * limit

    def _log(self, metrics: dict[str, Any]) -> None:
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(metrics) + "\n")
        if self.config.tensorboard:
            if self._tensorboard is None:
                try:
                    from torch.utils.tensorboard import SummaryWriter
                except ImportError:
                    raise MissingDependencyError(
                        "tensorboard=True needs tensorboard: pip install 'boltzoo[train]'"
                    ) from None
                self._tensorboard = SummaryWriter(str(self.output_dir / "tensorboard"))
            for key, value in metrics.items():
                if key != "step" and isinstance(value, (int, float)):
                    self._tensorboard.add_scalar(key, value, metrics["step"])
            self._tensorboard.flush()

    # --- checkpoints -----------------------------------------------------------------------

    def trained_weights(self) -> dict[str, torch.Tensor]:
        """Return what a checkpoint stores of the weights: every adapter's LoRA weights, or the
        full model (one policy), or each policy's model under ``"{name}/"`` (several)."""
        if self.lora:  # (the policies' adapters, not their KL references')
            return lora_state_dict(self.model, self.policy_names)
        if len(self.policy_names) == 1:
            return self.model.state_dict()
        return {
            f"{name}/{key}": value
            for name, model in self.models.items()
            for key, value in model.state_dict().items()
        }

    @contextlib.contextmanager
    def reference_of(self, name: str) -> Iterator[Any]:
        """Yield the module whose forward pass is policy ``name``'s KL reference: a frozen
        module (full weights), its adapter's frozen copy on the shared base (LoRA after a warm
        start), or the base with the adapters off (LoRA from scratch); the learner's adapter
        is active again after."""
        reference = self.references.get(name)
        if reference is not None and not isinstance(reference, str):
            yield reference
            return
        model = self.models[name]
        if reference is None:
            with model.disable_adapter():
                yield model
            return
        model.set_adapter(reference)
        try:
            yield model
        finally:
            model.set_adapter(name)

    def _load_trained_weights(self, weights: dict[str, torch.Tensor]) -> None:
        if self.lora:
            expected = set(lora_state_dict(self.model, self.policy_names))
            if set(weights) != expected:
                raise ValueError(
                    "the checkpoint's LoRA weights do not match this run's adapters "
                    f"({sorted(set(weights) ^ expected)[:3]} ...): same policy_map and lora_*?"
                )
            self.model.load_state_dict(weights, strict=False)
        elif len(self.policy_names) == 1:
            self.model.load_state_dict(weights)
        else:
            for name, model in self.models.items():
                prefix = f"{name}/"
                model.load_state_dict(
                    {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
                )

    def save(self) -> Path:
        """Write a checkpoint of the current step (atomically); return its folder."""
        self.saved_step = self.step
        state = {
            "step": self.step,
            "policy_names": self.policy_names,
            "skipped_updates": self.skipped_updates,
            "train_seconds": self.train_seconds,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "task_rng": self.task_rng.bit_generator.state,
            "task_pools": self.task_sampler.state_dict() if self.task_sampler else None,
            "sampling_generators": self.sampling.generator_states(),
            "torch_rng": torch.get_rng_state(),
            "numpy_rng": np.random.get_state(),
            "python_rng": random.getstate(),
        }
        return save_checkpoint(
            self.checkpoint_dir, self.step, self.trained_weights(), state, self.config.to_dict()
        )

    def load_weights_from(self, run_dir: str | Path) -> Path:
        """Start from the trained weights of another run's latest checkpoint (a warm start);
        return that checkpoint's folder. Optimiser state, step and RNGs stay this run's own."""
        folder = latest_checkpoint(Path(run_dir) / "checkpoints")
        if folder is None:
            raise RunFolderError(
                f"init_from={str(run_dir)!r}: no checkpoint in {Path(run_dir) / 'checkpoints'}"
            )
        saved = json.loads((folder / "config.json").read_text())
        ours = self.config.to_dict()
        keys = ("model", "lora_r", "lora_alpha", "lora_target_modules")
        different = [k for k in keys if saved.get(k) != ours[k]]
        weights, state = load_checkpoint(folder)
        names = state.get("policy_names", ["policy"])
        if different or names != self.policy_names:
            theirs = {k: saved.get(k) for k in different} | {"policy names": names}
            raise RunFolderError(
                f"init_from={str(run_dir)!r} trained {theirs}; this run has "
                f"{ {k: ours[k] for k in different} | {'policy names': self.policy_names} }: "
                "use the same model, lora_* settings, train_agents and policy_map"
            )
        self._load_trained_weights(weights)
        if self.config.kl_coef:
            # The KL holds each policy near where this run starts, the warm start (TRL's
            # reference model is the SFT model), not near the untrained base; a resumed run
            # loads init_from first too, so its reference stays the warm start.
            if self.lora:  # a frozen copy of each adapter, on the same base
                for name in self.policy_names:
                    add_frozen_copy(self.model, name, f"{name}{REFERENCE_SUFFIX}")
                    self.references[name] = f"{name}{REFERENCE_SUFFIX}"
                self.model.set_adapter(self.policy_names[0])  # (adding one made it active)
            else:
                self.references = {
                    name: copy.deepcopy(m).eval().requires_grad_(False)
                    for name, m in self.models.items()
                }
        self.sampling.sync(self.policy_names, self.step)
        return folder

    def resume(self) -> bool:
        """Continue from the newest checkpoint in ``output_dir``; return whether there was one.

        Raises:
            RunFolderError: the folder holds trained steps but no checkpoint to continue from.
        """
        self.resume_asked = True
        check_run_folder(self.output_dir, resume=True)
        folder = latest_checkpoint(self.checkpoint_dir)
        if folder is None:  # nothing trained yet: the step-0 evaluation logged is done again
            self.metrics_path.unlink(missing_ok=True)
            return False
        weights, state = load_checkpoint(folder)
        if state.get("policy_names", self.policy_names) != self.policy_names:
            raise ValueError(
                f"the checkpoint in {folder} trained policies {state['policy_names']}, this run "
                f"has {self.policy_names}: resume with the same train_agents and policy_map"
            )
        self._load_trained_weights(weights)
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.step = self.saved_step = state["step"]
        self.skipped_updates = state["skipped_updates"]
        self.train_seconds = state.get("train_seconds", 0.0)
        self.task_rng.bit_generator.state = state["task_rng"]
        if self.task_sampler is not None and state.get("task_pools"):
            self.task_sampler.load_state_dict(state["task_pools"])
        self.sampling.sync(self.policy_names, self.step)
        generators = state.get("sampling_generators") or {}
        if "here" not in generators:  # (checkpoints before the samplers kept workers' states)
            generators = {
                "here": generators or {self.policy_names[0]: state.get("sampling_generator")}
            }
        self.sampling.set_generator_states(generators)
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        # Metrics and samples logged after the checkpoint belong to work that is now redone.
        for path in (self.metrics_path, self.output_dir / "samples.jsonl"):
            if path.exists():
                lines = path.read_text().splitlines()
                kept = [line for line in lines if json.loads(line)["step"] <= self.step]
                path.write_text("".join(line + "\n" for line in kept))
        return True


REFERENCE_SUFFIX = "_reference"  # a LoRA policy's KL reference: a frozen copy of its adapter
STATISTICS = ("pg_loss", "kl", "entropy", "clip_fraction", "ratio_mean")  # from LossOutput


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
