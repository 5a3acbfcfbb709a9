"""What a run writes besides its checkpoints: ``metrics.jsonl``, ``samples.jsonl`` and
TensorBoard events; and what a training step's episodes say (``step_metrics``).

``metrics.jsonl`` holds one JSON object per training step and per held-out evaluation (``step``
first); ``samples.jsonl`` some of each step's LLM calls as the model wrote them, with the credit
they got (TRL's ``log_completions``). A resumed run cuts both back to its checkpoint's step: what
was logged after it belongs to work that is done again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from boltzoo.errors import MissingDependencyError
from boltzoo.lightningrl.transitions import Transition


class RunLog:
    """The logs of the run in ``output_dir``.

    Args:
        output_dir: the run folder.
        tensorboard: also write TensorBoard events (``<output_dir>/tensorboard``).
        samples_per_step: LLM calls written to ``samples.jsonl`` a step (0: none).
        tokenizer: decodes the samples' tokens.
    """

    def __init__(
        self, output_dir: Path, *, tensorboard: bool, samples_per_step: int, tokenizer: Any
    ) -> None:
        self.output_dir = Path(output_dir)
        self.metrics_path = self.output_dir / "metrics.jsonl"
        self.samples_path = self.output_dir / "samples.jsonl"
        self.tensorboard, self.samples_per_step = tensorboard, samples_per_step
        self.tokenizer = tokenizer
        self._writer: Any = None

    def log(self, metrics: dict[str, Any]) -> None:
        """Append ``metrics`` (with its ``step``) to ``metrics.jsonl`` and TensorBoard."""
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(metrics) + "\n")
        if not self.tensorboard:
            return
        if self._writer is None:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise MissingDependencyError(
                    "tensorboard=True needs tensorboard: pip install 'boltzoo[train]'"
                ) from None
            self._writer = SummaryWriter(str(self.output_dir / "tensorboard"))
        for key, value in metrics.items():
            if key != "step" and isinstance(value, (int, float)):
                self._writer.add_scalar(key, value, metrics["step"])
        self._writer.flush()

    def write_samples(self, step: int, transitions: list[Transition]) -> None:
        """Append ``samples_per_step`` of step ``step``'s LLM calls to ``samples.jsonl``, spread
        over its episodes: the prompt's end (the latest message), the response as sampled, its
        reward and advantage."""
        count = self.samples_per_step
        if not count or not transitions:
            return
        chosen = transitions[:: max(1, len(transitions) // count)][:count]
        decode = self.tokenizer.decode
        with self.samples_path.open("a") as f:
            for t in chosen:
                row = {
                    "step": step,
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

    def cut_after(self, step: int | None) -> None:
        """Drop what was logged after ``step`` (None: everything)."""
        for path in (self.metrics_path, self.samples_path):
            if step is None:
                path.unlink(missing_ok=True)
            elif path.exists():
                lines = path.read_text().splitlines()
                kept = [line for line in lines if json.loads(line)["step"] <= step]
                path.write_text("".join(line + "\n" for line in kept))

    def close(self) -> None:
        """Close the TensorBoard writer (a later :meth:`log` opens it again)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def step_metrics(
    episodes: list[Any], transitions: list[Transition], group_stats: Any, train_agents: list[str]
) -> dict[str, Any]:
    """Return what a step's episodes and credited calls say: reward, score and success, the
    advantages and their groups, tool use, and each trained agent's reward (with several)."""
    ok = [e for e in episodes if not e.failed]
    advantages = [t.advantage for t in transitions]
    metrics = {
        "reward": float(np.mean([t.reward for t in transitions])) if transitions else 0.0,
        "score": float(np.mean([e.score or 0.0 for e in ok])) if ok else 0.0,
        "success_rate": float(np.mean([bool(e.success) for e in ok])) if ok else 0.0,
        "episodes": len(episodes),
        "failed_episodes": len(episodes) - len(ok),
        "transitions": len(transitions),
        "advantage_mean": float(np.mean(advantages)) if advantages else 0.0,
        "advantage_std": float(np.std(advantages)) if advantages else 0.0,
        "group_size_mean": group_stats.mean_size if group_stats else 0.0,
        "singleton_groups": group_stats.singletons if group_stats else 0,
        # the share of groups that teach nothing: all right or all wrong
        "frac_reward_zero_std": group_stats.zero_std / group_stats.groups if group_stats else 0.0,
    }
    tool_counts = [e.steps[-1].info.get("tool_calls") for e in ok if e.steps]
    if any(count is not None for count in tool_counts):  # envs whose infos count tool calls
        metrics["tool_use_rate"] = float(np.mean([bool(count) for count in tool_counts]))
    if len(train_agents) > 1:  # who learns how fast, agent by agent
        for agent in train_agents:
            rewards = [t.reward for t in transitions if t.agent == agent]
            metrics[f"reward/{agent}"] = float(np.mean(rewards)) if rewards else 0.0
    return metrics
