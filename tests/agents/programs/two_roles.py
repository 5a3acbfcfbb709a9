"""An agent program with two roles (standard library only): it answers as the env's agent, then
asks a critic (its second role, named in the URL) about the answer; it reports the fraction of
the critic's reply's token ids in a target set as its reward. For the training tests: the roles
are agents LightningRL selects."""

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


def ask(role, messages):
    url = f"{os.environ['BOLTZOO_AGENTS_URL']}/{role}/v1/chat/completions"
    return post(url, {"model": os.environ["BOLTZOO_MODEL"], "messages": messages})


answer = ask("agent", task["messages"])["choices"][0]
review = ask("critic", [{"role": "user", "content": f"Review: {answer['message']['content']}"}])
ids = review["choices"][0]["token_ids"]
rollout = os.environ["BOLTZOO_ROLLOUT_URL"]
post(rollout + "/reward", {"reward": sum(t in targets for t in ids) / max(1, len(ids))})
post(rollout + "/answer", {"answer": answer["message"]["content"] or "-"})
