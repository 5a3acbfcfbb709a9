"""AutoGen, OpenAI Agents SDK and LangGraph agents as env policies, with almost no change to the
agent.

You write the agent as you normally would, as a function of the model and the tools::

    def solver(model_client, tools):          # AutoGen
        return AssistantAgent("solver", model_client=model_client, tools=tools,
                              reflect_on_tool_use=True, system_message="...")

    policy = AutoGenPolicy(solver, gateway)   # gateway = Gateway(load_policy("smollm2-135m"))

For each turn, boltzoo builds the agent with a model client (AutoGen) or model object (Agents
SDK) whose base URL is a gateway session of its own, and with the env's tools (the calculator,
SQL execution, search) as framework tools, so tool calls run in the env's sandbox and count in
its tool status and spans. The observation's conversation is the agent's task; its final message
is the action. Every LLM call the agent made (tool loops included) comes back from the gateway's
record, with its token ids, as the action's ``inner_calls``: what LightningRL learns from.

A batch of turns runs concurrently in one event loop, so the gateway batches their calls.

A LangGraph graph can also play one env agent as several nodes, each calling the model as itself
(the paper's SQL agent: write, check, rewrite): ``LangGraphPolicy(NodeGraph(build, nodes),
gateway)``, where ``build(models, tools)`` gets one chat model per node. Each node's calls are
recorded under its name (``Completion.node``), and LightningRL trains node names as agents:
``train_agents`` and ``policy_map`` select and map nodes, and a node that is not trained is
served by the frozen initial model (``node_gateways``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from boltzoo.agents.base import Turn
from boltzoo.agents.gateway import Gateway, RecordedCall, open_linked_session
from boltzoo.envs.base import ToolSpec
from boltzoo.episode import Completion
from boltzoo.errors import MissingDependencyError

_AGENTS_EXTRA = "pip install 'boltzoo[agents]'"


def task_text(observation: dict[str, Any]) -> str:
    """Return the observation's conversation as a framework agent's task.

    The env's own system prompt (written for text agents: tool syntax, answer format) is left
    out, since the framework agent has its own. A single user message is passed as it is; a
    longer conversation as ``role: content`` blocks.
    """
    messages = [m for m in observation["messages"] if m["role"] != "system"]
    if len(messages) == 1:
        return messages[0]["content"]
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)


class _FrameworkPolicy:
    """What both adapters share: sessions on the gateway, env tools, concurrent turns."""

    framework = ""

    def __init__(
        self, build_agent: Callable[..., Any], gateway: Gateway, max_concurrency: int = 64
    ):
        self.build_agent = build_agent
        self.gateway = gateway
        self.max_concurrency = max_concurrency

    @property
    def version(self) -> int | None:
        """The version of the weights behind the gateway (its policy owns it)."""
        return getattr(self.gateway.policy, "version", None)

    def act(self, turns: Sequence[Turn]) -> list[Completion]:
        """Return one Completion per turn: the agent's final message, with its LLM calls."""
        return asyncio.run(self._act_all(turns))

    async def _act_all(self, turns: Sequence[Turn]) -> list[Completion]:
        limit = asyncio.Semaphore(self.max_concurrency)

        async def one(turn: Turn) -> Completion:
            async with limit:
                return await self._act_one(turn)

        return list(await asyncio.gather(*(one(turn) for turn in turns)))

    def _gateways(self) -> list[Gateway]:
        """Return every gateway this agent's calls go through."""
        return [self.gateway]

    def _inner_call(self, call: RecordedCall) -> Completion:
        return call.completion

    async def _act_one(self, turn: Turn) -> Completion:
        episode = getattr(getattr(turn.env, "episode", None), "episode_id", "episode")
        session = f"{episode}-{turn.agent}-{uuid.uuid4().hex[:8]}"
        specs = list(getattr(turn.env, "tools", ()))
        # one session on all its gateways (the policy behind each sees the turn's env), so each
        # gateway knows when this run waits on another and its batch need not wait for it
        open_linked_session(self._gateways(), session, env=turn.env)
        try:
            text = await self._run(session, specs, turn, task_text(turn.observation))
        finally:
            # in the order they were answered (one gateway's record is in that order already)
            calls = sorted(
                (call for gateway in self._gateways() for call in gateway.close_session(session)),
                key=lambda call: call.created,
            )
        return Completion(
            text=text,
            inner_calls=[self._inner_call(call) for call in calls],
            model=f"{self.framework}:{self.gateway.model_name}",
            policy_version=self.version,
            finish_reason="stop",
            agent_answer=True,
        )

    async def _run(self, session: str, specs: list[ToolSpec], turn: Turn, task: str) -> str:
        """Run the agent on ``task`` with its model calls in gateway session ``session``;
        return its final message."""
        raise NotImplementedError

    def __repr__(self) -> str:
        name = getattr(self.build_agent, "__name__", "agent")
        return f"{type(self).__name__}({name})"


