"""An agent program that misbehaves on purpose, for the tests: FAULT says how, and only on the
task FAULT_TASK (or on every task: "*"; other tasks get "The answer is \\boxed{0}.").

FAULT: crash | answer_then_crash | exit3 | hang | garbage | binary | twice | late | nan_reward
| silent | reward_on_judged_env. What it saw is appended to FAULT_LOG as JSON lines.
"""

import json
import os
import sys
import time
import urllib.error
import urllib.request

key = os.environ["BOLTZOO_API_KEY"]
rollout_url = os.environ["BOLTZOO_ROLLOUT_URL"]
task = json.loads(os.environ["BOLTZOO_TASK"])
chosen = os.environ.get("FAULT_TASK")
fault = os.environ.get("FAULT", "") if chosen in (task["task_id"], "*") else ""


def post(url, body, token=key):
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def log(**values):
    with open(os.environ["FAULT_LOG"], "a") as file:
        file.write(json.dumps({"fault": fault, "task_id": task["task_id"], **values}) + "\n")


right = "The answer is \\boxed{0}."
if fault == "crash":
    raise RuntimeError("the agent fell over")
if fault == "answer_then_crash":
    log(answered=post(rollout_url + "/answer", {"answer": right}))
    raise RuntimeError("the agent fell over after answering")
if fault == "exit3":
    print(right)
    sys.exit(3)
if fault == "hang":
    with open(os.environ["FAULT_LOG"] + ".pid", "w") as file:
        file.write(str(os.getpid()))
    time.sleep(60)
if fault == "garbage":
    print("\x00\x01 ??? }{ not an answer at all")
    sys.exit(0)
if fault == "binary":
    sys.stdout.buffer.write(b"\xff\xfe\xfa garbage bytes")
    sys.exit(0)
if fault == "twice":
    log(first=post(rollout_url + "/answer", {"answer": right}))
    log(second=post(rollout_url + "/answer", {"answer": "The answer is \\boxed{999}."}))
    sys.exit(0)
if fault == "late":  # a child that escapes the process group answers after the timeout
    program = os.getpid()
    if os.fork() == 0:
        os.setsid()
        deadline = time.monotonic() + 60
        # the program's kill at the timeout reparents this child: answer then, not before
        while os.getppid() == program and time.monotonic() < deadline:
            time.sleep(0.05)
        log(late=post(rollout_url + "/answer", {"answer": right}))
        os._exit(0)
    time.sleep(60)
if fault == "nan_reward":
    request = urllib.request.Request(
        rollout_url + "/reward",
        data=b'{"reward": NaN}',
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        urllib.request.urlopen(request, timeout=10)
        log(nan=200)
    except urllib.error.HTTPError as error:
        log(nan=error.code)
    log(text=post(rollout_url + "/reward", {"reward": "high"}))
    print(right)
    sys.exit(0)
if fault == "silent":
    sys.exit(0)
if fault == "reward_on_judged_env":
    log(reward=post(rollout_url + "/reward", {"reward": 1.0}))
    print("The answer is \\boxed{123456789}.")
    sys.exit(0)
print(right)
