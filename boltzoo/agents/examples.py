"""Bundled framework agents for every env and agent: the runnable examples of the docs, and what
``boltzoo eval <env> --policy autogen|openai-agents|langgraph`` runs; and the paper's SQL agent
as one LangGraph graph trained node by node (``--policy langgraph-sql-graph``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

from boltzoo.agents.frameworks import NodeGraph
from boltzoo.errors import MissingDependencyError
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


class SQLGraphState(TypedDict, total=False):
    """The state of :func:`langgraph_sql_graph`'s graph."""

    messages: list[Any]  # in: the task as one user message; out: the answer appended
    task: str  # the schema and the question
    query: str  # the latest query
    result: str  # its execution result, as the env shows it
    feedback: str  # the checker's reason when it rejects
    accepted: bool
    rounds: int  # check/rewrite rounds done


SQL_GRAPH_NODES = ("writer", "checker", "rewriter")


def langgraph_sql_graph(env_id: str, agent: str, max_rounds: int = 2) -> NodeGraph:
    """Return the paper's text-to-SQL agent as one LangGraph ``StateGraph`` for sql-v0's
    single-agent variant (``agents=("writer",)``): write_query -> execute (the env's SQL tool)
    -> check_query -> (rejected: rewrite_query -> execute -> check_query, at most
    ``max_rounds`` rewrites) -> answer (the final query in a ```` ```sql ```` block, the env
    action). As in the env, the last round's rewrite goes straight to answer: no verdict on it
    could change the outcome. The nodes that call the model are ``writer``, ``checker`` and
    ``rewriter``, each with sql-v0's default prompt and message for that role, so a model
    warm-started on the env plays the graph as it played the env (an env's ``prompts=``
    override does not reach the graph: the graph's prompts are its own)."""
    if max_rounds < 0:
        raise ValueError(f"max_rounds must be 0 or more, got {max_rounds}")
    if resolve_env_id(env_id) != "boltzoo/sql-v0" or agent != "writer":
        raise ValueError(
            f"langgraph-sql-graph is sql-v0's whole workflow in one graph: it plays sql-v0's "
            f"writer with agents=['writer'] (-e 'agents=[\"writer\"]'), not {agent!r} of {env_id}"
        )
    try:
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        from langgraph.graph import END, START, StateGraph
    except ImportError:
        raise MissingDependencyError(
            "langgraph-sql-graph needs langgraph: pip install 'boltzoo[agents]'"
        ) from None

    from boltzoo.envs.protocol import extract_sql, parse_verdict
    from boltzoo.envs.sql_v0 import (
        CHECKER_SYSTEM_PROMPT,
        REWRITER_SYSTEM_PROMPT,
        WRITER_SYSTEM_PROMPT,
    )

    def query_block(state: SQLGraphState) -> str:
        return f"Query:\n```sql\n{state['query']}\n```\n\nResult:\n{state['result']}"

    def build(models: dict[str, Any], tools: list[Any]) -> Any:
        execute_sql = {tool.name: tool for tool in tools}["execute_sql"]

        async def ask(node: str, system: str, user: str) -> str:
            reply = await models[node].ainvoke([SystemMessage(system), HumanMessage(user)])
            return str(reply.content)

        async def write_query(state: SQLGraphState) -> dict[str, Any]:
            task = state["messages"][-1]
            task = task["content"] if isinstance(task, dict) else task.content
            sql = extract_sql(await ask("writer", WRITER_SYSTEM_PROMPT, task))
            return {"task": task, "query": sql, "rounds": 0}

        async def execute(state: SQLGraphState) -> dict[str, Any]:
            return {"result": await execute_sql.ainvoke({"query": state["query"]})}

        async def check_query(state: SQLGraphState) -> dict[str, Any]:
            verdict = await ask(
                "checker", CHECKER_SYSTEM_PROMPT, f"{state['task']}\n\n{query_block(state)}"
            )
            accepted, feedback = parse_verdict(verdict)
            return {"accepted": accepted, "feedback": feedback}

        async def rewrite_query(state: SQLGraphState) -> dict[str, Any]:
            feedback = state.get("feedback") or "the query is wrong."
            user = f"{state['task']}\n\n{query_block(state)}\n\nReviewer's feedback: {feedback}"
            sql = extract_sql(await ask("rewriter", REWRITER_SYSTEM_PROMPT, user))
            return {"query": sql, "rounds": state["rounds"] + 1}

        def answer(state: SQLGraphState) -> dict[str, Any]:
            final = AIMessage(f"```sql\n{state['query']}\n```")
            return {"messages": [*state["messages"], final]}

        def after_check(state: SQLGraphState) -> str:
            return "answer" if state["accepted"] else "rewrite_query"

        def after_query(state: SQLGraphState) -> str:
            # a query after the last round is final whatever a check would say: running and
            # checking it would cost a model call that decides nothing
            return "answer" if state["rounds"] >= max_rounds else "execute"

        graph = StateGraph(SQLGraphState)
        for node in (write_query, execute, check_query, rewrite_query, answer):
            graph.add_node(node.__name__, node)
        graph.add_edge(START, "write_query")
        graph.add_conditional_edges("write_query", after_query, ["answer", "execute"])
        graph.add_edge("execute", "check_query")
        graph.add_conditional_edges("check_query", after_check, ["answer", "rewrite_query"])
        graph.add_conditional_edges("rewrite_query", after_query, ["answer", "execute"])
        graph.add_edge("answer", END)
        return graph.compile(name="sql_agent")

    build.__name__ = "langgraph_sql_graph"
    # write, execute, check; rewrite, execute, check per round; answer (and one to spare)
    return NodeGraph(build, SQL_GRAPH_NODES, recursion_limit=5 + 3 * max_rounds)


# framework name -> the bundled agent builder, ``(env_id, agent) -> build_agent``
EXAMPLES = {
    "autogen": autogen_assistant,
    "openai-agents": openai_agents_assistant,
    "langgraph": langgraph_react_agent,
    "langgraph-sql-graph": langgraph_sql_graph,
}
# the bundled graphs that play a whole workflow node by node (their builders are NodeGraphs)
GRAPHS = ("langgraph-sql-graph",)
