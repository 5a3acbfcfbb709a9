"""An agent program on the OpenAI SDK alone, with the env's tools as function tools.

    boltzoo eval sql-v0 --episodes 8 \\
        --agent-command "python examples/agent_programs/openai_tools.py"
    boltzoo eval math-v0 --episodes 8 \\
        --agent-command "python examples/agent_programs/openai_tools.py --mcp"

It plays any agent of any env: it reads its task and the env's tools from the rollout
(GET $BOLTZOO_ROLLOUT_URL), calls the model through the OpenAI SDK (OPENAI_BASE_URL and
OPENAI_API_KEY come from the environment), runs the tools the model calls through the rollout
(POST .../tools/NAME), or over MCP with --mcp (BOLTZOO_MCP_URL), and POSTs its final answer to
.../answer. The env runs each tool in its own sandbox and judges the answer. With --log FILE
it appends every reply it got from the model (token ids included) to FILE, one JSON per line.
"""

import argparse
import asyncio
import json
import os
import urllib.request

from openai import OpenAI

# the answer format each bundled env wants (the env's own system prompt, written for text tool
# syntax, is left out: this agent calls tools as functions)
ANSWER_FORMAT = {
    "boltzoo/math-v0": "End with the final answer as \\boxed{NUMBER}.",
    "boltzoo/sql-v0": "Reply with the final query in a ```sql block.",
    "boltzoo/rag-v0": "Reply with one line: 'Answer: <short answer>'.",
}


def rollout(path: str, body: dict | None = None) -> dict:
    """GET (or POST ``body`` to) one of this turn's rollout endpoints."""
    request = urllib.request.Request(
        os.environ["BOLTZOO_ROLLOUT_URL"] + path,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def mcp_tool(name: str, arguments: dict) -> str:
    """Run one tool over MCP (streamable HTTP)."""
    from mcp import Client

    async def call() -> str:
        async with Client(os.environ["BOLTZOO_MCP_URL"]) as client:
            result = await client.call_tool(name, arguments)
            return "".join(getattr(part, "text", "") for part in result.content)

    return asyncio.run(call())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mcp", action="store_true", help="run the tools over MCP")
    parser.add_argument("--max-calls", type=int, default=4, help="model calls at most")
    parser.add_argument("--log", default=None, help="append the model's replies to this file")
    args = parser.parse_args()

    task = rollout("")  # the task, the tools (OpenAI format), the model to ask for
    instructions = f"You are the {task['agent']}. Use the tools when they help. "
    messages = [{"role": "system", "content": instructions + ANSWER_FORMAT.get(task["env"], "")}]
    messages += [m for m in task["task"]["messages"] if m["role"] != "system"]
    client = OpenAI()
    for _ in range(args.max_calls):
        reply = client.chat.completions.create(
            model=task["model"], messages=messages, tools=task["tools"] or None
        )
        if args.log:
            with open(args.log, "a") as log:
                log.write(reply.model_dump_json() + "\n")
        message = reply.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments or "{}")
            if args.mcp:
                output = mcp_tool(call.function.name, arguments)
            else:
                output = rollout(f"/tools/{call.function.name}", arguments)["output"]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    rollout("/answer", {"answer": message.content or ""})


if __name__ == "__main__":
    main()
