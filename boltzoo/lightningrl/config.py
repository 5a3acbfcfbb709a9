"""TrainerConfig and SFTConfig: the one source of truth of a LightningRL run and of a warm start
(TRL's habit: one dataclass per trainer, its fields' help text in their metadata). What the two
share is one base, RunConfig, with one default each: the CPU's fast path (a LoRA adapter r=16,
rollouts and evaluations sampled from a bf16 copy). Saved with every run and printed at its
start; the command line's flags are derived from their fields.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from boltzoo.errors import ConfigError


def _help(text: str, **kwargs: Any) -> Any:
    return field(metadata={"help": text}, **kwargs)


# The allowed values of the choice fields the learner's code looks up (one list each: the code's
# tables are made from these, and the command line's choices too)
CreditRule = Literal["identical", "discounted", "returns"]
Estimator = Literal["grpo", "rloo", "reinforce++"]
GroupBy = Literal["task", "task_agent", "task_agent_turn"]
KLEstimator = Literal["k1", "k2", "k3"]
Aggregation = Literal["token", "sequence", "episode"]
# the framework adapters, and the bundled graphs that play a whole workflow node by node
Framework = Literal["autogen", "openai-agents", "langgraph", "langgraph-sql-graph"]


def choices(config_class: type) -> dict[str, tuple[Any, ...]]:
    """Return the allowed values of every field of ``config_class`` typed as a ``Literal``
    (with None when the field is optional): the one list the config, its checks and the
    command line's ``choices`` all read."""
    found = {}
    for name, hint in get_type_hints(config_class).items():
        args = get_args(hint)
        if get_origin(hint) is Literal:
            found[name] = args
        elif any(get_origin(a) is Literal for a in args):  # Literal[...] | None
            literal = next(a for a in args if get_origin(a) is Literal)
            found[name] = (None, *get_args(literal)) if type(None) in args else get_args(literal)
    return found


# (low, high, whether low itself is allowed): a value out of its range, or NaN, fails at
# construction; None passes where a field may be None.
_RANGES: dict[str, tuple[float, float, bool]] = {
    "lr": (0.0, math.inf, False),
    "weight_decay": (0.0, math.inf, True),
    "warmup_steps": (0, math.inf, True),
    "max_grad_norm": (0.0, math.inf, False),
    "temperature": (0.0, math.inf, False),
    "top_p": (0.0, 1.0, False),
    "gamma": (0.0, 1.0, True),
    "clip_eps": (0.0, math.inf, False),
    "clip_eps_high": (0.0, math.inf, False),
    "dual_clip": (1.0, math.inf, False),
    "kl_coef": (0.0, math.inf, True),
    "entropy_coef": (0.0, math.inf, True),
    "replay_coef": (0.0, math.inf, True),
    "eval_every": (0, math.inf, True),
    "eval_tasks": (0, math.inf, True),
    "save_every": (0, math.inf, True),
    "samples_per_step": (0, math.inf, True),
    "max_train_minutes": (0.0, math.inf, False),
    "episode_timeout_s": (0.0, math.inf, False),
    "micro_batch_tokens": (1, math.inf, True),
    "max_prompt_tokens": (1, math.inf, True),
    "lora_alpha": (0.0, math.inf, False),
    "lora_dropout": (0.0, 1.0, True),
    "epochs": (1, math.inf, True),
    "batch_size": (1, math.inf, True),
}


# The fields by what they are about, the ones a user needs first: how --help and the docs
# show them (a field in no group is shown under "other").
FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "the run": (
        "env", "env_kwargs", "eval_env_kwargs", "model", "train_agents", "demos",
        "only_successful", "init_from", "output_dir", "seed", "steps", "epochs",
        "max_train_minutes", "lr",
    ),
    "sampling": (
        "tasks_per_step", "group_size", "batch_size", "max_new_tokens", "temperature", "top_p",
        "episode_timeout_s", "sampler", "sampler_precision", "sampler_kwargs",
        "max_prompt_tokens",
    ),
    "who plays (frameworks, agent programs, several policies)": (
        "policy_map", "frozen_policy", "framework", "agent_command", "agent_service",
        "agent_roles", "agent_concurrency", "agent_timeout_s",
    ),
    "weights (LoRA)": ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules"),
    "algorithm": (
        "credit", "gamma", "estimator", "group_by", "normalize_std", "per_episode_advantage",
        "clip_eps", "clip_eps_high", "dual_clip", "kl_coef", "kl_estimator", "entropy_coef",
        "aggregation", "epochs_per_step", "weight_decay", "warmup_steps", "lr_schedule",
        "max_grad_norm",
    ),
    "replay and curriculum": (
        "replay_demos", "replay_coef", "replay_calls", "task_sampling", "task_pool_field",
        "task_pool_decay",
    ),
    "evaluation, checkpoints and logs": (
        "eval_every", "eval_tasks", "save_every", "samples_per_step", "progress", "tensorboard",
    ),
    "systems": (
        "rollout_workers", "ray_address", "device", "precision", "micro_batch_tokens",
        "pack_calls", "share_prompts",
    ),
}  # fmt: skip


