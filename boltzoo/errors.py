"""Every exception boltzoo raises on purpose, in one place.

Messages say what was wrong (the offending value cut to a readable length, see :func:`shorten`)
and what to do about it. Mistakes an *agent* makes inside an env (bad SQL, a bad calculator call)
are not exceptions: they come back as observations, and are counted in ``infos``.
"""

from __future__ import annotations


def shorten(value: object, limit: int = 80) -> str:
    """Return ``repr(value)`` cut to about ``limit`` characters, for error messages."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 15]}...({len(text)} chars)"


class BoltzooError(Exception):
    """Base class of boltzoo's exceptions."""


class UnknownEnvError(BoltzooError, KeyError):
    """An env id that is not registered."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


class UnknownAgentError(BoltzooError, ValueError):
    """An agent name the env (or the chosen workflow variant) does not have."""


class InvalidActionError(BoltzooError, TypeError):
    """An action that is not text (a ``str`` or a :class:`~boltzoo.episode.Completion`)."""


class EpisodeEndedError(BoltzooError, RuntimeError):
    """A step with a real action after the episode ended (``None`` dead steps are fine)."""


class DatasetError(BoltzooError, ValueError):
    """A data set that cannot be loaded: a bad split, a missing file, a malformed row."""


class PromptTooLongError(BoltzooError, ValueError):
    """A prompt longer than the policy's ``max_prompt_tokens`` (its episode fails, alone; the
    gateway answers 400 ``context_length_exceeded``)."""


class MissingDependencyError(BoltzooError, ImportError):
    """An optional package is not installed; the message names the install command."""


class ConfigError(BoltzooError, ValueError):
    """A setting that cannot work: a value out of its range, settings that contradict each
    other, a malformed value on the command line."""


class ModelNotFoundError(BoltzooError, FileNotFoundError):
    """A model name that is neither a bundled model nor a local transformers folder."""


class RunFolderError(BoltzooError, OSError):
    """A run folder that cannot serve: it holds an earlier run, or lacks the checkpoint asked
    for, or its weights do not fit this run's model and adapters."""


class AgentProgramError(BoltzooError, RuntimeError):
    """An agent program's turn that failed: it crashed, exited non-zero, ran past its timeout,
    went silent, or gave no answer. A policy returns it in place of that turn's action; the
    rollout marks the episode failed (dropped with its group in training, never scored 0)."""


class AgentRewardError(BoltzooError, ValueError):
    """An agent-reported reward the env cannot take: not a finite number, or an env that judges
    its own tasks."""
