"""Bundled framework agents for every env and agent: the runnable examples of the docs, and what
``boltzoo eval <env> --policy autogen|openai-agents`` runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from boltzoo.registration import resolve_env_id

# What each agent is told; the tools come from the env.
INSTRUCTIONS = {
    ("boltzoo/math-v0", "solver"): (
        "Solve the math word problem. Use the calculator tool for arithmetic. "
        "End with the final answer as \\boxed{NUMBER}."
    ),
    ("boltzoo/math-v0", "verifier"): (
        "Check the proposed solution. Reply 'VERDICT: CORRECT' or 'VERDICT: INCORRECT - reason'."
    ),
    ("boltzoo/sql-v0", "writer"): (
        "Write one SQLite query that answers the question. You may try queries with the "
        "execute_sql tool. Reply with the final query in a ```sql block."
    ),
    ("boltzoo/sql-v0", "checker"): (
        "Check whether the query answers the question. "
        "Reply 'VERDICT: CORRECT' or 'VERDICT: INCORRECT - what is wrong'."
    ),
    ("boltzoo/sql-v0", "rewriter"): (
        "Fix the query using the feedback. You may try queries with the execute_sql tool. "
        "Reply with the final query in a ```sql block."
    ),
    ("boltzoo/rag-v0", "searcher"): "Write one search query for the next fact you need.",
    ("boltzoo/rag-v0", "answerer"): (
        "Answer the question from the passages; use the search tool if a fact is missing. "
        "Reply with one line: 'Answer: <short answer>'."
    ),
}


def instructions(env_id: str, agent: str) -> str:
    """Return the bundled instructions for ``agent`` of ``env_id``."""
    return INSTRUCTIONS.get((resolve_env_id(env_id), agent), f"You are the {agent}.")


def autogen_assistant(env_id: str, agent: str) -> Callable[[Any, list[Any]], Any]:
    """Return ``(model_client, tools) -> AssistantAgent`` for ``agent`` of ``env_id``."""
    from autogen_agentchat.agents import AssistantAgent

    def build(model_client: Any, tools: list[Any]) -> Any:
        return AssistantAgent(
            agent,
            model_client=model_client,
            tools=tools,
            system_message=instructions(env_id, agent),
            reflect_on_tool_use=True,  # after a tool call, the model writes the final message
            max_tool_iterations=3,
        )

    build.__name__ = f"autogen_{agent}"
    return build


def openai_agents_assistant(env_id: str, agent: str) -> Callable[[Any, list[Any]], Any]:
    """Return ``(model, tools) -> Agent`` (OpenAI Agents SDK) for ``agent`` of ``env_id``."""
    from agents import Agent

    def build(model: Any, tools: list[Any]) -> Any:
        return Agent(name=agent, instructions=instructions(env_id, agent), model=model, tools=tools)

    build.__name__ = f"openai_agents_{agent}"
    return build


def langgraph_react_agent(env_id: str, agent: str) -> Callable[[Any, list[Any]], Any]:
    """Return ``(model, tools) -> graph``: a LangGraph ``StateGraph`` that loops model -> tools
    until the model answers without a tool call (the ReAct pattern), for ``agent`` of
    ``env_id``."""
    from langchain_core.messages import SystemMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    def build(model: Any, tools: list[Any]) -> Any:
        bound = model.bind_tools(tools) if tools else model
        system = SystemMessage(instructions(env_id, agent))

        async def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await bound.ainvoke([system, *state["messages"]])]}

        graph = StateGraph(MessagesState)
        graph.add_node("model", call_model)
        graph.add_edge(START, "model")
        if tools:
            graph.add_node("tools", ToolNode(tools))
            graph.add_conditional_edges("model", tools_condition)
            graph.add_edge("tools", "model")
        else:
            graph.add_edge("model", END)
        return graph.compile(name=agent)

    build.__name__ = f"langgraph_{agent}"
    return build


# framework name -> the bundled agent builder, ``(env_id, agent) -> build_agent``
EXAMPLES = {
    "autogen": autogen_assistant,
    "openai-agents": openai_agents_assistant,
    "langgraph": langgraph_react_agent,
}