def _tool_function(turn: Turn, spec: ToolSpec) -> Callable[..., str]:
    """Return a plain typed function that runs ``spec`` in the turn's env (for AutoGen)."""
    names = list(spec.parameters.get("properties", {}))

    def call(**arguments: str) -> str:
        return turn.env.call_tool(turn.agent, spec.name, arguments)

    parameters = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str) for n in names
    ]
    call.__signature__ = inspect.Signature(parameters, return_annotation=str)  # type: ignore[attr-defined]
    call.__annotations__ = {n: str for n in names} | {"return": str}
    call.__name__ = spec.name
    call.__doc__ = spec.description
    return call


class AutoGenPolicy(_FrameworkPolicy):
    """An ``autogen_agentchat`` agent as a policy.

    Args:
        build_agent: ``(model_client, tools) -> agent``; ``model_client`` is an
            ``OpenAIChatCompletionClient`` pointing at the gateway, ``tools`` the env's tools as
            AutoGen ``FunctionTool``s. Give the tools to the agent as usual.
        gateway: the gateway (started) in front of the model that trains.
    """

    framework = "autogen"

    async def _run(self, session: str, specs: list[ToolSpec], turn: Turn, task: str) -> str:
        try:
            from autogen_core.tools import FunctionTool
            from autogen_ext.models.openai import OpenAIChatCompletionClient
        except ImportError:
            raise MissingDependencyError(f"AutoGenPolicy needs AutoGen: {_AGENTS_EXTRA}") from None
        client = OpenAIChatCompletionClient(
            model=self.gateway.model_name,
            base_url=self.gateway.session_url(session, turn.agent),
            api_key=self.gateway.api_key or "boltzoo",
            model_info={
                "vision": False,
                "function_calling": True,
                "json_output": False,
                "structured_output": False,
                "family": "unknown",
            },
        )
        tools = [
            FunctionTool(_tool_function(turn, spec), description=spec.description, name=spec.name)
            for spec in specs
        ]
        try:
            agent = self.build_agent(client, tools)
            result = await agent.run(task=task)
        finally:
            await client.close()
        final = result.messages[-1]
        return final.to_text() if hasattr(final, "to_text") else str(final.content)


