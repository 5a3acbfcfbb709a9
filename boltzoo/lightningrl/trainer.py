"""The LightningRL trainer: rollouts, credit, advantages and clipped policy-gradient updates.

One step, top to bottom (``Trainer.train_step``):

1. draw ``tasks_per_step`` tasks (uniformly, or by learnability: ``curriculum.py``); run
   ``group_size`` rollouts of each (``boltzoo.rollout``);
2. drop every group that holds a failed episode (policy or env error, timeout, over-long prompt);
3. ``flatten``: one transition per LLM call of the trained agents, credited by ``credit``;
4. ``compute_advantages`` within groups of the same task;
5. optimise each policy on its own agents' transitions (``update.py``: packed calls,
   micro-batches, gradients accumulated and clipped per policy, one AdamW step; a non-finite
   loss skips the update and is logged), the learning-rate schedule stepped. With
   ``replay_demos``, each policy's loss also holds ``replay_coef`` times the cross-entropy of
   ``replay_calls`` demonstration calls drawn for the step (the warm start's loss), so that RL
   keeps what the demonstrations taught (InstructGPT's PPO-ptx);
6. the samplers use the new weights: at once when they share the learner's weights (an adapter
   is selected per call), else loaded into the sampling copy or vLLM engine (``load_weights``);
   their Completions carry the new policy version.

Each trained agent maps to a policy name (``policy_map``) whose weights (``policies.py``) are a
full copy of the model, or with ``lora_r > 0`` a LoRA adapter on one shared frozen base. Agents
not in ``train_agents`` act with the initial weights, which stay bit-identical. Framework
agents, node graphs and agent programs play their agents through gateways (``players.py``).
Checkpoints (``checkpoint.py``) make runs resumable after a kill.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from boltzoo.agents.models import load_model
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
from boltzoo.lightningrl.logs import RunLog, step_metrics
from boltzoo.lightningrl.memory import peak_rss_mib, release_freed_memory, rss_mib
from boltzoo.lightningrl.players import (
    framework_players,
    node_graphs,
    paused,
    program_players,
    who_learns,
)
from boltzoo.lightningrl.policies import PolicySet
from boltzoo.lightningrl.samplers import FROZEN, Samplers
from boltzoo.lightningrl.transitions import (
    Transition,
    by_policy,
    flatten,
    read_demonstrations,
)
from boltzoo.lightningrl.update import Learner
from boltzoo.registration import inspected, resolve_env_id
from boltzoo.rollout import evaluation_tasks


class Trainer:
    """Trains the selected agents' policies with LightningRL; see the module docstring. Which
    weights act for which agent: ``weights`` (``policies.py``); who samples: ``sampling``.

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
        _seed_everything(cfg.seed)

        device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        if model is None:
            # the learner's master weights are fp32 as stored (bf16 is autocast), never a bf16
            # load cast up
            model, tokenizer = load_model(cfg.model, device=device, dtype=torch.float32)
        self.device = torch.device(device)
        self.tokenizer = tokenizer
        self.logs = RunLog(
            self.output_dir,
            tensorboard=cfg.tensorboard,
            samples_per_step=cfg.samples_per_step,
            tokenizer=tokenizer,
        )  # metrics.jsonl, samples.jsonl, TensorBoard (logs.py)

        with inspected(self.env_id, **cfg.env_kwargs) as env:
            self.env_agents, env_tasks = list(env.possible_agents), env.tasks
        self.num_tasks = len(env_tasks)
        if agent_builders and not cfg.framework:
            raise ValueError("agent_builders needs config.framework (autogen, openai-agents, ...)")
        # env agent -> the graph that plays it node by node (its nodes are trained as agents)
        self.graphs = (
            node_graphs(cfg.framework, self.env_id, self.env_agents, agent_builders or {})
            if cfg.framework
            else {}
        )
        # the names that learn, which of them do, and the policy name of each that does
        self.agents, self.train_agents, self.policy_of = who_learns(
            cfg, self.env_id, self.env_agents, self.graphs
        )
        untrained = set(self.agents) - self.train_agents

        # the learner's weights (policies.py): one model per policy name, or one adapter each
        self.weights = PolicySet(
            model.to(self.device),
            sorted(set(self.policy_of.values())),
            cfg,
            keep_initial=bool(untrained) and cfg.sampler == "shared",
            kl_reference=cfg.kl_coef > 0,
        )
        # the samplers: the learner's weights themselves, or copies synced after updates
        # (here or on Ray workers; samplers.py)
        self.sampling = Samplers(
            cfg,
            self.weights.modules,
            tokenizer,
            self.device,
            lora=self.weights.lora,
            frozen_source=self.weights.initial_module() if untrained else None,
            agent_names={
                a: self.policy_of.get(a, FROZEN) for a in self.env_agents if a not in self.graphs
            },
        )
        # who plays each agent when not its sampler (players.py)
        if cfg.framework:
            self.sampling.set_agent_policies(
                framework_players(
                    cfg.framework,
                    self.env_id,
                    self.env_agents,
                    agent_builders or {},
                    self.graphs,
                    self.policy_of,
                    self.sampling,
                    self.gateways,
                )
            )
        elif cfg.agent_command or cfg.agent_service:
            program, players = program_players(
                cfg, self.agents, self.env_agents, self.policy_of, self.sampling, self.gateways
            )
            self.programs.append(program)
            self.sampling.set_agent_policies(players)

        # the optimiser and the loss passes (update.py)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.learner = Learner(self.weights, cfg, self.device, pad_token_id=pad)
        self.step = 0
        self.task_rng = np.random.default_rng(cfg.seed)
        self.task_sampler = None  # uniform draws from task_rng
        if cfg.task_sampling == "learnability":
            self.task_sampler = LearnabilitySampler(
                task_pools(env_tasks, cfg.task_pool_field),
                self.task_rng,
                decay=cfg.task_pool_decay,
            )
        self.saved_step: int | None = None  # the step of this run's newest checkpoint
        self.train_seconds = 0.0  # rollouts and updates so far (the max_train_minutes clock)
        # policy name -> its agents' demonstration calls, replayed in every update
        self.replay: dict[str, list[Transition]] = {}
        if cfg.replay_demos:
            calls, _ = read_demonstrations(
                cfg.replay_demos, self.train_agents, tokenizer, agents=self.agents
            )
            self.replay = by_policy(calls, self.policy_of)
        if cfg.init_from:
            self.load_weights_from(cfg.init_from)

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

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- one step --------------------------------------------------------------------------

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
        self.weights.set_mode(False)
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
        # what the model wrote, with the credit it got
        self.logs.write_samples(self.step + 1, transitions)
        update_started = time.perf_counter()
        with paused(self.gateways):  # (an agent service may call the model between steps)
            update = self.update(transitions) if transitions else {}
            self.learner.scheduler.step()
            self.step += 1
            # 6. the samplers act with the new weights from the next rollout on
            self.sampling.sync(sorted({self.policy_of[t.agent] for t in transitions}), self.step)
        release_freed_memory()  # else the heap keeps every step's freed tensors (memory.py)
        update_seconds = time.perf_counter() - update_started

        self.train_seconds += time.perf_counter() - started
        metrics = {
            "step": self.step,
            **step_metrics(episodes, transitions, group_stats, sorted(self.train_agents)),
            "dropped_groups": len(failed_groups),
            "stale_transitions": stale,
            "lr": self.learner.scheduler.get_last_lr()[0],
            "rollout_seconds": rollout_seconds,
            "update_seconds": update_seconds,
            "train_tokens_per_second": (
                sum(len(t.response_token_ids) for t in transitions) / update_seconds
                if update_seconds
                else 0.0
            ),
            "skipped_updates": self.learner.skipped_updates,
            "train_seconds": self.train_seconds,
            # the process's memory: a run that grows step by step shows it here before it dies
            "rss_mib": rss_mib(),
            "peak_rss_mib": peak_rss_mib(),
            **update,
        }
        if self.task_sampler is not None:  # the drawn pools' mean p (1 - p): 0.25 at most
            metrics["task_learnability"] = learnability
        return metrics

    def update(self, transitions: list[Transition]) -> dict[str, float]:
        """Optimise each policy on its agents' transitions (and, with ``replay_demos``, on
        ``replay_calls`` of its demonstration calls, drawn for the step); return the loss
        statistics (``update.Learner.update``)."""
        cfg = self.config
        grouped = by_policy(transitions, self.policy_of)
        # seeded by the step: a resumed run draws the same
        rng = np.random.default_rng([cfg.seed, self.step])
        replayed = {
            name: [calls[i] for i in sorted(rng.permutation(len(calls))[: cfg.replay_calls])]
            for name, calls in self.replay.items()
            if name in grouped
        }
        return self.learner.update(grouped, replayed)

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
            total=self.expected_steps(),
            initial=self.step,
            desc="lightningrl",
            unit="step",
            disable=not cfg.progress,
        )
        try:
            if cfg.eval_every and self.step == 0:
                self.logs.log({"step": 0, **self.evaluate()})
            while self.step < cfg.steps and not self.out_of_time():
                metrics = self.train_step()
                last = self.step >= cfg.steps or self.out_of_time()
                if cfg.eval_every and (self.step % cfg.eval_every == 0 or last):
                    metrics.update(self.evaluate())  # and always after the last step
                self.logs.log(metrics)
                history.append(metrics)
                bar.total = self.expected_steps()  # (a time limit's estimate, refined each step)
                bar.update(1)
                bar.set_postfix(reward=f"{metrics['reward']:.3f}", score=f"{metrics['score']:.3f}")
                if cfg.save_every and self.step % cfg.save_every == 0:
                    self.save()
            if self.saved_step != self.step:
                self.save()  # the last step, unless save_every just saved it
        finally:
            bar.close()
            self.logs.close()
        return history

    def expected_steps(self) -> int | None:
        """Return the step the run will end at: ``config.steps``, or with ``max_train_minutes``
        the steps its time holds at the mean step time so far (None before the first step: not
        known yet), whichever comes first."""
        limit = self.config.max_train_minutes
        if limit is None:
            return self.config.steps
        if self.step == 0:
            return None
        left = max(0.0, 60 * limit - self.train_seconds)
        more = math.ceil(left / (self.train_seconds / self.step)) if self.train_seconds else 0
        return min(self.config.steps, self.step + more)

    def out_of_time(self) -> bool:
        """Return whether the training time has passed ``config.max_train_minutes``."""
        limit = self.config.max_train_minutes
        return limit is not None and self.train_seconds >= 60 * limit

    # --- checkpoints -----------------------------------------------------------------------

    def save(self) -> Path:
        """Write a checkpoint of the current step (atomically); return its folder."""
        self.saved_step = self.step
        state = {
            "step": self.step,
            "policy_names": self.weights.names,
            "train_seconds": self.train_seconds,
            **self.learner.state_dict(),  # optimizer, scheduler, skipped_updates
            "task_rng": self.task_rng.bit_generator.state,
            "task_pools": self.task_sampler.state_dict() if self.task_sampler else None,
            "sampling_generators": self.sampling.generator_states(),
            "torch_rng": torch.get_rng_state(),
            "numpy_rng": np.random.get_state(),
            "python_rng": random.getstate(),
        }
        return save_checkpoint(
            self.checkpoint_dir, self.step, self.weights.state_dict(), state, self.config.to_dict()
        )

    def load_weights_from(self, init_from: str | Path | dict[str, str]) -> list[Path]:
        """Start from the trained weights of another run's latest checkpoint (a warm start), or
        each policy's from a run of its own (``init_from``: policy name -> run folder); return
        the checkpoints' folders. Optimiser state, step and RNGs stay this run's own."""
        folders = self.weights.load_from(init_from, self.config)
        if self.config.kl_coef:
            # The KL holds each policy near where this run starts, the warm start, not near the
            # untrained base; a resumed run loads init_from first too, so its reference stays
            # the warm start.
            self.weights.anchor_references()
        self.sampling.sync(self.weights.names, self.step)
        if self.config.frozen_policy is not None:  # the agents that do not learn act with it
            self.sampling.load_frozen(self.weights.merged(self.config.frozen_policy), self.step)
        return folders

    def resume(self) -> bool:
        """Continue from the newest checkpoint in ``output_dir``; return whether there was one.

        Raises:
            RunFolderError: the folder holds trained steps but no checkpoint to continue from.
        """
        self.resume_asked = True
        check_run_folder(self.output_dir, resume=True)
        folder = latest_checkpoint(self.checkpoint_dir)
        if folder is None:  # nothing trained yet: the step-0 evaluation logged is done again
            self.logs.cut_after(None)
            return False
        weights, state = load_checkpoint(folder)
        if state.get("policy_names", self.weights.names) != self.weights.names:
            raise ValueError(
                f"the checkpoint in {folder} trained policies {state['policy_names']}, this run "
                f"has {self.weights.names}: resume with the same train_agents and policy_map"
            )
        self.weights.load_state_dict(weights)
        self.learner.load_state_dict(state)
        self.step = self.saved_step = state["step"]
        self.train_seconds = state.get("train_seconds", 0.0)
        self.task_rng.bit_generator.state = state["task_rng"]
        if self.task_sampler is not None and state.get("task_pools"):
            self.task_sampler.load_state_dict(state["task_pools"])
        self.sampling.sync(self.weights.names, self.step)
        generators = state.get("sampling_generators") or {}
        if "here" not in generators:  # (checkpoints before the samplers kept workers' states)
            generators = {
                "here": generators or {self.weights.names[0]: state.get("sampling_generator")}
            }
        self.sampling.set_generator_states(generators)
        torch.set_rng_state(state["torch_rng"])
        np.random.set_state(state["numpy_rng"])
        random.setstate(state["python_rng"])
        self.logs.cut_after(self.step)  # (logged after the checkpoint: work now redone)
        return True


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
