"""An agent program that judges its own answers: it writes code, runs its tests, reports a reward.

    boltzoo eval prompts-v0 --agent-command "python examples/agent_programs/judged_coder.py"

prompts-v0 judges nothing itself: it pays the reward the agent reports (POST
$BOLTZOO_ROLLOUT_URL/reward). This program asks the model for a Python function, runs the
task's tests on it in a separate Python process (its own sandbox: a time limit, no network
needed), reports the fraction of asserts that passed, and answers with the code. The tests
come from the program's own copy of the tasks (--tasks, the env's bundled example by default),
looked up by the task's id: the env never shows them to the model.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from openai import OpenAI

EXAMPLE_TASKS = Path(__file__).parents[2] / "boltzoo" / "envs" / "data" / "prompts_example.jsonl"


def rollout(path: str, body: dict) -> dict:
    """POST ``body`` to one of this turn's rollout endpoints."""
    request = urllib.request.Request(
        os.environ["BOLTZOO_ROLLOUT_URL"] + path,
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {os.environ['OPENAI_API_KEY']}",
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def passed(code: str, tests: str) -> float:
    """Return the fraction of the asserts in ``tests`` that hold for ``code``."""
    asserts = [line for line in tests.splitlines() if line.strip()]
    ok = 0
    for line in asserts:
        try:
            run = subprocess.run(
                [sys.executable, "-c", f"{code}\n{line}"], capture_output=True, timeout=5
            )
            ok += run.returncode == 0
        except subprocess.TimeoutExpired:
            pass
    return ok / len(asserts) if asserts else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", default=str(EXAMPLE_TASKS), help="JSONL rows with tests")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.tasks).read_text().splitlines() if line]
    tests = {str(row.get("id", i)): row.get("tests", "") for i, row in enumerate(rows)}

    task = json.loads(os.environ["BOLTZOO_TASK"])
    reply = OpenAI().chat.completions.create(
        model=os.environ["BOLTZOO_MODEL"], messages=task["messages"]
    )
    answer = reply.choices[0].message.content or ""
    match = re.search(r"```(?:python)?\s*(.*?)```", answer, re.S)
    code = match.group(1) if match else answer
    rollout("/reward", {"reward": passed(code, tests.get(task["task_id"], ""))})
    rollout("/answer", {"answer": answer})


if __name__ == "__main__":
    main()