def grouped_fields(config_class: type) -> list[tuple[str, list[dataclasses.Field]]]:
    """Return ``config_class``'s fields in :data:`FIELD_GROUPS`' groups and order, the fields in
    no group under ``"other"``, empty groups left out: how ``--help`` and the docs show them."""
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    groups = [(title, [fields[n] for n in names if n in fields])
              for title, names in FIELD_GROUPS.items()]  # fmt: skip
    placed = {f.name for _, group in groups for f in group}
    groups.append(("other", [f for name, f in fields.items() if name not in placed]))
    return [(title, group) for title, group in groups if group]


# A setting that does nothing unless another says so: (when it acts, in words, the test).
_INERT_UNLESS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "gamma": ("credit='discounted'", lambda c: c.credit == "discounted"),
    "normalize_std": ("estimator='grpo'", lambda c: c.estimator == "grpo"),
    "kl_estimator": ("kl_coef > 0", lambda c: c.kl_coef > 0),
    "sampler_precision": ("sampler='copy' or 'vllm'", lambda c: c.sampler != "shared"),
    "sampler_kwargs": ("sampler='vllm'", lambda c: c.sampler == "vllm"),
    "task_pool_field": ("task_sampling='learnability'", lambda c: c.task_sampling != "uniform"),
    "task_pool_decay": ("task_sampling='learnability'", lambda c: c.task_sampling != "uniform"),
    "replay_coef": ("replay_demos", lambda c: bool(c.replay_demos)),
    "replay_calls": ("replay_demos", lambda c: bool(c.replay_demos)),
    "lora_alpha": ("lora_r > 0", lambda c: c.lora_r > 0),
    "lora_dropout": ("lora_r > 0", lambda c: c.lora_r > 0),
    "lora_target_modules": ("lora_r > 0", lambda c: c.lora_r > 0),
    "ray_address": ("rollout_workers > 0", lambda c: c.rollout_workers > 0),
    "agent_roles": ("an agent program", lambda c: bool(c.agent_command or c.agent_service)),
}
_WARNED: set[str] = set()


def warn_inert_settings(config: Any) -> list[str]:
    """Warn (once a process for each) about settings changed from their defaults that do
    nothing with the rest of ``config``; return what they say."""
    fields = {f.name: f for f in dataclasses.fields(config)}
    said = []
    for name, (when, acts) in _INERT_UNLESS.items():
        spec = fields.get(name)
        if spec is None:
            continue
        default = spec.default_factory() if spec.default is dataclasses.MISSING else spec.default
        if getattr(config, name) == default or acts(config):
            continue
        message = f"{name}={getattr(config, name)!r} does nothing unless {when}"
        said.append(message)
        if message not in _WARNED:
            _WARNED.add(message)
            warnings.warn(message, UserWarning, stacklevel=4)
    return said


def check_ranges(config: Any, ranges: dict[str, tuple[float, float, bool]]) -> None:
    """Raise ConfigError for the first field of ``config`` outside its range in ``ranges``.

    A field must be a number (not a bool, not text), finite where its range is, and within
    ``[low, high]`` (``(low, high]`` where ``low`` itself is not allowed); None passes.
    """
    for name, (low, high, low_allowed) in ranges.items():
        value = getattr(config, name, None)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        above = value >= low if low_allowed else value > low
        if not (above and value <= high):  # (NaN fails both)
            bound = f"{'at least' if low_allowed else 'above'} {low:g}"
            bound += f" and at most {high:g}" if high < math.inf else ""
            raise ConfigError(f"{name} must be {bound}, got {value!r}")


