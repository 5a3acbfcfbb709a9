"""The PettingZoo AEC base for workflows in which every agent turn is one LLM call.

A task env (math-v0, sql-v0, rag-v0) subclasses :class:`LLMTurnEnv` and writes four things:
the task list (``self.tasks``), ``_start_episode`` (set up a task, name the first agent),
``_messages`` (the chat an agent's model sees next) and ``_play`` (apply one agent's text, run
the tools, say who acts next or end the episode with :meth:`LLMTurnEnv._finish`). Everything
PettingZoo asks of an AEC env lives here once: seeding, task choice, per-agent rewards and their
accumulation, terminations, the ``max_turns`` truncation, dead steps, action checks, the Episode
record and rendering.

Conventions every env follows:

* Observation: ``{"agent": str, "task_id": str, "messages": [{"role", "content"}, ...]}``,
  plain JSON values, built fresh on every call. Gold answers never appear in it.
* Action: a ``str``, or a :class:`~boltzoo.episode.Completion` (kept untouched in the record).
  Text longer than ``max_action_chars`` is cut there and ``info["action_truncated"]`` is set.
* Rewards: the terminal task reward is paid to every agent (the team's reward); envs may pay
  intermediate rewards from tool status (``tool_reward``, off by default), which never change
  ``score`` or ``success``; with ``tool_reward_on_success=True`` they are held back and paid at
  the end only if the episode succeeds (a bonus that failing episodes cannot farm). When an
  episode ends, every agent's info holds ``"success"`` (bool) and ``"score"`` (float in [0, 1]).
* ``reset(seed=..., options={"task_index": i})`` plays the i-th task of the split; without a
  task index the seed picks one. Unknown option keys are ignored.
"""

from __future__ import annotations

import copy
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from gymnasium.spaces import Dict as DictSpace
from gymnasium.utils import seeding
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from boltzoo.envs.spaces import ChatMessagesSpace, TextSpace
from boltzoo.episode import Completion, Episode, Step
from boltzoo.errors import (
    AgentRewardError,
    EpisodeEndedError,
    InvalidActionError,
    UnknownAgentError,
    shorten,
)
from boltzoo.tracing import completion_attributes, span_attributes, tracer

DEFAULT_MAX_ACTION_CHARS = 200_000  # far above any real turn; bounds the work one action can cause


