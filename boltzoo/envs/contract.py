"""The env contract: what rollout, the trainer, SFT and the gateway need of an env, and
:func:`check_env`, which checks an env against it and says what is wrong in words.

An env is a PettingZoo ``AECEnv`` (``pettingzoo.test.api_test`` passes) whose unwrapped env
has the members of :class:`BoltzooEnv`. Subclassing :class:`~boltzoo.envs.base.LLMTurnEnv`
gives them all; :class:`~boltzoo.envs.TaskEnv` builds one from rows. Besides the members:

* the env's factory takes ``split=`` (``"train"``; ``"test"`` is what evaluations ask for):
  the CLI and the trainer pass it to every env;
* ``reset(seed=..., options={"task_index": i})`` plays task ``i`` of ``tasks``;
* observations are ``{"agent", "task_id", "messages": [{"role", "content"}, ...]}`` and never
  hold the gold answer; actions are text;
* when an episode ends every agent's info holds ``success`` (bool) and ``score`` (a float in
  [0, 1]); ``episode`` records it all;
* optional: ``oracle_action(agent)`` (``--policy oracle``: demonstrations for a warm start),
  ``naive_action(agent)`` (``--policy naive``), ``gold_texts()`` (the current task's gold:
  :func:`check_env` looks for it, as a whole word of 4 characters or more, in what every agent
  sees when all reply with nothing, system prompts aside; a tool's output or an agent's answer
  may show it in a real episode).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pettingzoo import AECEnv

from boltzoo.episode import Episode
from boltzoo.errors import BoltzooError, DatasetError, shorten

ROLES = ("system", "user", "assistant", "tool")
MIN_GOLD_CHARS = 4  # shorter gold texts (a digit, "yes") turn up in questions by chance


@runtime_checkable
class BoltzooEnv(Protocol):
    """What boltzoo uses of an env's unwrapped AEC env, beyond PettingZoo's API."""

    env_id: str  # the id it was made as (make() sets it)
    possible_agents: list[str]
    tasks: Sequence[Any]  # the split's tasks; reset's task_index indexes them
    prompts: Mapping[str, str]  # each agent's system prompt (SFT and episodes record them)
    tools: Sequence[Any]  # ToolSpecs offered to framework agents and agent programs
    accepts_agent_rewards: bool  # whether report_reward takes what agents report
    episode: Episode | None  # the record of the episode being played

    @property
    def num_tasks(self) -> int:
        """How many tasks the split holds."""

    def call_tool(self, agent: str, name: str, arguments: Mapping[str, Any]) -> str:
        """Run a tool for ``agent``; bad calls come back as ``"error: ..."`` text."""

    def report_reward(self, agent: str, reward: float, call_id: str | None = None) -> None:
        """Take a reward an agent reports (or refuse it: AgentRewardError)."""

    def record_failure(self, error: str) -> None:
        """Mark the current episode failed (its policy or a tool raised, or it timed out)."""

    def trace_context(self) -> Any:
        """Return the OpenTelemetry context of the running episode."""


class EnvCheckError(BoltzooError, AssertionError):
    """An env that breaks the contract; the message lists every problem found."""


def _members() -> list[str]:
    names = [n for n in BoltzooEnv.__annotations__]
    return names + [n for n in vars(BoltzooEnv) if not n.startswith("_") and n not in names]


def check_env(env: str | AECEnv, *, episodes: int = 4, seed: int = 0, **kwargs: Any) -> list[str]:
    """Check an env against boltzoo's contract; return what was checked, or raise listing every
    problem.

    Runs PettingZoo's ``api_test``, then plays ``episodes`` tasks with the oracle (when the env
    has ``oracle_action``: it must succeed) and with an empty reply (which must not), checking
    each observation's shape, that no gold text is in it, ``success``/``score`` at the end, the
    tool specs (each called once with example arguments), and that episodes serialise.

    Args:
        env (str | AECEnv): an env id (then ``split="train"`` and ``split="test"`` are tried
            too: what the CLI and the trainer pass), or an env.
        episodes (int): tasks to play with each scripted policy.
        seed (int): the seed of the first reset.
        **kwargs: the env's keyword arguments, with an id.

    Returns:
        list[str]: one line per check that passed (notes start with ``"note:"``).

    Raises:
        EnvCheckError: the problems, numbered, each saying what is wrong and where.
    """
    problems: list[str] = []
    passed: list[str] = []
    made = isinstance(env, str)  # then closed here at the end
    if made:
        from boltzoo.registration import make

        env_id = env
        kwargs.pop("split", None)  # both splits are tried
        try:
            env = make(env_id, split="train", **kwargs)
            passed.append("made with split='train'")
        except TypeError as error:
            if "'split'" in str(error) and "keyword" in str(error):
                raise EnvCheckError(
                    f"{env_id}: the env does not take split= ({error}); the CLI and the trainer "
                    "pass split= to every env"
                ) from None
            raise EnvCheckError(
                f"{env_id}: making the env raised {type(error).__name__}: {error}"
            ) from error
        try:
            make(env_id, split="test", **kwargs).close()
            passed.append("made with split='test' (what evaluations ask for)")
        except DatasetError as error:
            passed.append(f"note: no 'test' split ({error}): give eval_env_kwargs to evaluate")
        except TypeError as error:
            problems.append(f"make(split='test') raised TypeError: {error}")
    raw = env.unwrapped
    name = getattr(raw, "env_id", type(raw).__name__)

    missing = [m for m in _members() if not hasattr(raw, m)]
    if missing:
        problems.append(
            f"the unwrapped env lacks {', '.join(missing)} (subclass boltzoo.envs.LLMTurnEnv, "
            "or see boltzoo.envs.contract)"
        )
        raise EnvCheckError(_numbered(name, problems))
    passed.append("has every member of BoltzooEnv")

    from pettingzoo.test import api_test

    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            # it recommends numeric spaces and player_0-style names: text turns have neither
            warnings.filterwarnings("ignore", category=UserWarning, module="pettingzoo")
            api_test(env, num_cycles=5)
        passed.append("pettingzoo.test.api_test")
    except Exception as error:  # api_test asserts; any failure is the env's
        problems.append(f"pettingzoo's api_test: {type(error).__name__}: {error}")

    _check_tools(raw, problems, passed)
    count = min(episodes, raw.num_tasks)
    if count == 0:
        problems.append("the split holds no tasks")
    players = [("an empty reply", lambda agent: "")]
    if hasattr(raw, "oracle_action"):
        players.insert(0, ("the oracle", raw.oracle_action))
    else:
        passed.append("note: no oracle_action: --policy oracle cannot make demonstrations")
    for label, act in players:
        successes = 0
        for index in range(count):
            try:
                episode = _play(
                    env, raw, index, seed + index, act, problems, label == "an empty reply"
                )
            except NotImplementedError as error:  # an oracle_action this env cannot play
                passed.append(f"note: {label} cannot play: {error}")
                break
            except Exception as error:
                error_text = f"{type(error).__name__}: {shorten(error, 300)}"
                problems.append(f"task {index}, played by {label}: {error_text}")
                continue
            if episode is None:
                continue
            successes += bool(episode.success)
            if label == "the oracle" and not episode.success:
                problems.append(
                    f"task {index} ({episode.task_id}): the oracle's episode did not succeed "
                    f"(score {episode.score}): the reward disagrees with the demonstration"
                )
            if label == "an empty reply" and episode.success:
                problems.append(
                    f"task {index} ({episode.task_id}): an empty reply succeeded: the reward "
                    "pays for nothing"
                )
        else:
            passed.append(f"{label}: {successes}/{count} tasks succeeded")
    if made:
        env.close()
    if problems:
        raise EnvCheckError(_numbered(name, problems))
    return passed


def _numbered(name: str, problems: list[str]) -> str:
    lines = "\n".join(f"  {i}. {p}" for i, p in enumerate(problems, 1))
    return f"{name} breaks the env contract ({len(problems)} problems):\n{lines}"


def _check_tools(raw: Any, problems: list[str], passed: list[str]) -> None:
    """Each ToolSpec: an OpenAI function schema, callable with example arguments mid-episode."""
    if not raw.tools:
        return
    raw.reset(seed=0, options={"task_index": 0})
    agent = raw.agent_selection
    examples = {"string": "1", "integer": 1, "number": 1.0, "boolean": True}
    for spec in raw.tools:
        try:
            schema = spec.openai_schema()
            json.dumps(schema)
            properties = spec.parameters["properties"]
            arguments = {
                p: examples.get(properties[p].get("type"), "1")
                for p in spec.parameters.get("required", [])
            }
            output = raw.call_tool(agent, spec.name, arguments)
        except Exception as error:
            problems.append(f"tool {spec.name!r}: {type(error).__name__}: {shorten(error, 300)}")
            continue
        if not isinstance(output, str):
            problems.append(f"tool {spec.name!r} returned {type(output).__name__}, not text")
    try:
        output = raw.call_tool(agent, "no-such-tool", {})
        if not (isinstance(output, str) and output.startswith("error")):
            problems.append(f"an unknown tool's call returned {shorten(output)}, not 'error: ...'")
    except Exception as error:
        problems.append(f"an unknown tool's call raised {type(error).__name__} (return 'error:')")
    passed.append(f"{len(raw.tools)} tools callable with example arguments")


def _play(
    env: AECEnv,
    raw: Any,
    index: int,
    seed: int,
    act: Any,
    problems: list[str],
    look_for_gold: bool,
) -> Episode | None:
    """Play task ``index`` with ``act``, checking every observation (for the gold too, when
    ``look_for_gold``: with empty replies, where no agent's answer or tool output can hold it);
    return the episode."""
    env.reset(seed=seed, options={"task_index": index})
    first = raw.observe(raw.agent_selection)
    env.reset(seed=seed, options={"task_index": index})
    if raw.observe(raw.agent_selection) != first:
        problems.append(f"task {index}: two resets to it gave different first observations")
    if raw.episode is None or raw.episode.task_index != index:
        problems.append(f"task {index}: reset(options={{'task_index': {index}}}) played another")
        return None
    gold = [str(g) for g in (raw.gold_texts() if hasattr(raw, "gold_texts") else []) if g]
    gold = [g for g in gold if len(g) >= MIN_GOLD_CHARS] if look_for_gold else []
    for _ in range(10_000):
        agent = env.agent_selection
        observation, _, termination, truncation, info = env.last()
        if termination or truncation:
            env.step(None)
            if not env.agents:
                break
            continue
        _check_observation(index, agent, observation, gold, problems)
        env.step(act(agent))
    else:
        problems.append(f"task {index}: no end after 10,000 steps (is max_turns enforced?)")
        return None
    episode = raw.episode
    for agent, info in raw.infos.items():
        if not isinstance(info.get("success"), bool):
            problems.append(f"task {index}: {agent}'s final info has no bool 'success'")
        score = info.get("score")
        if not isinstance(score, int | float) or not (0.0 <= score <= 1.0) or math.isnan(score):
            problems.append(f"task {index}: {agent}'s final score is {score!r}, not in [0, 1]")
    if not episode.done:
        problems.append(f"task {index}: the episode record is not done after its last step")
    try:
        again = Episode.from_dict(json.loads(json.dumps(episode.to_dict())))
        if again.to_dict() != episode.to_dict():
            problems.append(f"task {index}: the episode changes through JSON")
    except (TypeError, ValueError) as error:
        problems.append(f"task {index}: the episode does not serialise to JSON ({error})")
    return episode


def _check_observation(
    index: int, agent: str, observation: Any, gold: list[str], problems: list[str]
) -> None:
    where = f"task {index}, {agent}'s observation"
    if not isinstance(observation, dict) or set(observation) != {"agent", "task_id", "messages"}:
        keys = sorted(observation) if isinstance(observation, dict) else type(observation)
        problems.append(f"{where}: keys {keys}, not agent, task_id, messages")
        return
    messages = observation["messages"]
    if not isinstance(messages, list) or not messages:
        problems.append(f"{where}: 'messages' is not a non-empty list")
        return
    for message in messages:
        if (
            not isinstance(message, dict)
            or message.get("role") not in ROLES
            or not isinstance(message.get("content"), str)
        ):
            problems.append(
                f"{where}: a message {shorten(message, 80)} is not {{'role': one of {ROLES}, "
                "'content': str}"
            )
            return
    for text in gold:  # as a whole word or number: "1000" is not in "10005"
        pattern = re.compile(rf"(?<![\w.]){re.escape(text)}(?![\w]|\.\d)")
        if any(pattern.search(m["content"]) for m in messages if m["role"] != "system"):
            problems.append(f"{where}: shows the gold {shorten(text, 60)}")
            return
