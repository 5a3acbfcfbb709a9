"""An agent program on the Anthropic SDK alone, with the env's tools as Anthropic tools.

    boltzoo eval sql-v0 --episodes 8 \\
        --agent-command "python examples/agent_programs/anthropic_tools.py"

The Anthropic SDK reads ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY from the environment (the
gateway session of this turn, served by boltzoo's Messages API); the task and the env's tools
come from the rollout (GET $BOLTZOO_ROLLOUT_URL), tool calls run through it (POST
.../tools/NAME), and the final answer is POSTed to .../answer. With --log FILE it appends every
reply of the model (token ids included) to FILE, one JSON per line.
"""

import argparse
import json
import os
import urllib.request

import anthropic

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
            "Authorization": f"Bearer {os.environ['ANTHROPIC_API_KEY']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-calls", type=int, default=4, help="model calls at most")
    parser.add_argument("--log", default=None, help="append the model's replies to this file")
    args = parser.parse_args()

    task = rollout("")
    system = f"You are the {task['agent']}. Use the tools when they help. "
    system += ANSWER_FORMAT.get(task["env"], "")
    messages = [m for m in task["task"]["messages"] if m["role"] != "system"]
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"]["description"],
            "input_schema": t["function"]["parameters"],
        }
        for t in task["tools"]
    ]
    client = anthropic.Anthropic()
    for _ in range(args.max_calls):
        reply = client.messages.create(
            model=task["model"], max_tokens=512, system=system, messages=messages, tools=tools
        )
        if args.log:
            with open(args.log, "a") as log:
                log.write(reply.model_dump_json() + "\n")
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            break
        messages.append({"role": "assistant", "content": reply.content})
        results = [
            {
                "type": "tool_result",
                "tool_use_id": use.id,
                "content": rollout(f"/tools/{use.name}", use.input)["output"],
            }
            for use in uses
        ]
        messages.append({"role": "user", "content": results})
    text = "".join(block.text for block in reply.content if block.type == "text")
    rollout("/answer", {"answer": text})


if __name__ == "__main__":
    main()
