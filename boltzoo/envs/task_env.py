r"""TaskEnv: an env from rows of tasks, reward functions and tools, with no subclass.

| | |
|---|---|
| Creation | ``TaskEnv(tasks="my.jsonl", prompt="{question}", reward=correct)``, or registered |
| Agents | ``agent`` (or the ``agents=`` you name: a pipeline, each in turn) |
| API | AEC (turn by turn) |
| Action | text (``str`` or ``Completion``) |
| Observation | ``{"agent", "task_id", "messages"}``: the chat of the agent's next LLM call |

The shortest way to train an agent on your own task: rows of data (a JSONL file, a list of
dicts, or ``{"train": ..., "test": ...}``), a prompt template over their fields, and reward
functions, as TRL's ``reward_funcs`` and verifiers' rubrics take them::

    def correct(parsed, answer):            # `answer`: the row's field; `parsed`: the model's
        return float(parsed == answer)

    env = TaskEnv(tasks={"train": "train.jsonl", "test": "test.jsonl"},
                  prompt="Convert: {question}", reward=correct, parser=extract_final_answer)
    boltzoo.register("myorg/units-v0", entry_point="my_pkg.envs:make_env")

## Turns and tools

Each agent sees a system message (``system=``, plus a generated description of the tools) and
the task's prompt; a later agent of a pipeline also sees what the one before it answered
(``{previous}`` in its prompt template). ``tools={"convert": convert}`` offers plain Python
functions: their JSON schema comes from the type hints (``str``, ``int``, ``float``, ``bool``)
and the docstring (its first paragraph, and ``name: description`` lines under ``Args:``).

* A plain policy calls a tool by writing ``<NAME>ARGUMENT</NAME>`` in its text (a tool of one
  parameter takes the text itself, ``<calc>2+3</calc>``; a tool of several takes a JSON object,
  ``<convert>{"value": 3, "unit": "km"}</convert>``). Every call in the text is run and the
  results come back as one ``tool`` message (``<convert>...</convert> = OUTPUT``); the agent then
  acts again.
* Framework agents and agent programs get the same tools as ``ToolSpec`` s (function calling,
  the rollout URL, MCP), run through ``call_tool``.
* A tool that raises returns ``error: ...`` to the agent and the episode goes on; so does a call
  with bad arguments. Tools are your code, run in this process.

A turn without tool calls is the agent's answer: the next agent of the pipeline acts, or after
the last one the episode ends and is judged. Past ``max_turns`` it is truncated, score 0.

## Rewards and infos

Every reward function is called with the named arguments it asks for, from: the task row's
fields (``answer``, ``question``, ...: whatever the rows hold), ``completion`` (the last
agent's answer text), ``parsed`` (``parser(completion)``; the text itself without a parser),
``task`` (the whole row), ``tool_calls`` (every call of the episode: ``{"agent", "name",
"arguments", "output", "ok"}``) and ``transcript`` (``[(speaker, text), ...]``). A function
asking for anything else is an error when the env is made; one that returns anything but a
finite number is an error at that call (the episode fails with it, never scored 0).

The reward is ``sum(weight * fn(...))`` (weights default 1), paid to every agent at the end;
``score`` is the reward clipped to [0, 1] and ``success`` is ``reward >= success_at`` (default
1.0). ``infos`` hold ``rewards`` (each function's value, by name), ``parsed`` and
``tool_calls`` (a count) at the end.

## Splits, oracle, ids

Splits are explicit: one file or list of rows is the ``"train"`` split only, a mapping names
its splits, and ``test_size`` (a fraction, or a count out of 100 as an int) holds a fixed part
of one source out as ``"test"`` (chosen by a hash of each task's id, never by row order).
``oracle="solution"`` names a row field holding the demonstration: a text (the answer), or a
list of texts, one per turn of the episode (tool calls first, then the answer), played by
``--policy oracle`` (warm-start demonstrations: ``boltzoo rollout --policy oracle``). A row's
id is its ``id_field`` (default ``"id"``), else its index in the split.

## Arguments

``tasks``, ``prompt`` (a template, ``{field}`` for row fields and ``{{`` for a brace, or a
callable ``row -> str``; a dict by agent for a pipeline), ``reward`` (a function or a list),
``weights``, ``tools`` (a dict ``name -> function`` or a list of functions), ``parser``,
``system`` (a str, or a dict by agent), ``agents`` (default ``("agent",)``), ``max_turns``
(default: 1 per agent, 4 per agent with tools), ``success_at``, ``oracle``, ``split``,
``test_size``, ``id_field``, ``gold`` (default ``("answer",)``: the row fields no agent may
see; a prompt template naming one is an error, and ``check_env`` looks for their values in what
agents see), ``tool_instructions`` (default True: describe the tools and their
tag syntax after the system message), ``max_tool_output_chars`` (default 2,000),
``tool_reward``, ``tool_reward_on_success``, ``prompts``, ``render_mode``, ``max_action_chars``.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import re
import string
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from boltzoo.envs.base import DEFAULT_MAX_ACTION_CHARS, LLMTurnEnv, ToolSpec
from boltzoo.envs.data.files import hash_split, located_rows, split_source
from boltzoo.envs.protocol import tagged_calls
from boltzoo.errors import BoltzooError, DatasetError, shorten

AGENT = "agent"
# What a reward function may ask for besides the row's fields (these win over a field's name).
EPISODE_ARGUMENTS = ("completion", "parsed", "task", "tool_calls", "transcript")
_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?")


class RewardFunctionError(BoltzooError, TypeError):
    """A reward function that asks for an argument no task gives, or returns no number."""


@dataclass(frozen=True)
class Task:
    """One row of a TaskEnv: its id and its fields (also readable as attributes: ``task.level``,
    which is what ``--by`` and curricula group by)."""

    task_id: str
    row: Mapping[str, Any] = field(compare=False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "row":  # copy and pickle probe before row is set
            raise AttributeError(name)
        try:
            return self.row[name]
        except KeyError:
            raise AttributeError(f"task {self.task_id!r} has no field {name!r}") from None


@dataclass(frozen=True)
class FunctionTool:
    """A plain Python function offered as a tool: its spec (schema from its type hints) and the
    parameter types its arguments are converted to."""

    spec: ToolSpec
    function: Callable[..., Any]
    types: Mapping[str, type]

    @classmethod
    def of(cls, name: str, function: Callable[..., Any]) -> FunctionTool:
        """Return ``function`` as the tool ``name``; its schema from its hints and docstring."""
        if not callable(function):
            raise TypeError(f"the tool {name!r} must be a function, got {shorten(function)}")
        if not _TOOL_NAME.fullmatch(name):
            raise ValueError(
                f"tool name {shorten(name)}: use letters, digits, '_' and '-' (up to 64, a "
                "letter or '_' first): it is a tag for plain policies and a function name for "
                "the others (a lambda needs tools={'name': fn})"
            )
        try:  # a partial or a callable object: its function's hints
            hints = typing.get_type_hints(
                getattr(function, "func", None)
                or (function if inspect.isroutine(function) else type(function).__call__)
            )
        except Exception as error:  # an annotation that names what cannot be imported
            raise TypeError(f"tool {name!r}: its type hints do not resolve ({error})") from None
        doc = inspect.getdoc(function) or ""
        described = dict(re.findall(r"^\s+(\w+)(?: \([^)]*\))?: (.+)$", doc, re.M))
        properties, required, kinds = {}, [], {}
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            if parameter.kind is parameter.POSITIONAL_ONLY:
                raise TypeError(
                    f"tool {name!r}: parameter {parameter.name!r} is positional-only; a tool's "
                    "arguments are given by name"
                )
            kind = _plain_type(hints.get(parameter.name, str), f"tool {name!r}", parameter.name)
            kinds[parameter.name] = kind
            properties[parameter.name] = {"type": _JSON_TYPES[kind]}
            if parameter.name in described:
                properties[parameter.name]["description"] = described[parameter.name]
            if parameter.default is parameter.empty:
                required.append(parameter.name)
        summary = " ".join(doc.split("\n\n")[0].split()) or f"the tool {name}"
        parameters = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }
        return cls(ToolSpec(name, summary, parameters), function, kinds)

    def call(self, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """Run the tool; return its output as text and whether it ran without error."""
        required = self.spec.parameters["required"]
        unknown = sorted(set(arguments) - set(self.types))
        missing = [p for p in required if p not in arguments]
        if unknown or missing:
            return f"error: {self.spec.name} takes {self.signature()}", False
        try:
            values = {
                k: None if v is None and k not in required else _convert(v, self.types[k])
                for k, v in arguments.items()
            }
        except (TypeError, ValueError) as error:
            return f"error: {self.spec.name}: {error}", False
        try:
            result = self.function(**values)
        except Exception as error:  # the tool's own bug or refusal: the agent reads it
            return f"error: {type(error).__name__}: {error}", False
        if not isinstance(result, str):
            try:
                result = json.dumps(result, ensure_ascii=False)
            except (TypeError, ValueError):
                result = str(result)
        return result, True

    def call_text(self, text: str) -> tuple[str, bool]:
        """Run the tool on what a plain policy wrote between its tags."""
        if text.startswith("{"):
            try:
                arguments = json.loads(text)
            except json.JSONDecodeError:
                arguments = None
            if isinstance(arguments, dict):
                return self.call(arguments)
        if len(self.types) == 1:
            return self.call({next(iter(self.types)): text})
        if not self.types and not text:
            return self.call({})
        return f"error: {self.spec.name} takes a JSON object: {self.signature()}", False

    def signature(self) -> str:
        """Return the tool's arguments as a JSON-like template, for messages and prompts."""
        fields = ", ".join(f'"{n}": {_JSON_TYPES[t]}' for n, t in self.types.items())
        return "{" + fields + "}"


