"""What a run writes besides its checkpoints: ``metrics.jsonl``, ``samples.jsonl`` and
TensorBoard events.

``metrics.jsonl`` holds one JSON object per training step and per held-out evaluation (``step``
first); ``samples.jsonl`` some of each step's LLM calls as the model wrote them, with the credit
they got (TRL's ``log_completions``). A resumed run cuts both back to its checkpoint's step: what
was logged after it belongs to work that is done again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