class OpenAIAgentsPolicy(_FrameworkPolicy):
    """An OpenAI Agents SDK ``Agent`` as a policy.

    Args:
        build_agent: ``(model, tools) -> Agent``; ``model`` is an ``OpenAIChatCompletionsModel``
            over the gateway, ``tools`` the env's tools as SDK ``FunctionTool``s.
        gateway: the gateway (started) in front of the model that trains.
        max_turns: the SDK's limit on model calls per run.
    """

    framework = "openai-agents"

    def __init__(
        self,
        build_agent: Callable[..., Any],
        gateway: Gateway,
        max_concurrency: int = 64,
        max_turns: int = 10,
    ):
        super().__init__(build_agent, gateway, max_concurrency)
        self.max_turns = max_turns

    async def _run(self, session: str, specs: list[ToolSpec], turn: Turn, task: str) -> str:
        try:
            from agents import (
                FunctionTool,
                OpenAIChatCompletionsModel,
                Runner,
                set_tracing_disabled,
            )
            from openai import AsyncOpenAI
        except ImportError:
            raise MissingDependencyError(
                f"OpenAIAgentsPolicy needs the OpenAI Agents SDK: {_AGENTS_EXTRA}"
            ) from None
        set_tracing_disabled(True)  # the SDK would send its traces to OpenAI; ours are OTel
        client = AsyncOpenAI(
            base_url=self.gateway.session_url(session, turn.agent),
            api_key=self.gateway.api_key or "boltzoo",
        )

        def tool(spec: ToolSpec) -> Any:
            async def invoke(context: Any, arguments: str) -> str:
                try:
                    parsed = json.loads(arguments or "{}")
                except json.JSONDecodeError:
                    return f"error: the arguments are not JSON: {arguments[:200]}"
                return turn.env.call_tool(turn.agent, spec.name, parsed)

            return FunctionTool(
                name=spec.name,
                description=spec.description,
                params_json_schema=spec.parameters,
                on_invoke_tool=invoke,
            )

        model = OpenAIChatCompletionsModel(model=self.gateway.model_name, openai_client=client)
        try:
            agent = self.build_agent(model, [tool(spec) for spec in specs])
            result = await Runner.run(agent, task, max_turns=self.max_turns)
        finally:
            await client.close()
        return str(result.final_output)


@dataclass(frozen=True)
class NodeGraph:
    """A graph that plays one env agent as several nodes, each calling the model as itself.

    Args:
        build: ``(models, tools) -> graph``; ``models`` maps each node name to its chat model
            (a ``langchain_openai.ChatOpenAI`` whose calls are recorded under that name),
            ``tools`` are the env's tools as LangChain ``StructuredTool``s.
        nodes: the names of the nodes that call the model; LightningRL trains them as agents
            (letters, digits, ``_`` and ``-``: they go into the session URL).
        recursion_limit: the graph steps a run may take at most (LangGraph's
            ``recursion_limit``; the policy uses the larger of this and its own).
    """

    build: Callable[[dict[str, Any], list[Any]], Any]
    nodes: tuple[str, ...]
    recursion_limit: int = 12

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        if not self.nodes or len(set(self.nodes)) != len(self.nodes):
            raise ValueError(f"a NodeGraph needs distinct node names, got {self.nodes!r}")
        bad = [n for n in self.nodes if not re.fullmatch(r"[A-Za-z0-9_-]+", n)]
        if bad:
            raise ValueError(f"node names {bad}: use letters, digits, '_' and '-' only")

    def __call__(self, models: dict[str, Any], tools: list[Any]) -> Any:
        return self.build(models, tools)

    @property
    def __name__(self) -> str:  # what LangGraphPolicy's repr shows
        return getattr(self.build, "__name__", "graph")