def _plain_type(hint: Any, owner: str, name: str) -> type:
    """Return the plain type a tool parameter takes (``X | None`` is ``X``)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = options[0] if len(options) == 1 else hint
    if hint not in _JSON_TYPES:
        raise TypeError(
            f"{owner}: parameter {name!r} is {hint!r}; a tool takes str, int, float or bool"
        )
    return hint


def _convert(value: Any, kind: type) -> Any:
    """Return ``value`` as ``kind`` (text from a tag becomes a number; a bool stays a bool)."""
    if kind is str:
        return value if isinstance(value, str) else json.dumps(value)
    if kind is bool:
        if isinstance(value, bool):
            return value
        if str(value).strip().lower() in ("true", "false"):
            return str(value).strip().lower() == "true"
        raise ValueError(f"expected true or false, got {shorten(value, 40)}")
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"expected a number, got {shorten(value, 40)}")
    if isinstance(value, str):
        text = value.strip()
        if _THOUSANDS.fullmatch(text):  # 1,250 but not 2,5 (a decimal comma is not ours to read)
            text = text.replace(",", "")
        try:
            value = float(text) if kind is float or not text.lstrip("+-").isdigit() else int(text)
        except ValueError:
            raise ValueError(f"expected a number, got {shorten(value, 40)}") from None
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    if kind is int:
        if value != int(value):
            raise ValueError(f"expected a whole number, got {value}")
        return int(value)
    return float(value)


@dataclass(frozen=True)
class RewardFunction:
    """One reward function, the names it asks for, and its weight."""

    function: Callable[..., Any]
    weight: float
    asks: tuple[str, ...] | None  # None: it takes **kwargs, and gets everything

    @property
    def name(self) -> str:
        """The function's name (its value's key in ``infos["rewards"]``)."""
        return getattr(self.function, "__name__", type(self.function).__name__)

    @classmethod
    def of(cls, function: Callable[..., Any], weight: float, fields: set[str]) -> RewardFunction:
        """Check ``function``'s parameters against what a task gives; raise if it asks more."""
        if not callable(function):
            raise RewardFunctionError(
                f"a reward function must be callable, got {shorten(function)}"
            )
        name = getattr(function, "__name__", repr(function))
        asks, takes_all = [], False
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind is parameter.VAR_KEYWORD:
                takes_all = True
            elif parameter.kind in (parameter.POSITIONAL_ONLY, parameter.VAR_POSITIONAL):
                raise RewardFunctionError(
                    f"reward function {name!r}: its arguments are given by name; "
                    f"{parameter.name!r} cannot be"
                )
            elif parameter.name in fields or parameter.name in EPISODE_ARGUMENTS:
                asks.append(parameter.name)
            elif parameter.default is parameter.empty:
                raise RewardFunctionError(
                    f"reward function {name!r} asks for {parameter.name!r}, which no task gives; "
                    f"it may ask for {', '.join(EPISODE_ARGUMENTS)} or a field every row has "
                    f"({', '.join(sorted(fields)) or 'none'})"
                )
        if not math.isfinite(weight):
            raise RewardFunctionError(f"reward function {name!r}: weight {weight} is not finite")
        return cls(function, float(weight), None if takes_all else tuple(asks))

    def __call__(self, arguments: Mapping[str, Any]) -> float:
        """Return the function's value on ``arguments`` (only those it asks for)."""
        given = arguments if self.asks is None else {k: arguments[k] for k in self.asks}
        try:
            value = self.function(**given)
        except Exception as error:  # the user's bug: the episode fails, saying where
            raise RewardFunctionError(
                f"reward function {self.name!r} raised {type(error).__name__}: {error}"
            ) from error
        try:  # numbers, numpy scalars and one-element tensors
            if isinstance(value, str | bytes) or value is None:
                raise TypeError
            value = float(value)
        except (TypeError, ValueError):
            raise RewardFunctionError(
                f"reward function {self.name!r} returned {shorten(value, 60)}, not a number"
            ) from None
        if not math.isfinite(value):
            raise RewardFunctionError(f"reward function {self.name!r} returned {value}")
        return value


