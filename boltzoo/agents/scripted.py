"""Scripted policies: an oracle that knows the gold answer, a naive baseline, and replays.

The oracle and the naive baseline ask the env (``turn.env``, the unwrapped env) for the action,
through the env's ``oracle_action(agent)`` / ``naive_action(agent)``: the oracle reads the current
task's gold data there, never from observations. They are for tests, sanity checks and
baselines.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from boltzoo.agents.base import Turn, encode_observation
from boltzoo.episode import Completion


class _EnvScriptedPolicy:
    method = ""

    def act(self, turns: Sequence[Turn]) -> list[str]:
        """Return the env's scripted action for each turn's agent."""
        actions = []
        for turn in turns:
            if turn.env is None:
                raise ValueError(f"{type(self).__name__} needs turn.env, the env that asks")
            actions.append(getattr(turn.env.unwrapped, self.method)(turn.agent))
        return actions

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class OraclePolicy(_EnvScriptedPolicy):
    """Acts as an agent that knows the task's gold answer (scores 1.0 on every task)."""

    method = "oracle_action"


class NaivePolicy(_EnvScriptedPolicy):
    """Acts as a simple baseline that does not know the answer."""

    method = "naive_action"


SCRIPTED_POLICIES = {"oracle": OraclePolicy, "naive": NaivePolicy}


class ScriptedPolicy:
    """Replays given texts (or a function of the turn) through a real tokenizer.

    A backend for replays and dry runs, and the way tests reach protocol paths (tool calls,
    verdicts) that a tiny random model never writes. Each Completion carries the real prompt
    token ids (the tokenizer's chat template) and the response's token ids (the text encoded,
    then the end-of-sequence token); logprobs are None, as nothing was sampled.

    Args:
        responses: a list of texts, used in order (one per turn; running out is an error), or a
            function ``turn -> text``.
        tokenizer: a transformers tokenizer with a chat template (None: text only, no tokens).
        name: recorded as the Completion's model.
    """

    accepts_prompt_ids = True  # observations may give a raw prompt (see encode_observation)

    def __init__(
        self,
        responses: Sequence[str] | Callable[[Turn], str],
        tokenizer: Any = None,
        *,
        name: str = "scripted",
    ):
        self.responses = responses if callable(responses) else list(responses)
        self._next = 0
        self.tokenizer = tokenizer
        self.name = name
        self.version = 0

    def _text(self, turn: Turn) -> str:
        if callable(self.responses):
            return self.responses(turn)
        if self._next >= len(self.responses):
            raise IndexError(f"ScriptedPolicy ran out of its {len(self.responses)} responses")
        text = self.responses[self._next]
        self._next += 1
        return text

    def act(self, turns: Sequence[Turn]) -> list[Completion]:
        """Return the next scripted text for each turn, with its token ids."""
        completions = []
        for turn in turns:
            text = self._text(turn)
            prompt_ids = response_ids = None
            if self.tokenizer is not None:
                prompt_ids = encode_observation(self.tokenizer, turn.observation)
                response_ids = self.tokenizer.encode(text, add_special_tokens=False)
                if self.tokenizer.eos_token_id is not None:
                    response_ids.append(self.tokenizer.eos_token_id)
                for token in response_ids if turn.stream is not None else ():
                    turn.stream(token, None)
            completions.append(
                Completion(
                    text=text,
                    prompt_token_ids=prompt_ids,
                    response_token_ids=response_ids,
                    model=self.name,
                    policy_version=self.version,
                    finish_reason="stop",
                )
            )
        return completions

    def __repr__(self) -> str:
        return f"ScriptedPolicy({self.name!r})"


def framework_oracle(tokenizer: Any, name: str = "oracle") -> ScriptedPolicy:
    """Return the env's oracle as the model behind a framework agent's gateway: each call is
    answered by its env (``Turn.env``, which the gateway session carries) with
    ``oracle_call(agent, messages)`` where the env has one (a tool request, written in the
    gateway's ``<tool_call>`` syntax, or the final text), else ``oracle_action(agent)``.

    Its episodes are demonstrations in the framework's own tokens (the prompts the framework
    sent, through ``tokenizer``'s chat template), for a warm start of that framework agent.
    """
    from boltzoo.agents.gateway import tool_call_text

    def answer(turn: Turn) -> str:
        env = turn.env
        if env is None:
            raise ValueError("framework_oracle needs the turn's env: play it through a framework")
        call = getattr(env, "oracle_call", None)
        if call is None:
            return env.oracle_action(turn.agent)
        action = call(turn.agent, turn.observation["messages"])
        if isinstance(action, dict):  # {"tool": name, "arguments": {...}}
            return tool_call_text(action["tool"], action["arguments"])
        return action

    return ScriptedPolicy(answer, tokenizer, name=name)
