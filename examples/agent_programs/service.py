"""An agent that is a long-running service: it claims turns from boltzoo instead of being run.

    boltzoo eval math-v0 --agent-service 127.0.0.1:8765 &     # waits for services to claim turns
    python examples/agent_programs/service.py http://127.0.0.1:8765 --workers 8

Each worker thread long-polls POST /rollouts/claim; a claim returns the turn (the task, the
tools, a model endpoint and this rollout's key), the worker plays it like solver.py (the env's
chat to the model) and POSTs the answer to the rollout. It could as well run on other machines
(with the hub's --api-key, sent here as BOLTZOO_API_KEY). It waits for a hub that is not up
yet, and stops after --idle-s seconds without a turn.
"""

import argparse
import json
import os
import threading
import time
import urllib.request

from openai import OpenAI


def post(url: str, body: dict, key: str | None) -> dict | None:
    """POST ``body``; return the JSON answer (None for 204 No Content)."""
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.load(response) if response.status != 204 else None


def play(client: OpenAI, turn: dict) -> None:
    """Play one claimed turn: the env's chat to the model, the reply as the answer."""
    # this turn's endpoint and key, on the worker's one HTTP client (a new client per turn
    # would cost ~30 ms of setup each)
    client = client.with_options(base_url=turn["openai_base_url"], api_key=turn["api_key"])
    reply = client.chat.completions.create(model=turn["model"], messages=turn["task"]["messages"])
    answer = reply.choices[0].message.content or ""
    post(turn["rollout_url"] + "/answer", {"answer": answer}, turn["api_key"])


def worker(hub: str, idle_s: float) -> None:
    client = OpenAI(base_url=hub, api_key="each turn has its own")
    last = time.monotonic()
    while time.monotonic() - last < idle_s:
        try:
            turn = post(f"{hub}/rollouts/claim", {"wait_s": 5}, os.environ.get("BOLTZOO_API_KEY"))
        except OSError:  # the hub is not up (yet, or any more): try again in a second
            time.sleep(1.0)
            continue
        if turn is None:
            continue
        last = time.monotonic()
        try:
            play(client, turn)
        except Exception as error:  # one bad turn must not stop the service
            print(f"turn {turn['rollout_id']}: {error}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("hub", help="the hub's URL, e.g. http://127.0.0.1:8765")
    parser.add_argument("--workers", type=int, default=8, help="turns played at once")
    parser.add_argument("--idle-s", type=float, default=30.0, help="stop after this long idle")
    args = parser.parse_args()
    threads = [
        threading.Thread(target=worker, args=(args.hub.rstrip("/"), args.idle_s))
        for _ in range(args.workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


if __name__ == "__main__":
    main()
