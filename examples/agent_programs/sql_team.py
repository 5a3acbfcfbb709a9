"""One agent program, two roles: a SQL writer and a checker that reviews its query.

    boltzoo eval sql-v0 -e agents='["writer"]' --episodes 8 \\
        --agent-command "python examples/agent_programs/sql_team.py"
    boltzoo train sql-v0 --env-kwargs '{"agents": ["writer"]}' --agent-roles '["checker"]' \\
        --train-agents '["writer"]' --agent-command "python examples/agent_programs/sql_team.py"

It plays sql-v0's writer. Each model call is made as a role, named in its URL:
$BOLTZOO_AGENTS_URL/writer/v1 and $BOLTZOO_AGENTS_URL/checker/v1. The writer drafts a query,
the checker reads the draft and its result (run through the rollout's execute_sql tool) and
says CORRECT or INCORRECT, and on INCORRECT the writer writes once more. The roles are agents
to LightningRL: train_agents and policy_map select and map them (a role that is not trained
calls the frozen initial model).
"""

import json
import os
import re
import urllib.request

from openai import OpenAI


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


def role(name: str) -> OpenAI:
    """Return a client whose calls are made as ``name``."""
    return OpenAI(base_url=f"{os.environ['BOLTZOO_AGENTS_URL']}/{name}/v1")


def query_of(text: str) -> str:
    """Return the SQL of a ```sql block (the whole text if there is none)."""
    match = re.search(r"```(?:sql)?\s*(.*?)```", text, re.S)
    return (match.group(1) if match else text).strip()


def main() -> None:
    task = json.loads(os.environ["BOLTZOO_TASK"])
    model = os.environ["BOLTZOO_MODEL"]
    writer_chat = task["messages"]  # the env's own prompt for the writer: schema and question
    draft = role("writer").chat.completions.create(model=model, messages=writer_chat)
    answer = draft.choices[0].message.content or ""
    result = rollout("/tools/execute_sql", {"query": query_of(answer)})["output"]
    question = writer_chat[-1]["content"]
    review = role("checker").chat.completions.create(
        model=model,
        messages=[
            {
                "role": "system",
                "content": "Check whether the query answers the question. Reply "
                "'VERDICT: CORRECT' or 'VERDICT: INCORRECT - what is wrong'.",
            },
            {
                "role": "user",
                "content": f"{question}\n\nQuery:\n{query_of(answer)}\n\nResult:\n{result}",
            },
        ],
    )
    verdict = review.choices[0].message.content or ""
    if "INCORRECT" in verdict:
        retry = writer_chat + [
            {"role": "assistant", "content": answer},
            {"role": "user", "content": f"A reviewer says: {verdict}\nWrite the query again."},
        ]
        rewrite = role("writer").chat.completions.create(model=model, messages=retry)
        answer = rewrite.choices[0].message.content or answer
    print(answer)


if __name__ == "__main__":
    main()