def _fields_of(template: Any) -> set[str]:
    """Return the row fields a prompt template names (none for a callable)."""
    if not isinstance(template, str):
        return set()
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name}
        return {re.split(r"[.\[]", name)[0] for name in names}  # {answer[0]} names answer
    except ValueError as error:
        raise ValueError(
            f"prompt template {shorten(template, 60)}: {error} (write {{{{ for a literal brace)"
        ) from None


class TaskEnv(LLMTurnEnv):
    """An env from rows of tasks, reward functions and tools (see the module's docs)."""

    metadata = {"render_modes": ["ansi", "human"], "name": "task_env", "is_parallelizable": False}
    env_id = "task-env"  # make() of a registered TaskEnv sets its id

    def __init__(
        self,
        *,
        tasks: Any,
        reward: Callable[..., Any] | Sequence[Callable[..., Any]],
        prompt: str | Callable[[Mapping[str, Any]], str] | Mapping[str, Any] = "{question}",
        weights: Sequence[float] | None = None,
        tools: Mapping[str, Callable[..., Any]] | Sequence[Callable[..., Any]] | None = None,
        parser: Callable[[str], Any] | None = None,
        system: str | Mapping[str, str] = "",
        agents: Sequence[str] = (AGENT,),
        max_turns: int | None = None,
        success_at: float = 1.0,
        oracle: str | Callable[[Mapping[str, Any]], str | Sequence[str]] | None = None,
        split: str | None = "train",
        test_size: float | int | None = None,
        id_field: str = "id",
        gold: Sequence[str] = ("answer",),
        tool_instructions: bool = True,
        max_tool_output_chars: int = 2000,
        tool_reward: float = 0.0,
        tool_reward_on_success: bool = False,
        prompts: Mapping[str, str] | None = None,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
    ):
        agents = (agents,) if isinstance(agents, str) else tuple(agents)
        if not agents or len(set(agents)) != len(agents):
            raise ValueError(f"agents must be distinct names, got {shorten(agents)}")
        if isinstance(tools, Mapping):
            named_tools = dict(tools)
        else:
            named_tools = {}
            for function in tools or ():
                name = getattr(function, "__name__", type(function).__name__)
                if name in named_tools:
                    raise ValueError(f"two tools are named {name!r}: give tools={{name: fn}}")
                named_tools[name] = function
        self.function_tools = {n: FunctionTool.of(n, f) for n, f in named_tools.items()}
        systems = dict(system) if isinstance(system, Mapping) else dict.fromkeys(agents, system)
        if set(systems) - set(agents):
            raise ValueError(f"system= names {sorted(set(systems) - set(agents))}, not agents")
        # instance values of what LLMTurnEnv reads from the class of a bundled env
        self.agent_variants = (agents,)
        self.tools = tuple(t.spec for t in self.function_tools.values())
        tool_text = self._tool_text(tool_instructions)
        self.default_prompts = {
            a: "\n\n".join(p for p in (systems.get(a, ""), tool_text) if p) for a in agents
        }
        if max_turns is None:
            max_turns = len(agents) * (4 if self.function_tools else 1)
        super().__init__(
            agents=agents,
            max_turns=max_turns,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            tool_reward=tool_reward,
            tool_reward_on_success=tool_reward_on_success,
            prompts=prompts,
        )
        if not math.isfinite(success_at):
            raise ValueError(f"success_at must be a finite number, got {success_at}")
        self.split = split or "train"
        self.success_at = float(success_at)
        self.parser = parser
        self.max_tool_output_chars = int(max_tool_output_chars)
        self.tasks: list[Task] = self._load(tasks, test_size, id_field)
        self.gold = (gold,) if isinstance(gold, str) else tuple(gold)
        self.templates = self._templates(prompt, agents)
        self.oracle = oracle

        if callable(reward):
            functions = [reward]
        elif isinstance(reward, Sequence) and not isinstance(reward, str):
            functions = list(reward)
        else:
            raise RewardFunctionError(
                f"reward= takes a function or a list of functions, got {shorten(reward)}"
            )
        if not functions:
            raise RewardFunctionError("TaskEnv needs at least one reward function")
        weights = [1.0] * len(functions) if weights is None else [float(w) for w in weights]
        if len(weights) != len(functions):
            raise RewardFunctionError(
                f"{len(weights)} weights for {len(functions)} reward functions"
            )
        fields = set.intersection(*(set(t.row) for t in self.tasks))
        self.reward_functions = [
            RewardFunction.of(f, w, fields) for f, w in zip(functions, weights, strict=True)
        ]
        # each function's value in infos["rewards"], under a name of its own
        names = [fn.name for fn in self.reward_functions]
        self.reward_names = [
            n if names.count(n) == 1 else f"{n}_{names[:i].count(n) + 1}"
            for i, n in enumerate(names)
        ]
        if oracle is not None and not callable(oracle) and oracle not in fields:
            raise DatasetError(f"oracle={oracle!r} is not a field of every row")

    # --- data ------------------------------------------------------------------------------

    def _load(self, source: Any, test_size: float | int | None, id_field: str) -> list[Task]:
        if test_size is not None:
            if isinstance(source, Mapping):
                raise DatasetError("test_size splits one file or list of rows, not a mapping")
            if isinstance(test_size, bool):
                raise DatasetError(f"test_size is a fraction or a count of 100, got {test_size}")
            out_of, test = (
                (100, int(test_size))
                if isinstance(test_size, int)
                else (1000, round(float(test_size) * 1000))
            )
            if not 0 < test < out_of:
                raise DatasetError(f"test_size must hold out part of the rows, got {test_size}")
            rows = located_rows(source, "TaskEnv tasks")
        else:
            rows = located_rows(split_source(source, self.split, "TaskEnv tasks="), "TaskEnv tasks")
        tasks, seen = [], set()
        for index, (where, row) in enumerate(rows):
            task_id = str(row.get(id_field, index))
            if task_id in seen:
                raise DatasetError(f"{where}: the id {task_id!r} is used twice")
            seen.add(task_id)
            tasks.append(Task(task_id, dict(row)))
        if test_size is not None:  # by the row's id, or its content: never by its place
            tasks = [
                t
                for t in tasks
                if hash_split(
                    str(t.row[id_field])
                    if id_field in t.row
                    else json.dumps(t.row, sort_keys=True, default=str),
                    test=test,
                    out_of=out_of,
                )
                == self.split
            ]
        if not tasks:
            raise DatasetError(f"TaskEnv: split {self.split!r} holds no tasks")
        return tasks

    def _templates(self, prompt: Any, agents: tuple[str, ...]) -> dict[str, Any]:
        """Return each agent's prompt template, checked against every row now."""
        templates = dict(prompt) if isinstance(prompt, Mapping) else dict.fromkeys(agents, prompt)
        for agent, template in templates.items():
            if not (isinstance(template, str) or callable(template)):
                raise TypeError(
                    f"the prompt of {agent!r} must be a template (str) or a function of the "
                    f"row, got {shorten(template)}"
                )
        missing = [a for a in agents if a not in templates]
        if missing:
            raise ValueError(f"prompt= has no template for the agents {missing}")
        for agent, template in templates.items():
            shown = _fields_of(template) & set(self.gold)
            if shown:
                raise ValueError(
                    f"the prompt of {agent!r} shows {sorted(shown)}, the gold (gold=): an agent "
                    "must not see the answer"
                )
        for agent in agents:
            for task in self.tasks:
                self._prompt_of(templates[agent], task, previous="")
        return templates

    @staticmethod
    def _prompt_of(template: Any, task: Task, previous: str) -> str:
        if callable(template):
            try:
                text = template(copy.deepcopy(dict(task.row)))
            except Exception as error:
                raise DatasetError(
                    f"task {task.task_id!r}: the prompt function raised "
                    f"{type(error).__name__}: {error}"
                ) from error
            if not isinstance(text, str):
                raise TypeError(f"the prompt function returned {shorten(text)}, not text")
            return text
        try:
            return template.format_map({**task.row, "previous": previous})
        except KeyError as error:
            raise DatasetError(
                f"task {task.task_id!r}: the prompt names {{{error.args[0]}}}, which the row "
                f"does not have (its fields: {', '.join(task.row)})"
            ) from None
        except (ValueError, IndexError) as error:
            raise ValueError(
                f"prompt template {shorten(template, 60)}: {error} (write {{{{ for a literal brace)"
            ) from None

    def _tool_text(self, wanted: bool) -> str:
        """Return the tool instructions appended to every system message."""
        if not (wanted and self.function_tools):
            return ""
        lines = ["You can use these tools. Write a call in your reply; the result comes back:"]
        for name, tool in self.function_tools.items():
            argument = next(iter(tool.types)) if len(tool.types) == 1 else tool.signature()
            lines.append(f"<{name}>{argument}</{name}>: {tool.spec.description}")
        lines.append("When you know the answer, reply with it and no tool call.")
        return "\n".join(lines)

    # --- episode ---------------------------------------------------------------------------

    def _start_episode(self) -> str:
        self._chats: dict[str, list[dict[str, str]]] = {}
        self._tool_calls: list[dict[str, Any]] = []
        return self._begin(self.possible_agents[0], previous="")

    def _begin(self, agent: str, previous: str) -> str:
        chat = [{"role": "system", "content": self.prompts[agent]}] if self.prompts[agent] else []
        prompt = self._prompt_of(self.templates[agent], self.current_task, previous)
        if previous and "{previous}" not in str(self.templates[agent]):
            prompt += f"\n\nThe previous agent answered:\n{previous}"
        chat.append({"role": "user", "content": prompt})
        self._chats[agent] = chat
        return agent

    def _messages(self, agent: str) -> list[dict[str, str]]:
        return self._chats.get(agent, [])

    def _play(self, agent: str, text: str) -> str | None:
        self._chats[agent].append({"role": "assistant", "content": text})
        found = sorted(
            (start, end, name, content)
            for name in self.function_tools
            for start, end, content in tagged_calls(text, name)
        )
        calls, covered = [], -1
        for start, end, name, content in found:
            if start >= covered:  # a call inside another call is that call's text, not a call
                calls.append((start, name, content))
                covered = end
        if calls:
            results = []
            for _, name, content in calls:
                output, ok = self._call(agent, name, content, from_text=True)
                results.append(f"<{name}>{content}</{name}> = {output}")
                self._pay_tool_reward(agent, int(ok))
            tool_text = "\n".join(results)
            self._chats[agent].append({"role": "tool", "content": tool_text})
            self.transcript.append(("tools", tool_text))
            return agent
        position = self.possible_agents.index(agent)
        if position + 1 < len(self.possible_agents):
            return self._begin(self.possible_agents[position + 1], previous=text)
        self._judge(text)
        return None

    def _call(self, agent: str, name: str, given: Any, *, from_text: bool) -> tuple[str, bool]:
        tool = self.function_tools[name]
        with self._tool_span(name, agent=agent) as span:
            output, ok = tool.call_text(given) if from_text else tool.call(given)
            if len(output) > self.max_tool_output_chars:
                output = output[: self.max_tool_output_chars] + " [cut]"
            span.set_attribute("boltzoo.ok", ok)
        self._tool_calls.append(
            {"agent": agent, "name": name, "arguments": given, "output": output, "ok": ok}
        )
        return output, ok

    def _run_tool(self, agent: str, name: str, arguments: dict[str, Any]) -> tuple[str, int]:
        output, ok = self._call(agent, name, arguments, from_text=False)
        return output, int(ok)

    def _judge(self, completion: str) -> None:
        try:
            parsed = self.parser(completion) if self.parser is not None else completion.strip()
        except Exception as error:
            raise RewardFunctionError(
                f"the parser raised {type(error).__name__}: {error}"
            ) from error
        row = copy.deepcopy(dict(self.current_task.row))  # a reward may change what it gets
        arguments = {
            **row,
            "completion": completion,
            "parsed": parsed,
            "task": copy.deepcopy(row),
            "tool_calls": list(self._tool_calls),
            "transcript": list(self.transcript),
        }
        values = [fn(arguments) for fn in self.reward_functions]
        reward = sum(fn.weight * v for fn, v in zip(self.reward_functions, values, strict=True))
        self._finish(
            score=min(1.0, max(0.0, reward)), success=reward >= self.success_at, reward=reward
        )
        for a in self.agents:
            self.infos[a].update(
                rewards=dict(zip(self.reward_names, values, strict=True)),
                parsed=parsed
                if isinstance(parsed, str | int | float | bool | None)
                else str(parsed),
                tool_calls=len(self._tool_calls),
            )

    # --- scripted policies and checks ------------------------------------------------------

    def oracle_action(self, agent: str) -> str:
        """Return the demonstration's action for this turn (``oracle=``: a row field holding a
        text, or a list of texts one per turn; or a callable of the row)."""
        if self.oracle is None:
            raise NotImplementedError("this TaskEnv has no oracle: give oracle='a row field'")
        actions = (
            self.oracle(copy.deepcopy(dict(self.current_task.row)))
            if callable(self.oracle)
            else (self.current_task.row[self.oracle])
        )
        if isinstance(actions, str):
            return actions
        actions = list(actions)
        if not actions:
            raise DatasetError(f"task {self.current_task.task_id!r}: the oracle's list is empty")
        turn = min(self.turn_count, len(actions) - 1)
        return str(actions[turn])

    def naive_action(self, agent: str) -> str:
        """Return a baseline action that reads nothing: an empty answer."""
        return ""

    def gold_texts(self) -> list[str]:
        """Return the current task's gold: its ``gold=`` fields (default ``answer``), which no
        agent may see before an agent or a tool has said it (check_env looks)."""
        row = self.current_task.row
        return [str(row[name]) for name in self.gold if name in row]
