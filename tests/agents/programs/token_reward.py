"""An agent program (standard library only) that asks the model once and reports a reward it
computes itself: the fraction of the reply's token ids in a target set (tokens-v0's game, here
judged by the agent, in prompts-v0). For the training tests."""

import json
import os
import urllib.request

import numpy as np

VOCAB, TARGET = int(os.environ["VOCAB"]), int(os.environ["TARGET"])
targets = set(np.random.default_rng(0).choice(VOCAB, size=TARGET, replace=False).tolist())
key = os.environ["OPENAI_API_KEY"]
task = json.loads(os.environ["BOLTZOO_TASK"])


def post(url, body):
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


reply = post(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    {"model": os.environ["BOLTZOO_MODEL"], "messages": task["messages"]},
)
ids = reply["choices"][0]["token_ids"]
reward = sum(t in targets for t in ids) / len(ids) if ids else 0.0
rollout = os.environ["BOLTZOO_ROLLOUT_URL"]
post(rollout + "/reward", {"reward": reward})
post(rollout + "/answer", {"answer": reply["choices"][0]["message"]["content"] or "-"})