def _load(cls: type, path: str | Path, overrides: dict[str, Any]) -> Any:
    """A config of ``cls`` saved as JSON at ``path`` (fields it does not know left out), with
    ``overrides`` on top."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path}: a saved config cannot be read: {error}") from None
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known} | overrides)


@dataclass
class RunConfig:
    """What a warm start (:class:`SFTConfig`) and an RL run (:class:`TrainerConfig`) share: the
    env, the model and its LoRA adapters, who plays, the optimiser, where evaluation samples,
    the run folder. One definition and one default each; the defaults are the CPU's fast path
    (a LoRA adapter r=16, sampling from a bf16 copy)."""

    env: str = _help("env id, e.g. math-v0", default="math-v0")
    env_kwargs: dict[str, Any] = _help(
        "keyword arguments of the training env (JSON on the command line)", default_factory=dict
    )
    eval_env_kwargs: dict[str, Any] = _help(
        "overrides for the evaluation env (default: split=test)",
        default_factory=lambda: {"split": "test"},
    )
    model: str = _help("smollm2-135m or a local transformers folder", default="smollm2-135m")
    train_agents: list[str] | str | None = _help(
        "agents that learn: names, or a regex (default: every agent); the others act with a "
        "frozen copy of the initial model",
        default=None,
    )
    policy_map: dict[str, str] = _help(
        "agent -> policy name: trained agents with the same name share weights, each name has "
        "its own (a LoRA adapter with lora_r > 0, else a full copy of the model); default: "
        "every trained agent shares one policy named 'policy' (JSON on the command line)",
        default_factory=dict,
    )
    framework: Framework | None = _help(
        "autogen | openai-agents | langgraph: the trained agents act as agents of that "
        "framework (the bundled example agents, or your own via "
        "Trainer(agent_builders=...)), calling the model through a gateway over the sampler; "
        "LightningRL learns from the calls it recorded. langgraph-sql-graph: sql-v0 "
        "(agents=['writer']) is played by the paper's SQL agent, one LangGraph graph whose "
        "nodes writer, checker and rewriter are the agents that train_agents selects",
        default=None,
    )
    agent_command: str | None = _help(
        "a command line that plays the env's agents as a program of its own, run once per "
        "turn (any language; its model calls go through the gateway to the sampler, with "
        "OPENAI_BASE_URL / ANTHROPIC_BASE_URL, BOLTZOO_TASK and BOLTZOO_ROLLOUT_URL in its "
        "environment: boltzoo/agents/programs.py); LightningRL learns from the calls it made",
        default=None,
    )
    agent_roles: list[str] = _help(
        "names an agent program calls the model as besides the env's agents "
        "($BOLTZOO_AGENTS_URL/NAME/v1); train_agents and policy_map select and map them",
        default_factory=list,
    )
    agent_concurrency: int = _help("agent programs running at once", default=16)
    agent_timeout_s: float = _help(
        "an agent program's turn running longer is killed and its episode fails", default=120.0
    )
    lora_r: int = _help(
        "LoRA rank; 0 trains the full weights, > 0 one LoRA adapter (peft) per policy name on "
        "one shared, frozen base",
        default=16,
    )
    lora_alpha: float = _help("LoRA scaling alpha (the update is alpha / r * B A)", default=32.0)
    lora_dropout: float = _help("LoRA dropout", default=0.0)
    lora_target_modules: list[str] | str = _help(
        "modules that get LoRA: a list of names, or 'all-linear' (peft)", default="all-linear"
    )
    init_from: str | dict[str, str] | None = _help(
        "a run folder (a warm start by boltzoo sft, or an RL run) whose latest checkpoint's "
        "weights this run starts from (same model, lora_* settings and policy names); or policy "
        "name -> run folder (JSON): each policy starts from its folder's weights, that run's "
        "only policy or its policy of the same name (e.g. one adapter per graph node, each "
        "warm-started on its own demonstrations)",
        default=None,
    )
    output_dir: str = _help("where checkpoints, metrics and plots go", default="runs/lightningrl")
    seed: int = _help("seeds task sampling, sampling and initialisation", default=0)
    max_new_tokens: int = _help("new tokens per LLM call", default=64)
    sampler: Literal["shared", "copy", "vllm"] = _help(
        "shared: rollouts sample with the learner's own weights; copy: with a separate copy in "
        "sampler_precision, synced after every update; vllm: with a vLLM engine per policy, "
        "synced by load_weights (boltzoo[vllm])",
        default="copy",
    )
    sampler_precision: Literal["fp32", "bf16"] = _help(
        "fp32 | bf16: the dtype of the sampling copy (sampler=copy or vllm; bf16 sampled 2.5 "
        "times as fast as fp32 on a 2-core CPU with AVX-512; a copy is fp32 where the device "
        "has no native bf16)",
        default="bf16",
    )
    lr: float = _help(
        "AdamW learning rate (for a LoRA adapter; full weights want ~1e-5)", default=1e-4
    )
    weight_decay: float = _help("AdamW weight decay", default=0.0)
    max_grad_norm: float = _help("gradient clipping", default=1.0)
    micro_batch_tokens: int | None = _help(
        "tokens per micro-batch (sequences bucketed by length; gradients accumulate); default: "
        "1024 on the CPU (the fastest there, and 8k tokens' activations took 16 GB: "
        "BENCHMARKS.md), 8192 on a GPU",
        default=None,
    )
    eval_tasks: int = _help(
        "held-out tasks per evaluation, spread evenly over the split (greedy decoding)", default=64
    )
    save_every: int = _help("checkpoint every K steps (and always at the end)", default=10)
    device: str | None = _help("cpu, cuda, ... (default: cuda when there is one)", default=None)
    precision: Literal["fp32", "bf16"] = _help(
        "fp32 | bf16 (bf16 autocast where the device runs bf16 natively: a GPU with bf16, a "
        "CPU with AVX-512 or AMX; fp32 elsewhere)",
        default="fp32",
    )
    progress: bool = _help("show progress bars", default=True)


@dataclass
class TrainerConfig(RunConfig):
    """Everything a LightningRL run needs (:class:`RunConfig`'s fields, then RL's own); see
    each field's help."""

    agent_service: str | None = _help(
        "host:port where agent services claim the env's turns (POST /rollouts/claim), instead "
        "of a command run per turn; a host beyond 127.0.0.1 needs BOLTZOO_API_KEY set, which "
        "services then send",
        default=None,
    )

    frozen_policy: str | None = _help(
        "a policy whose weights as init_from loaded them the agents that do not learn act "
        "with, frozen (a warm-started checker beside a writer that learns); None: they act "
        "with the untrained base model. Needs sampler copy or vllm",
        default=None,
    )

    # --- rollouts
    steps: int = _help("training steps (a larger value extends a resumed run)", default=100)
    max_train_minutes: float | None = _help(
        "stop after the step that takes the training time (rollouts and updates, not "
        "evaluations or checkpoints) past this many minutes; None: run all steps",
        default=None,
    )
    tasks_per_step: int = _help("tasks sampled per step", default=8)
    task_sampling: Literal["uniform", "learnability"] = _help(
        "uniform: every task alike; learnability: tasks in proportion to their pool's estimated "
        "reward variance p (1 - p), from the run's own episodes (curriculum.py)",
        default="uniform",
    )
    task_pool_field: str | None = _help(
        "learnability: the task field whose values pool tasks' outcomes (template, level, "
        "db_id; None: each task alone)",
        default=None,
    )
    task_pool_decay: float = _help(
        "learnability: old outcome counts are multiplied by this each step", default=0.9
    )
    group_size: int = _help("rollouts of each task per step (GRPO groups)", default=4)
    temperature: float = _help("sampling temperature of rollouts", default=1.0)
    top_p: float = _help("nucleus sampling of rollouts", default=1.0)
    episode_timeout_s: float | None = _help("an episode running longer fails", default=None)
    sampler_kwargs: dict[str, Any] = _help(
        'extra keyword arguments of the vLLM engine, e.g. {"gpu_memory_utilization": 0.5}',
        default_factory=dict,
    )
    max_prompt_tokens: int | None = _help(
        "a longer prompt fails its episode, which is dropped with its group", default=None
    )
    rollout_workers: int = _help(
        "0: rollouts run in this process; N: on N Ray actors (boltzoo[ray]), each with its own "
        "envs and sampling copy (sampler shared becomes copy), the weights broadcast through "
        "Ray's object store after every update",
        default=0,
    )
    ray_address: str | None = _help(
        "the Ray cluster of the rollout workers: auto or host:port joins one; none starts a "
        "local Ray on 127.0.0.1",
        default=None,
    )

    # --- credit and advantages
    credit: CreditRule = _help("identical | discounted | returns", default="identical")
    gamma: float = _help("discount of the discounted credit", default=1.0)
    estimator: Estimator = _help("grpo | rloo | reinforce++", default="grpo")
    group_by: GroupBy = _help("task | task_agent | task_agent_turn", default="task")
    normalize_std: bool = _help("GRPO: divide by the group's std", default=True)
    per_episode_advantage: bool = _help("one advantage per episode and agent", default=False)

    # --- loss
    clip_eps: float = _help("PPO clip range", default=0.2)
    clip_eps_high: float | None = _help("upper clip range (default: clip_eps)", default=None)
    dual_clip: float | None = _help("dual-clip constant for negative advantages", default=3.0)
    kl_coef: float = _help(
        "weight of the KL to the starting weights: the warm start with init_from, else the "
        "initial model (0: off)",
        default=0.0,
    )
    kl_estimator: KLEstimator = _help("k1 | k2 | k3", default="k3")
    entropy_coef: float = _help("weight of the entropy bonus (0: off)", default=0.0)
    aggregation: Aggregation = _help(
        "token | sequence | episode: the loss is the mean over tokens, over sequences (each its "
        "tokens' mean), or over episodes (each its sequences' mean), per policy",
        default="token",
    )
    replay_demos: list[str] | str = _help(
        "demonstrations replayed in every update (Episode JSONL files, as boltzoo sft reads "
        "them): each policy's loss adds replay_coef times the cross-entropy of replay_calls of "
        "its agents' demonstrated calls, drawn anew each step, so that RL keeps what the warm "
        "start taught (InstructGPT's PPO-ptx with demonstrations)",
        default_factory=list,
    )
    replay_coef: float = _help("weight of the replayed demonstrations' cross-entropy", default=1.0)
    replay_calls: int = _help("demonstration calls per policy in each update", default=8)
    epochs_per_step: int = _help("optimisation passes over each step's transitions", default=1)
    pack_calls: bool = _help(
        "consecutive calls of one agent in an episode whose token ids continue each other "
        "(prompt 2 = prompt 1 + response 1 + tool output) are one sequence in the learner: one "
        "forward pass, each call's tokens with its own advantage (token and sequence aggregation)",
        default=True,
    )
    share_prompts: bool = _help(
        "sequences that start with the same prompt (a group's samples) share one forward pass "
        "over it in the learner, its KV cache copied to each (token and sequence aggregation)",
        default=True,
    )

    # --- optimiser
    warmup_steps: int = _help("linear warm-up steps", default=0)
    lr_schedule: Literal["constant", "cosine", "linear"] = _help(
        "constant | cosine | linear (after warm-up)", default="constant"
    )

    # --- evaluation, checkpoints, hardware
    eval_every: int = _help("evaluate every K steps (0: never)", default=0)
    tensorboard: bool = _help(
        "also write the metrics for TensorBoard (output_dir/tensorboard; boltzoo[train])",
        default=False,
    )
    samples_per_step: int = _help(
        "LLM calls of each step written to output_dir/samples.jsonl, spread over its episodes: "
        "prompt (its end), response, reward, advantage (0: none)",
        default=8,
    )

    def __post_init__(self) -> None:
        if isinstance(self.replay_demos, str):
            self.replay_demos = [self.replay_demos]
        for name, allowed in choices(type(self)).items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name}={getattr(self, name)!r}; choose one of {allowed}")
        if self.sampler == "vllm" and self.top_p < 1:
            raise ConfigError(
                f"sampler='vllm' with top_p={self.top_p}: vLLM reports logprobs after top-p "
                "truncation, the learner's ratios need them before it; use top_p=1 with vllm, "
                "or the copy sampler"
            )
        if self.rollout_workers < 0:
            raise ConfigError(f"rollout_workers must be 0 or more, got {self.rollout_workers}")
        if self.frozen_policy is not None and self.sampler == "shared":
            raise ConfigError(
                "frozen_policy needs a sampler of its own for the agents that do not learn: "
                "sampler='copy' or 'vllm' (the shared sampler reads the learner's base weights)"
            )
        for name in (
            "steps",
            "tasks_per_step",
            "group_size",
            "max_new_tokens",
            "epochs_per_step",
            "replay_calls",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0.0 < self.task_pool_decay <= 1.0:
            raise ConfigError(f"task_pool_decay must be in (0, 1], got {self.task_pool_decay}")
        if self.lora_r < 0:
            raise ConfigError(f"lora_r must be 0 (full weights) or a rank > 0, got {self.lora_r}")
        if not isinstance(self.policy_map, dict):
            raise ConfigError(f"policy_map maps agents to policy names, got {self.policy_map!r}")
        if isinstance(self.init_from, dict) and not (
            self.init_from
            and all(isinstance(k, str) and isinstance(v, str) for k, v in self.init_from.items())
        ):
            raise ConfigError(f"init_from maps policy names to run folders, got {self.init_from!r}")
        if self.agent_command is not None and self.agent_service is not None:
            raise ConfigError("an agent program is a command or a service: give one of them")
        program = self.agent_command or self.agent_service
        if self.agent_command is not None and not (
            isinstance(self.agent_command, str) and self.agent_command.strip()
        ):
            raise ConfigError(f"agent_command must be a command line: {self.agent_command!r}")
        if program is not None and self.framework is not None:
            raise ConfigError(
                "framework and an agent program both say who plays the agents: give one of them"
            )
        if self.agent_roles and program is None:
            raise ConfigError(
                "agent_roles names the roles of an agent program: give agent_command or "
                "agent_service"
            )
        if self.agent_concurrency < 1:
            raise ConfigError(f"agent_concurrency must be at least 1, got {self.agent_concurrency}")
        if not self.agent_timeout_s > 0:
            raise ConfigError(f"agent_timeout_s must be positive, got {self.agent_timeout_s}")
        check_ranges(self, _RANGES)
        warn_inert_settings(self)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as plain JSON values."""
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        """Write the config as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> TrainerConfig:
        """Return the config saved at ``path``, with ``overrides`` applied."""
        return _load(cls, path, overrides)


@dataclass
class SFTConfig(RunConfig):
    """Everything a warm-start run needs (:class:`RunConfig`'s fields, then the warm start's
    own); see each field's help."""

    demos: list[str] | str = _help(
        "the demonstrations: one or more Episode JSONL files (boltzoo rollout --out)",
        default_factory=list,
    )
    only_successful: bool = _help(
        "learn only from successful episodes (expert iteration on the model's own episodes)",
        default=False,
    )
    epochs: int = _help("passes over the demonstrations", default=2)
    batch_size: int = _help("LLM calls per optimizer step", default=4)
    # (the shared fields whose default or meaning differ in a warm start)
    lr: float = _help("AdamW learning rate", default=5e-4)
    output_dir: str = _help("where checkpoints and metrics go", default="runs/sft")
    save_every: int = _help(
        "checkpoint every K optimizer steps, and after every epoch (a killed run resumes from "
        "its last: boltzoo sft --resume; 0: after every epoch only)",
        default=25,
    )
    eval_tasks: int = _help(
        "held-out tasks evaluated before and after (greedy; 0: no evaluation)", default=64
    )

    def __post_init__(self) -> None:
        if isinstance(self.demos, str):
            self.demos = [self.demos]
        check_ranges(self, _RANGES)
        self.trainer_config()  # its checks (choices, lora_r) apply to these fields too

    @classmethod
    def load(cls, path: str | Path, **overrides: Any) -> SFTConfig:
        """Return the config saved at ``path``, with ``overrides`` applied."""
        return _load(cls, path, overrides)

    def trainer_config(self) -> TrainerConfig:
        """Return the RL config that holds this run's weights, evaluation and checkpoints."""
        ours = {f.name for f in dataclasses.fields(self)}
        shared = ours & {f.name for f in dataclasses.fields(TrainerConfig)} - {"save_every"}
        # SFTTrainer runs its own loop: it evaluates and saves by this config, not by RL's.
        return TrainerConfig(**{name: getattr(self, name) for name in shared}, save_every=0)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as plain JSON values."""
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        """Write the config as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")