@dataclass(frozen=True)
class ToolSpec:
    """A tool an env offers to framework agents, described as OpenAI function calling does."""

    name: str
    description: str
    parameters: dict[str, Any]

    def openai_schema(self) -> dict[str, Any]:
        """Return the tool in OpenAI's ``tools`` format."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def string_parameters(**descriptions: str) -> dict[str, Any]:
    """Return a JSON schema of required string parameters, ``name=description`` each."""
    return {
        "type": "object",
        "properties": {k: {"type": "string", "description": v} for k, v in descriptions.items()},
        "required": list(descriptions),
        "additionalProperties": False,
    }


class LLMTurnEnv(AECEnv):
    """A multi-agent LLM workflow as a PettingZoo AEC env: text in, text out, per-agent rewards.

    Args:
        agents: the workflow variant, one of the subclass's ``agent_variants``.
        max_turns: agent turns (all agents together) before the episode is truncated.
        render_mode: ``"ansi"`` (``render()`` returns the transcript) or ``"human"`` (prints it).
        max_action_chars: longer actions are cut to this many characters.
        tool_reward: intermediate reward paid to an agent for each tool call that succeeds
            (0 turns it off).
        tool_reward_on_success: hold the tool rewards back and pay them with the team reward,
            only when the episode succeeds (failed and truncated episodes get none of them).
        prompts: system prompts by agent name, replacing the env's defaults
            (``default_prompts``) for the agents named; every episode records the prompts it
            was played with in ``episode.metadata["prompts"]``.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "human"],
        "name": "llm_turn_env",
        "is_parallelizable": False,
    }
    env_id: ClassVar[str] = ""
    agent_variants: ClassVar[tuple[tuple[str, ...], ...]] = ()
    # The env's tools, callable by framework agents through call_tool (text agents use syntax).
    tools: ClassVar[tuple[ToolSpec, ...]] = ()
    # Each agent's system prompt unless ``prompts=`` replaces it.
    default_prompts: ClassVar[dict[str, str]] = {}
    # Whether the env takes rewards its agents report (report_reward; an agent program's
    # POST .../reward). An env that judges its own tasks does not: no agent scores itself.
    accepts_agent_rewards: ClassVar[bool] = False

    def __init__(
        self,
        *,
        agents: Sequence[str],
        max_turns: int,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
        tool_reward: float = 0.0,
        tool_reward_on_success: bool = False,
        prompts: Mapping[str, str] | None = None,
    ):
        super().__init__()
        agents = tuple(agents) if not isinstance(agents, str) else (agents,)
        if agents not in self.agent_variants:
            choices = ", ".join(repr(v) for v in self.agent_variants)
            raise UnknownAgentError(
                f"{self.env_id} has no workflow with agents={shorten(agents)}; choose one of: "
                f"{choices}"
            )
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not supported; use one of "
                f"{self.metadata['render_modes']} or None"
            )
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.possible_agents = list(agents)
        self.agents = []
        self.max_turns = int(max_turns)
        self.render_mode = render_mode
        self.max_action_chars = int(max_action_chars)
        self.tool_reward = float(tool_reward)
        self.tool_reward_on_success = bool(tool_reward_on_success)
        prompts = dict(prompts or {})
        known = {a for variant in self.agent_variants for a in variant}
        for agent, prompt in prompts.items():
            if agent not in known:
                raise UnknownAgentError(
                    f"prompts names {shorten(agent)}, which is not an agent of {self.env_id} "
                    f"(its agents: {sorted(known)})"
                )
            if not isinstance(prompt, str):
                raise TypeError(f"the prompt of {agent!r} must be a str, got {shorten(prompt)}")
        # The system prompt each agent's model sees: the env's default unless replaced.
        self.prompts: dict[str, str] = {
            a: prompts.get(a, self.default_prompts.get(a, "")) for a in sorted(known)
        }

        # One space object per agent for the env's lifetime: api_test checks identity.
        self._observation_spaces = {
            a: DictSpace(
                {"agent": TextSpace(), "task_id": TextSpace(), "messages": ChatMessagesSpace()}
            )
            for a in self.possible_agents
        }
        self._action_spaces = {
            a: TextSpace(max_length=self.max_action_chars) for a in self.possible_agents
        }
        self._np_random = None
        self._np_random_seed = None
        self.tasks: Sequence[Any] = ()
        self.task_index = -1
        self.current_task: Any = None
        self.turn_count = 0
        self.episode: Episode | None = None
        self.transcript: list[tuple[str, str]] = []
        self._episode_span: trace.Span | None = None
        self._deferred_tool_rewards: dict[str, int] = {}
        self._held_tool_rewards: dict[str, float] = {}  # tool_reward_on_success: paid at a success
        # agent -> what it reported this turn: {"turn": reward or None, "calls": {call id: r}}
        self._reported_rewards: dict[str, dict[str, Any]] = {}

    # --- what subclasses write -------------------------------------------------------------

    def _task_id(self, task: Any) -> str:
        """Return the id of ``task`` (default: its ``task_id`` attribute)."""
        return str(task.task_id)

    def _start_episode(self) -> str:
        """Set up the env's state for ``self.current_task``; return the first agent to act."""
        raise NotImplementedError

    def _messages(self, agent: str) -> list[dict[str, str]]:
        """Return the chat messages of ``agent``'s next LLM call."""
        raise NotImplementedError

    def _play(self, agent: str, text: str) -> str | None:
        """Apply ``agent``'s action; return the next agent, or None after calling ``_finish``."""
        raise NotImplementedError

    def _run_tool(self, agent: str, name: str, arguments: dict[str, Any]) -> tuple[str, int]:
        """Run tool ``name``; return its output for the agent and its count of successes."""
        raise NotImplementedError

    def _finish_truncated(self) -> None:
        """Score an episode cut at ``max_turns`` (default: failed, score 0)."""
        self._finish(score=0.0, success=False, reward=0.0)

    # --- PettingZoo API --------------------------------------------------------------------

    @property
    def num_tasks(self) -> int:
        """Return how many tasks the split holds."""
        return len(self.tasks)

    def observation_space(self, agent: str) -> DictSpace:
        """Return ``agent``'s observation space (the same object every call)."""
        try:
            return self._observation_spaces[agent]
        except KeyError:
            raise self._unknown_agent(agent) from None

    def action_space(self, agent: str) -> TextSpace:
        """Return ``agent``'s action space: text (the same object every call)."""
        try:
            return self._action_spaces[agent]
        except KeyError:
            raise self._unknown_agent(agent) from None

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode on the task ``options["task_index"]``, or on one the seed picks."""
        if seed is not None or self._np_random is None:
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        if self.num_tasks == 0:
            raise ValueError(f"{self.env_id} has no tasks to play (the data set is empty)")
        task_index = (options or {}).get("task_index")
        if task_index is None:
            task_index = int(self._np_random.integers(self.num_tasks))
        elif isinstance(task_index, bool) or not isinstance(task_index, int):
            raise TypeError(f"options['task_index'] must be an int, got {shorten(task_index)}")
        elif not 0 <= task_index < self.num_tasks:
            raise IndexError(
                f"options['task_index']={task_index} is out of range: this split has "
                f"{self.num_tasks} tasks (0 to {self.num_tasks - 1})"
            )
        self.task_index = task_index
        self.current_task = self.tasks[task_index]
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.turn_count = 0
        self.transcript = []
        self._deferred_tool_rewards = {}
        self._held_tool_rewards = {}
        self._reported_rewards = {}
        self.episode = Episode(
            episode_id=uuid.uuid4().hex,
            env_id=self.env_id,
            task_id=self._task_id(self.current_task),
            task_index=task_index,
            agents=list(self.possible_agents),
            seed=seed,
            metadata={"prompts": {a: self.prompts[a] for a in self.possible_agents}},
        )
        self._skip_agent_selection = None
        self._end_episode_span("abandoned: reset before the episode ended")
        self._episode_span = tracer.start_span(
            "boltzoo.episode",
            attributes=span_attributes(
                env=self.env_id,
                task_id=self.episode.task_id,
                task_index=task_index,
                episode_id=self.episode.episode_id,
                agents=self.possible_agents,
                seed=seed,
            ),
        )
        with trace.use_span(self._episode_span, end_on_exit=False):
            self.agent_selection = self._start_episode()

    def observe(self, agent: str) -> dict[str, Any]:
        """Return ``agent``'s observation: the chat messages of its next LLM call."""
        if agent not in self._observation_spaces:
            raise self._unknown_agent(agent)
        return {
            "agent": agent,
            "task_id": self.episode.task_id if self.episode else "",
            "messages": copy.deepcopy(self._messages(agent)),
        }

    def step(self, action: str | Completion | None) -> None:
        """Apply the selected agent's action (text), run the tools and pay the rewards."""
        if not self.agents:
            raise EpisodeEndedError(
                "the episode has ended and every agent has left; call reset() to start another"
            )
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            if action is not None:
                raise EpisodeEndedError(
                    f"the episode has ended: {agent!r} may only step None now (got "
                    f"{shorten(action, 60)}); call reset() to start another"
                )
            self._was_dead_step(action)
            return
        completion = self._to_completion(action)
        text = completion.text
        info = self.infos[agent]
        info["action_truncated"] = len(text) > self.max_action_chars
        if info["action_truncated"]:
            text = text[: self.max_action_chars]

        observation = self.observe(agent)
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        # Tool calls a framework agent made while producing this action pay off now.
        self._pay_tool_reward(agent, self._deferred_tool_rewards.pop(agent, 0))
        self.turn_count += 1
        self.transcript.append((agent, text))
        with (
            trace.use_span(self._episode_span, end_on_exit=False),
            tracer.start_as_current_span(
                "boltzoo.env.step",
                attributes=span_attributes(
                    agent=agent, turn=self.turn_count, action_chars=len(text)
                )
                | completion_attributes(completion),
            ) as step_span,
        ):
            next_agent = self._play(agent, text)
            if next_agent is None:
                if not self.episode.terminated:
                    raise RuntimeError(f"{type(self).__name__}._play ended without _finish")
            elif self.turn_count >= self.max_turns:
                self._finish_truncated()
                for a in self.agents:
                    self.terminations[a] = False
                    self.truncations[a] = True
                self.episode.terminated, self.episode.truncated = False, True
            step_span.set_attributes(span_attributes(reward=self.rewards[agent]))
        for paid_to, reward in self.rewards.items():
            if reward:
                self._episode_span.add_event(
                    "boltzoo.reward",
                    span_attributes(agent=paid_to, reward=reward, turn=self.turn_count),
                )
        self._accumulate_rewards()
        self.episode.steps.append(
            Step(
                agent=agent,
                observation=observation,
                action=completion,
                rewards=dict(self.rewards),
                info=copy.deepcopy(self.infos[agent]),
            )
        )
        if self.episode.done:
            self.episode.final_rewards = dict(self.rewards)
            self._end_episode_span()
            self.agent_selection = self.agents[0]
        else:
            self.agent_selection = next_agent
        if self.render_mode == "human":
            self.render()

    def render(self) -> str | None:
        """Return (``"ansi"``) or print (``"human"``) the episode's transcript."""
        if self.render_mode is None:
            return None
        lines = [f"=== {self.env_id} task {self.episode.task_id if self.episode else '-'} ==="]
        for speaker, text in self.transcript:
            lines.append(f"[{speaker}] {text}")
        if self.episode and self.episode.done:
            lines.append(f"=== score {self.episode.score} success {self.episode.success} ===")
        out = "\n".join(lines)
        if self.render_mode == "human":
            print(out)
            return None
        return out

    def close(self) -> None:
        """End a running episode's span (envs with other resources release them too)."""
        self._end_episode_span("abandoned: env closed before the episode ended")

    def call_tool(self, agent: str, name: str, arguments: Mapping[str, Any]) -> str:
        """Run one of the env's tools for ``agent`` (a framework agent's tool call); return
        the output the agent sees.

        The call runs in the env's sandbox and counts in its tool status and spans, exactly like
        a tool call written in the agent's text; its intermediate reward (``tool_reward``) is
        paid with the agent's next action. Bad calls come back as ``"error: ..."`` text.
        """
        specs = {tool.name: tool for tool in self.tools}
        if name not in specs:
            return f"error: unknown tool {name!r}; the tools are {sorted(specs)}"
        if not self.agents or self.episode is None or self.episode.done:
            return "error: the episode has ended"
        arguments = dict(arguments or {})
        missing = [p for p in specs[name].parameters.get("required", []) if p not in arguments]
        if missing:
            return f"error: {name} needs the arguments {missing}"
        with trace.use_span(self._episode_span, end_on_exit=False):
            output, successes = self._run_tool(agent, name, arguments)
        self._deferred_tool_rewards[agent] = self._deferred_tool_rewards.get(agent, 0) + successes
        return output

    def report_reward(self, agent: str, reward: float, call_id: str | None = None) -> None:
        """Take a reward ``agent`` reports for its current turn (envs with
        ``accepts_agent_rewards``; the env pays it when the turn is played): the turn's reward,
        or with ``call_id`` an intermediate reward for one of the turn's LLM calls.

        Raises:
            AgentRewardError: the env judges its own tasks, the reward is not a finite number,
                or the turn (or that call) has its reward already.
        """
        if not self.accepts_agent_rewards:
            raise AgentRewardError(f"{self.env_id} judges its own tasks: it takes no rewards")
        if (
            isinstance(reward, bool)
            or not isinstance(reward, int | float)
            or not math.isfinite(reward)
        ):
            raise AgentRewardError(f"a reward must be a finite number, got {shorten(reward)}")
        if not self.agents or self.episode is None or self.episode.done:
            raise AgentRewardError("the episode has ended")
        reported = self._reported_rewards.setdefault(agent, {"turn": None, "calls": {}})
        if call_id is None:
            if reported["turn"] is not None:
                raise AgentRewardError(f"{agent!r} has reported this turn's reward already")
            reported["turn"] = float(reward)
        else:
            if call_id in reported["calls"]:
                raise AgentRewardError(f"call {shorten(call_id)} has its reward already")
            reported["calls"][str(call_id)] = float(reward)
        self._episode_span.add_event(
            "boltzoo.reward.reported",
            span_attributes(agent=agent, reward=float(reward), call_id=call_id),
        )

    def trace_context(self) -> Any:
        """Return the OpenTelemetry context of the running episode (for spans made outside)."""
        return trace.set_span_in_context(self._episode_span) if self._episode_span else None

    def record_failure(self, error: str) -> None:
        """Mark the current episode failed (its policy or a tool raised, or it timed out)."""
        if self.episode is not None:
            self.episode.failed, self.episode.error = True, error
        self._end_episode_span(error)

    # --- helpers for subclasses ------------------------------------------------------------

    def _pay(self, agent: str, amount: float) -> None:
        """Pay ``agent`` an intermediate reward this step."""
        self.rewards[agent] += float(amount)

    def _pay_tool_reward(self, agent: str, successes: int) -> None:
        """Pay ``tool_reward`` per successful tool call, when intermediate rewards are on
        (or hold it back for the end, with ``tool_reward_on_success``)."""
        if not (self.tool_reward and successes):
            return
        if self.tool_reward_on_success:
            held = self._held_tool_rewards.get(agent, 0.0)
            self._held_tool_rewards[agent] = held + self.tool_reward * successes
        else:
            self._pay(agent, self.tool_reward * successes)

    def _finish(self, *, score: float, success: bool, reward: float) -> None:
        """End the episode: pay every agent the team reward and record score and success."""
        for a in self.agents:
            self.rewards[a] += float(reward)
            if success:  # tool rewards held back by tool_reward_on_success (else none)
                self.rewards[a] += self._held_tool_rewards.get(a, 0.0)
            self.terminations[a] = True
            self.infos[a]["success"] = bool(success)
            self.infos[a]["score"] = float(score)
        self.episode.score = float(score)
        self.episode.success = bool(success)
        self.episode.terminated = True

    def _tool_span(self, tool: str, **attributes: Any) -> Any:
        """Return a context manager: the span of one tool call (a child of the current step)."""
        return tracer.start_as_current_span(
            f"boltzoo.tool.{tool}", attributes=span_attributes(tool=tool, **attributes)
        )

    def _end_episode_span(self, error: str | None = None) -> None:
        span, self._episode_span = self._episode_span, None
        if span is None:
            return
        episode = self.episode
        span.set_attributes(
            span_attributes(
                turns=self.turn_count,
                score=episode.score,
                success=episode.success,
                truncated=episode.truncated,
                returns=[f"{a}={r:g}" for a, r in episode.returns().items()],
            )
        )
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error[:500]))
        span.end()

    def _unknown_agent(self, agent: Any) -> UnknownAgentError:
        return UnknownAgentError(
            f"{self.env_id} has no agent {shorten(agent)} in this workflow; its agents are "
            f"{self.possible_agents}"
        )

    @staticmethod
    def _to_completion(action: Any) -> Completion:
        if isinstance(action, Completion):
            return action
        if isinstance(action, str):
            return Completion(text=action)
        raise InvalidActionError(
            f"an action must be text (a str or a boltzoo Completion), got "
            f"{type(action).__name__}: {shorten(action, 60)}"
        )


class OrderEnforcing(OrderEnforcingWrapper):
    """PettingZoo's order-enforcing wrapper, except that a step after every agent has left is an
    error (PettingZoo only warns, and the action would be lost without a trace)."""

    def step(self, action: str | Completion | None) -> None:
        """Step the env; raise :class:`EpisodeEndedError` when the episode is over."""
        if self._has_reset and not self.env.agents:
            raise EpisodeEndedError(
                "the episode has ended and every agent has left; call reset() to start another"
            )
        super().step(action)