class LangGraphPolicy(_FrameworkPolicy):
    """A LangGraph graph (or any LangChain runnable over ``{"messages": [...]}``) as a policy for
    one agent of the env's team.

    Two ways to build it:

    * one model for the whole graph: ``build_agent(model, tools) -> graph``, ``model`` a
      ``langchain_openai.ChatOpenAI`` pointing at the agent's gateway session;
    * one model per node (a :class:`NodeGraph`, or ``nodes=`` given):
      ``build_agent(models, tools)``, ``models[node]`` pointing at a session URL that names the
      node, so every call is recorded (``Completion.node``) and trained under the node's name.

    ``tools`` are the env's tools as LangChain ``StructuredTool``s. The graph is invoked with the
    task as its one user message; the content of the last message it returns is the action.

    Args:
        build_agent: the builder (see above).
        gateway: the gateway (started) in front of the model.
        recursion_limit: LangGraph's limit on graph steps per run.
        nodes: the node names, when ``build_agent`` is a plain function taking ``models``.
        node_gateways: node -> the gateway that serves it, for nodes not served by ``gateway``
            (a trainer serves each node with its own policy, or the frozen initial model).
    """

    framework = "langgraph"

    def __init__(
        self,
        build_agent: Callable[..., Any],
        gateway: Gateway,
        max_concurrency: int = 64,
        recursion_limit: int = 12,
        nodes: Sequence[str] | None = None,
        node_gateways: Mapping[str, Gateway] | None = None,
    ):
        super().__init__(build_agent, gateway, max_concurrency)
        self.recursion_limit = max(recursion_limit, getattr(build_agent, "recursion_limit", 0))
        self.nodes = tuple(nodes if nodes is not None else getattr(build_agent, "nodes", ()))
        self.node_gateways = dict(node_gateways or {})
        unknown = set(self.node_gateways) - set(self.nodes)
        if unknown:
            raise ValueError(f"node_gateways names nodes {sorted(unknown)} not in {self.nodes}")

    def _gateways(self) -> list[Gateway]:
        distinct = {id(g): g for g in [self.gateway, *self.node_gateways.values()]}
        return list(distinct.values())

    def _inner_call(self, call: RecordedCall) -> Completion:
        if not self.nodes:
            return call.completion
        return dataclasses.replace(call.completion, node=call.agent)

    def _chat_model(self, gateway: Gateway, session: str, agent: str, http: Any) -> Any:
        try:
            from langchain_openai import ChatOpenAI
        except ImportError:
            raise MissingDependencyError(
                f"LangGraphPolicy needs langchain-openai and langgraph: {_AGENTS_EXTRA}"
            ) from None
        return ChatOpenAI(
            model=gateway.model_name,
            base_url=gateway.session_url(session, agent),
            api_key=gateway.api_key or "boltzoo",
            max_retries=0,  # a refused call is an answer to learn from, not to repeat
            http_async_client=http,
        )

    async def _run(self, session: str, specs: list[ToolSpec], turn: Turn, task: str) -> str:
        try:
            from langchain_core.tools import StructuredTool
            from openai import DefaultAsyncHttpxClient
        except ImportError:
            raise MissingDependencyError(
                f"LangGraphPolicy needs langchain-openai and langgraph: {_AGENTS_EXTRA}"
            ) from None

        def tool(spec: ToolSpec) -> Any:
            def invoke(**arguments: Any) -> str:
                return turn.env.call_tool(turn.agent, spec.name, arguments)

            return StructuredTool.from_function(
                func=invoke,
                name=spec.name,
                description=spec.description,
                args_schema=spec.parameters,  # a JSON schema
            )

        tools = [tool(spec) for spec in specs]
        # one HTTP client for the run, closed with it (ChatOpenAI's own would be closed by the
        # garbage collector after the turns' event loop is gone, logging an error each)
        http = DefaultAsyncHttpxClient()
        try:
            if self.nodes:
                models = {
                    node: self._chat_model(
                        self.node_gateways.get(node, self.gateway), session, node, http
                    )
                    for node in self.nodes
                }
                graph = self.build_agent(models, tools)
            else:
                model = self._chat_model(self.gateway, session, turn.agent, http)
                graph = self.build_agent(model, tools)
            result = await graph.ainvoke(
                {"messages": [{"role": "user", "content": task}]},
                config={"recursion_limit": self.recursion_limit},
            )
        finally:
            await http.aclose()
        final = result["messages"][-1] if isinstance(result, dict) else result
        content = getattr(final, "content", final)
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return str(content)


# framework name -> its policy class, ``(build_agent, gateway) -> policy``
ADAPTERS: dict[str, type[_FrameworkPolicy]] = {
    "autogen": AutoGenPolicy,
    "openai-agents": OpenAIAgentsPolicy,
    "langgraph": LangGraphPolicy,
    "langgraph-sql-graph": LangGraphPolicy,  # the bundled graph of sql-v0's whole workflow
}
