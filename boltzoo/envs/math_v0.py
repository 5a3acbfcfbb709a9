r"""math-v0: word problems solved with a calculator tool (the paper's Calc-X task).

| | |
|---|---|
| Creation | ``boltzoo.make("boltzoo/math-v0")`` (or ``pettingzoo.make("aec", ...)``, ``env()``) |
| Agents | ``solver``; with ``agents=("solver", "verifier")`` also ``verifier`` |
| API | AEC (turn by turn) |
| Action | text (``str`` or ``Completion``) |
| Observation | ``{"agent", "task_id", "messages"}``: the chat of the agent's next LLM call |
| Single-agent view | ``boltzoo.make_gym("boltzoo/math-v0", agent="solver")`` |

Create it with every argument at its default::

    env = boltzoo.make("boltzoo/math-v0", level="easy", split="train", agents=("solver",),
                       max_turns=6, tool_reward=0.0, tool_reward_on_success=False,
                       format_reward=0.0, few_shot=True, lenient_answer=False,
                       system_prompt=None, prompts=None)

## Agents and actions

``solver`` reasons, calls the calculator and gives a final answer. A calculator call is
``<calc>EXPRESSION</calc>`` anywhere in the action; every call in the action is evaluated and the
results come back as one ``tool`` message in the solver's next observation (``<calc>12*3</calc>
= 36``, or ``... -> error: division by zero``). The calculator handles ``+ - * / // **`` (and
``^``), ``mod(a, b)``, parentheses, decimals, ``15%`` as 0.15, and ``sqrt round min max abs
floor ceil``; it never runs Python ``eval`` and limits exponents, number sizes, expression length
and time (``boltzoo.envs.tools.calculator``).

A final answer is ``\boxed{...}``, a line ``#### ...`` or a line ``Answer: ...``; it ends the
solver's work (calculator calls in the same action are still run and counted, their results
unseen). An action with calculator calls and no final answer gets the results and another turn;
an action with neither gets a short reminder and another turn. Every turn, the verifier's
included, counts towards ``max_turns``; at the limit the episode is truncated with score 0.

``verifier`` (optional) sees the question and the solver's work and checks the solver's answer
once. Its verdict is a line ``VERDICT: CORRECT`` or ``VERDICT: INCORRECT - <reason>``, parsed
leniently (the last verdict line wins; without one, the words "incorrect"/"wrong" count as
INCORRECT; anything else counts as CORRECT). INCORRECT sends the reason back to the solver, whose
next final answer is final.

## Rewards and infos

The task reward, paid to every agent when the episode ends: 1.0 when the solver's final answer
matches the gold answer numerically (relative tolerance 1e-4; ``15%`` also matches 0.15), else 0.
``tool_reward`` (default 0, off) pays the acting agent that much per calculator call that
evaluates without error (with ``tool_reward_on_success=True``, only at the end of an episode
that succeeds: calculator calls in a failed episode earn nothing); ``format_reward`` (default
0, off) pays the solver that much at the end when its final action has a final answer and
well-formed ``<calc>`` tags. Neither changes ``score`` or ``success``. Every agent's ``infos``
holds ``turns``, ``tool_calls`` and ``tool_errors`` (the solver's calculator use, so far), and
at the end ``success`` (bool), ``score`` (0.0 or 1.0) and ``answer`` (the solver's final answer
text, or None).

## Arguments

* ``level``: ``"easy"`` (one or two operations on two-digit numbers), ``"medium"``, ``"hard"``;
  for the bundled generated problems.
* ``split``: ``"train"`` (default) or ``"test"``; disjoint, sharing templates.
* ``dataset``: ``"generated"`` (default), ``"gsm8k"`` (jsonl with ``question`` and ``answer``
  ending ``#### N``) or ``"calcx"`` (Calc-X jsonl with ``question`` and ``result``), the last two
  read from ``path``: all of a file's rows, in file order. ``path`` is one file, the
  ``"train"`` split only, or ``{"train": FILE, "test": FILE}``: asking for a split it does not
  name is an error, never the training file.
* ``tasks``: your own problems instead of a data set: rows ``{"question", "answer"}`` (optional
  ``id`` and ``expression``, a calculator expression giving the answer exactly, which the
  oracle's demonstrations use) as a list, a JSONL or JSON-list file, or
  ``{"train": ..., "test": ...}``; one file or list is the ``"train"`` split only, as ``path``.
* ``data_seed``: the generator's seed (default 0): another seed, other problems.
* ``agents``, ``max_turns`` (default 6), ``tool_reward``, ``tool_reward_on_success``,
  ``format_reward``, ``render_mode``
  (``"ansi"`` / ``"human"``), ``max_action_chars`` (default 200,000; longer actions are cut and
  ``info["action_truncated"]`` is set), ``few_shot`` (default True: one hand-written worked
  example in the solver's system prompt, never a task of any split), ``lenient_answer``
  (default False; True: when the turn limit comes and the solver's last action has no marked
  final answer, its last number is taken as the answer instead of scoring 0, as GSM8K's
  "flexible extract" does; the verifier, if any, is skipped then; ``format_reward`` still
  needs a marked answer).
* ``system_prompt``: the solver's system prompt, replacing the default (and its worked
  example); ``prompts``: system prompts by agent, e.g. ``{"verifier": "..."}`` (the solver's
  given either way, not both). Whatever the prompt asks for, every answer marker above counts,
  so a prompt may ask for the ``Answer: N`` line a model already writes. The prompts played
  are in ``episode.metadata["prompts"]``.

## Scripted policies

``oracle_action`` demonstrates the way the env is meant to be solved: a first turn that calls
the calculator with the task's expression (``<calc>50+41-27</calc>``) and, after the tool
message, ``The answer is \boxed{64}.``; with too few turns left for that it answers at once.
``naive_action`` boxes the question's last number.

## Version history

* v0: first version.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from boltzoo.envs.base import (
    DEFAULT_MAX_ACTION_CHARS,
    LLMTurnEnv,
    OrderEnforcing,
    ToolSpec,
    string_parameters,
)
from boltzoo.envs.data.files import split_source
from boltzoo.envs.data.loaders import load_calcx, load_gsm8k, math_rows
from boltzoo.envs.data.math_tasks import MathTask, generate_tasks
from boltzoo.envs.protocol import parse_verdict
from boltzoo.envs.tools.calculator import CalcResult, evaluate, find_calls
from boltzoo.errors import DatasetError
from boltzoo.rewards.format import format_reward as format_reward_of
from boltzoo.rewards.math import extract_answer, extract_final_answer, numbers_match
from boltzoo.tracing import span_attributes

SOLVER = "solver"
VERIFIER = "verifier"

SOLVER_SYSTEM_PROMPT = (
    "You solve math word problems step by step. You have a calculator: write "
    "<calc>EXPRESSION</calc> (with + - * / ** and parentheses, or functions such as "
    "sqrt, round, min, max, abs, mod(a, b)) and the results are sent back to you. "
    "When you know the answer, write it as \\boxed{NUMBER}."
)
# Hand-written, so it is never a task of any split.
SOLVER_FEW_SHOT = (
    "\n\nExample.\nQuestion: A baker made 7 trays of 12 cookies and sold 50 of them. "
    "How many cookies are left?\n"
    "Solution: The baker made <calc>7*12</calc> cookies, then <calc>7*12 - 50</calc> are left. "
    "The answer is \\boxed{34}."
)
VERIFIER_SYSTEM_PROMPT = (
    "You check the solution of a math word problem. Reply with one line: "
    "'VERDICT: CORRECT' if the final answer is right, or "
    "'VERDICT: INCORRECT - <the reason>' if it is wrong."
)
REMINDER = (
    "Use the calculator with <calc>EXPRESSION</calc>, or give your final answer as \\boxed{NUMBER}."
)


class raw_env(LLMTurnEnv):
    """math-v0 as a raw AEC env (``env()`` adds PettingZoo's order-enforcing wrapper)."""

    metadata = {"render_modes": ["ansi", "human"], "name": "math_v0", "is_parallelizable": False}
    env_id = "boltzoo/math-v0"
    agent_variants = ((SOLVER,), (SOLVER, VERIFIER))
    default_prompts = {
        SOLVER: SOLVER_SYSTEM_PROMPT + SOLVER_FEW_SHOT,
        VERIFIER: VERIFIER_SYSTEM_PROMPT,
    }
    tools = (
        ToolSpec(
            "calculator",
            "Evaluate an arithmetic expression: + - * / // ** (or ^), parentheses, decimals, "
            "15% for 0.15, and sqrt, round, min, max, abs, floor, ceil, mod(a, b).",
            string_parameters(expression="the expression, e.g. (12 + 30) * 3"),
        ),
    )

    def __init__(
        self,
        *,
        level: str = "easy",
        split: str | None = None,
        dataset: str = "generated",
        path: str | os.PathLike | dict[str, str | os.PathLike] | None = None,
        tasks: Any = None,
        data_seed: int = 0,
        agents: Sequence[str] = (SOLVER,),
        max_turns: int = 6,
        tool_reward: float = 0.0,
        tool_reward_on_success: bool = False,
        format_reward: float = 0.0,
        few_shot: bool = True,
        lenient_answer: bool = False,
        system_prompt: str | None = None,
        prompts: dict[str, str] | None = None,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
    ):
        prompts = dict(prompts or {})
        if system_prompt is not None:
            if SOLVER in prompts:
                raise ValueError("give the solver's prompt once: system_prompt= or prompts=")
            prompts[SOLVER] = system_prompt
        if not few_shot:
            prompts.setdefault(SOLVER, SOLVER_SYSTEM_PROMPT)
        super().__init__(
            agents=agents,
            max_turns=max_turns,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            tool_reward=tool_reward,
            tool_reward_on_success=tool_reward_on_success,
            prompts=prompts,
        )
        self.format_reward = float(format_reward)
        self.lenient_answer = bool(lenient_answer)
        self.tasks: list[MathTask] = load_math_tasks(dataset, level, split, path, data_seed, tasks)

    # --- episode state ---------------------------------------------------------------------

    def _start_episode(self) -> str:
        task: MathTask = self.current_task
        self._solver_chat: list[dict[str, str]] = [
            {"role": "system", "content": self.prompts[SOLVER]},
            {"role": "user", "content": task.question},
        ]
        self._answer: str | None = None  # the solver's final answer, once given
        self._final_action = ""
        self._verified = False  # the verifier checks once
        for agent in self.agents:
            self.infos[agent].update(turns=0, tool_calls=0, tool_errors=0)
        return SOLVER

    def _messages(self, agent: str) -> list[dict[str, str]]:
        if agent == SOLVER:
            return self._solver_chat
        work = "\n".join(
            f"[{m['role']}] {m['content']}" for m in self._solver_chat[2:] if m["role"] != "user"
        )
        return [
            {"role": "system", "content": self.prompts[VERIFIER]},
            {
                "role": "user",
                "content": f"Question: {self.current_task.question}\n\nSolution:\n{work}\n\n"
                f"Proposed answer: {self._answer}",
            },
        ]

    def _play(self, agent: str, text: str) -> str | None:
        for a in self.agents:
            self.infos[a]["turns"] = self.turn_count
        if agent == SOLVER:
            return self._play_solver(text)
        return self._play_verifier(text)

    def _play_solver(self, text: str) -> str | None:
        self._solver_chat.append({"role": "assistant", "content": text})
        results = [self._calculate(expression) for expression in find_calls(text)]
        self._pay_tool_reward(SOLVER, sum(r.ok for r in results))

        answer = extract_final_answer(text)
        if answer is None and self.lenient_answer and self.turn_count >= self.max_turns:
            # GSM8K's "flexible extract": at the turn limit the last number is the answer.
            answer = extract_answer(text, fallback_last_number=True)
            if answer is not None:
                self._answer, self._final_action = answer, text
                return self._end()
        if answer is not None:
            self._answer, self._final_action = answer, text
            if VERIFIER in self.agents and not self._verified:
                return VERIFIER
            return self._end()
        if results:
            tool_text = "\n".join(f"<calc>{r.expression}</calc> = {r.output}" for r in results)
            self._solver_chat.append({"role": "tool", "content": tool_text})
            self.transcript.append(("calculator", tool_text))
        else:
            self._solver_chat.append({"role": "user", "content": REMINDER})
            self.transcript.append(("env", REMINDER))
        return SOLVER

    def _calculate(self, expression: str) -> CalcResult:
        """Evaluate one calculator call, in a span, counted in every agent's infos."""
        with self._tool_span("calculator", expression=expression) as span:
            result = evaluate(expression)
            span.set_attributes(span_attributes(ok=result.ok, output=result.output))
        for a in self.agents:
            self.infos[a]["tool_calls"] += 1
            self.infos[a]["tool_errors"] += not result.ok
        return result

    def _run_tool(self, agent: str, name: str, arguments: dict[str, Any]) -> tuple[str, int]:
        result = self._calculate(str(arguments["expression"]))
        return result.output, int(result.ok)

    def _play_verifier(self, text: str) -> str | None:
        self._verified = True
        accepted, reason = parse_verdict(text)
        self.infos[VERIFIER]["accepted"] = accepted
        if accepted:
            return self._end()
        feedback = (
            f"A checker thinks your answer {self._answer} is wrong: {reason or 'no reason given'}"
            " Check your work and give your final answer as \\boxed{NUMBER}."
        )
        self._solver_chat.append({"role": "user", "content": feedback})
        self.transcript.append(("env", feedback))
        return SOLVER

    def _end(self) -> None:
        success = numbers_match(self._answer, self.current_task.answer)
        if self.format_reward:
            self._pay(SOLVER, format_reward_of(self._final_action, weight=self.format_reward))
        self._finish(score=1.0 if success else 0.0, success=success, reward=float(success))
        for a in self.agents:
            self.infos[a]["answer"] = self._answer
        return None

    def _finish_truncated(self) -> None:
        super()._finish_truncated()
        for a in self.agents:
            self.infos[a]["answer"] = self._answer

    # --- scripted policies (tests and baselines) -------------------------------------------

    def gold_texts(self) -> list[str]:
        """Return the gold answer (the task as first shown must not hold it)."""
        return [self.current_task.answer]

    def oracle_action(self, agent: str) -> str:
        """Return the action of an agent that knows the gold answer (reads the task, not obs)."""
        task: MathTask = self.current_task
        if agent == VERIFIER:
            if numbers_match(self._answer, task.answer):
                return "VERDICT: CORRECT"
            return "VERDICT: INCORRECT - the final answer does not follow from the question."
        # A calculator turn, then the answer, when the turns left allow both (and the verdict).
        turns_left = self.max_turns - self.turn_count
        needed = 2 + (VERIFIER in self.agents)
        calculated = any(m["role"] == "tool" for m in self._solver_chat)
        if task.expression and not calculated and turns_left >= needed:
            return f"<calc>{task.expression}</calc>"
        return f"The answer is \\boxed{{{task.answer}}}."

    def oracle_call(self, agent: str, messages: list[dict[str, Any]]) -> str | dict[str, Any]:
        """Return the oracle's answer to one model call of a framework agent playing ``agent``
        (``messages``: the chat the framework sent): the calculator as a tool request, then the
        answer once its result is in the chat (the verifier: :meth:`oracle_action`'s)."""
        task: MathTask = self.current_task
        if agent == VERIFIER:
            return self.oracle_action(agent)
        if task.expression and not any(m.get("role") == "tool" for m in messages):
            return {"tool": "calculator", "arguments": {"expression": task.expression}}
        return f"The answer is \\boxed{{{task.answer}}}."

    def naive_action(self, agent: str) -> str:
        """Return a baseline action from the observation alone: the question's last number."""
        if agent == VERIFIER:
            return "VERDICT: CORRECT"
        numbers = re.findall(r"\d+(?:\.\d+)?", self.current_task.question)
        return f"\\boxed{{{numbers[-1] if numbers else 0}}}"


def load_math_tasks(
    dataset: str, level: str, split: str | None, path: Any, data_seed: int, tasks: Any = None
) -> list[MathTask]:
    """Return the tasks of a math-v0 data set: the generated split, a user's rows or a file."""
    if tasks is not None:
        if dataset != "generated" or path is not None:
            raise DatasetError("tasks= are the rows themselves: leave dataset= and path= out")
        return math_rows(split_source(tasks, split, "math-v0 tasks="))
    if dataset == "generated":
        if path is not None:
            raise DatasetError("path= is for dataset='gsm8k' or 'calcx', not the generated set")
        try:
            return generate_tasks(level, split or "train", seed=data_seed)
        except ValueError as error:
            raise DatasetError(str(error)) from None
    loaders = {"gsm8k": load_gsm8k, "calcx": load_calcx}
    if dataset not in loaders:
        raise DatasetError(
            f"unknown math-v0 dataset {dataset!r}; choose 'generated', 'gsm8k' or 'calcx'"
        )
    if path is None:
        raise DatasetError(f"dataset={dataset!r} reads a local jsonl file: pass path=FILE")
    file = split_source(path, split, f"math-v0 {dataset} path=")
    try:
        return loaders[dataset](file)
    except ValueError as error:
        raise DatasetError(str(error)) from None


def env(**kwargs: Any) -> OrderEnforcing:
    """Return math-v0 wrapped as PettingZoo wraps its own envs (order enforcing)."""
    return OrderEnforcing(raw_env(**kwargs))
