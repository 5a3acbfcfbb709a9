"""Agent programs: real programs in their own processes (Python on the openai or anthropic SDK,
Node.js with fetch alone) play env agents over real HTTP; the env runs their tools and judges
their answers; every model call is recorded as the gateway served it; failures are records."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import boltzoo
from boltzoo.agents import ScriptedPolicy, Turn
from boltzoo.agents.gateway import Gateway
from boltzoo.agents.programs import AgentCommand, AgentHub, AgentService
from boltzoo.cli import main
from boltzoo.episode import load_episodes
from boltzoo.errors import AgentProgramError

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples" / "agent_programs"
PROGRAMS = Path(__file__).parent / "programs"
PYTHON = sys.executable
MATH = {"level": "easy", "max_turns": 3, "few_shot": False}
SQL = {"agents": ["writer"], "split": "test"}


def tool_model(tokenizer, tool, arguments, answer):
    """A scripted model that, offered tools, calls ``tool`` first, then answers ``answer``
    with the tool's output (and answers at once when no tools are offered)."""

    def reply(turn):
        messages = turn.observation["messages"]
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if results:
            return answer.format(result=results[-1].strip())
        if tool in messages[0]["content"]:
            return f"<tool_call>{json.dumps({'name': tool, 'arguments': arguments})}</tool_call>"
        return answer.format(result="0")

    return ScriptedPolicy(reply, tokenizer, name="scripted")


def served(log: Path) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Return (prompt ids, response ids) of every reply a program logged (any protocol)."""
    pairs = []
    for line in log.read_text().splitlines():
        reply = json.loads(line)
        response = reply["choices"][0]["token_ids"] if "choices" in reply else reply["token_ids"]
        pairs.append((tuple(reply["prompt_token_ids"]), tuple(response)))
    return pairs


def recorded(episodes) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    return [
        (tuple(call.prompt_token_ids), tuple(call.response_token_ids))
        for episode in episodes
        for step in episode.steps
        for call in step.action.inner_calls
    ]


COMMANDS = {
    "python-openai": f"{PYTHON} {EXAMPLES}/openai_tools.py --log {{log}}",
    "python-openai-mcp": f"{PYTHON} {EXAMPLES}/openai_tools.py --mcp --log {{log}}",
    "python-anthropic": f"{PYTHON} {EXAMPLES}/anthropic_tools.py --log {{log}}",
    "node-fetch": f"node {EXAMPLES}/agent.mjs --log {{log}}",
}
ENVS = {
    "math-v0": ("solver", MATH, "calculator", {"expression": "40+2"}, "\\boxed{{{result}}}"),
    "sql-v0": ("writer", SQL, "execute_sql", {"query": "SELECT 40+2"}, "```sql\nSELECT 42\n```"),
}


@pytest.mark.parametrize("env_id", ENVS)
@pytest.mark.parametrize("program", COMMANDS)
@pytest.mark.slow
def test_programs_in_any_language_play_with_the_env_tools_recorded_as_served(
    tmp_path, smollm2_tokenizer, program, env_id
):
    if program == "node-fetch":
        assert shutil.which("node"), "Node.js is on every machine of this project"
    agent, env_kwargs, tool, arguments, answer = ENVS[env_id]
    log = tmp_path / "replies.jsonl"
    model = tool_model(smollm2_tokenizer, tool, arguments, answer)
    episodes = boltzoo.rollout(
        env_id,
        {agent: model},
        tasks=[0, 1],
        agent_command=COMMANDS[program].format(log=log),
        progress=False,
        **env_kwargs,
    )
    assert [e.failed for e in episodes] == [False, False], [e.error for e in episodes]
    for episode in episodes:
        (step,) = episode.steps
        assert step.action.agent_answer and step.action.model == "command:scripted"
        assert len(step.action.inner_calls) == 2  # the tool call, then the answer
        # the tool ran in the env (its own counts), and its output reached the model
        info = step.info
        assert info.get("tool_calls", info.get("queries")) >= 1
        second_prompt = smollm2_tokenizer.decode(step.action.inner_calls[1].prompt_token_ids)
        assert "42" in second_prompt
        # the env judged the answer as it judges the same text played in process
        replay = boltzoo.make(env_id, **env_kwargs)
        replay.reset(options={"task_index": episode.task_index})
        replay.step(step.action.text)
        assert replay.unwrapped.episode.score == episode.score
    # token for token, what the programs got is what the episodes recorded
    assert sorted(served(log)) == sorted(recorded(episodes))


@pytest.mark.parametrize(
    "command",
    [f"{PYTHON} {EXAMPLES}/solver.py", f"node {EXAMPLES}/agent.mjs"],
    ids=["python-solver", "node-fetch"],
)
@pytest.mark.slow
def test_boltzoo_rollout_agent_command_records_the_programs_calls(
    tmp_path, smollm2_tokenizer, command
):
    from boltzoo.agents.models import tiny_model

    model_dir = tmp_path / "tiny"
    tiny_model(len(smollm2_tokenizer), seed=0).save_pretrained(model_dir)
    smollm2_tokenizer.save_pretrained(model_dir)
    out = tmp_path / "episodes.jsonl"
    code = main(
        ["rollout", "math-v0", "--model", str(model_dir), "--agent-command", command]
        + ["--episodes", "4", "--temperature", "1", "--max-new-tokens", "8", "--quiet"]
        + ["-e", "level=easy", "-e", "max_turns=1", "--out", str(out), "--json"]
    )
    assert code == 0
    episodes = load_episodes(out)
    assert len(episodes) == 4 and not any(e.failed for e in episodes), [e.error for e in episodes]
    for episode in episodes:
        action = episode.steps[0].action
        assert action.agent_answer and len(action.inner_calls) == 1
        call = action.inner_calls[0]
        assert call.has_tokens and len(call.logprobs) == len(call.response_token_ids)
        # the program's answer is the model's reply (stripped), as it was sampled
        sampled = smollm2_tokenizer.decode(call.response_token_ids, skip_special_tokens=True)
        assert action.text == sampled.strip()


# --- faults: each a clear record, nothing lost, the run goes on ------------------------------


def fault_rollout(
    tmp_path, smollm2_tokenizer, fault, timeout_s=20.0, env_id="math-v0", wait_for=None, **extra
):
    """Play tasks 0 and 1 of ``env_id`` with tests/agents/programs/fault.py misbehaving on task
    0 as ``fault`` says; return (episodes, the program's log). With ``wait_for``, the hub stays
    open until the log has a line with that key (up to 20 s): a late answer reaches it."""
    kwargs = MATH if env_id == "math-v0" else {}
    bad_task = boltzoo.make(env_id, **kwargs).unwrapped.tasks[0].task_id
    log = tmp_path / "fault.jsonl"
    model = ScriptedPolicy(["unused"] * 4, smollm2_tokenizer)
    with AgentCommand(
        f"{PYTHON} {PROGRAMS}/fault.py",
        model,
        timeout_s=timeout_s,
        env={"FAULT": fault, "FAULT_TASK": bad_task, "FAULT_LOG": str(log)} | extra,
    ) as program:
        agent = "solver" if env_id == "math-v0" else "agent"
        episodes = boltzoo.rollout(env_id, {agent: program}, tasks=[0, 1], progress=False, **kwargs)
        deadline = time.monotonic() + 20
        while wait_for and time.monotonic() < deadline:
            if any(wait_for in line for line in read_log(log)):
                break
            time.sleep(0.1)
    return episodes, read_log(log)


def read_log(log):
    """The lines the fault program has logged so far, as dicts (one still being written is
    left out)."""
    lines = []
    for text in log.read_text().splitlines() if log.exists() else []:
        with contextlib.suppress(json.JSONDecodeError):
            lines.append(json.loads(text))
    return lines


@pytest.mark.parametrize(
    "fault, words",
    [
        ("crash", "exited with status 1; its stderr ends: Traceback"),
        ("exit3", "exited with status 3"),
        ("answer_then_crash", "exited with status 1"),  # its exit decides, not its answer
        ("binary", "standard output is not UTF-8"),
        ("silent", "exited 0 without an answer"),
    ],
)
def test_a_program_that_crashes_or_gives_no_answer_fails_its_episode_alone(
    tmp_path, smollm2_tokenizer, fault, words
):
    episodes, _ = fault_rollout(tmp_path, smollm2_tokenizer, fault)
    bad, good = episodes
    assert bad.failed and words in bad.error and "AgentProgramError" in bad.error
    assert fault != "crash" or bad.error.endswith("RuntimeError: the agent fell over")
    assert bad.score is None  # never scored 0: failed episodes are dropped, not judged
    assert not good.failed and good.steps[0].action.text == "The answer is \\boxed{0}."


@pytest.mark.slow
def test_a_program_past_its_timeout_is_killed_with_its_process_group(tmp_path, smollm2_tokenizer):
    started = time.monotonic()
    episodes, _ = fault_rollout(tmp_path, smollm2_tokenizer, "hang", timeout_s=1.5)
    assert time.monotonic() - started < 15
    bad, good = episodes
    assert bad.failed and "ran past 1.5 s: killed" in bad.error
    assert not good.failed
    pid = int((tmp_path / "fault.jsonl.pid").read_text())
    time.sleep(0.2)
    assert not running(pid)  # the program is gone, not left running


def running(pid: int) -> bool:
    """Return whether process ``pid`` runs (a zombie waiting to be reaped does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
def test_an_answer_after_the_timeout_or_a_second_answer_gets_409_and_changes_nothing(
    tmp_path, smollm2_tokenizer
):
    episodes, lines = fault_rollout(tmp_path, smollm2_tokenizer, "twice")
    assert [line.get("first") for line in lines if "first" in line] == [200]
    assert [line.get("second") for line in lines if "second" in line] == [409]
    assert episodes[0].steps[0].action.text == "The answer is \\boxed{0}."  # the first stands
    # the escaped child answers once the program is killed at the timeout (3 s: time to start
    # Python and fork on a loaded machine); the hub stays open until its answer comes
    episodes, lines = fault_rollout(
        tmp_path, smollm2_tokenizer, "late", timeout_s=3.0, wait_for="late"
    )
    assert episodes[0].failed and "ran past" in episodes[0].error
    assert [line["late"] for line in lines if "late" in line] == [409]


def test_garbage_is_an_answer_the_env_judges(tmp_path, smollm2_tokenizer):
    episodes, _ = fault_rollout(tmp_path, smollm2_tokenizer, "garbage")
    bad, good = episodes
    assert not bad.failed and bad.score == 0.0 and "not an answer" in bad.steps[0].action.text
    assert not good.failed


def test_a_remote_agent_cannot_score_its_own_answer_on_an_env_that_judges(
    tmp_path, smollm2_tokenizer
):
    episodes, lines = fault_rollout(tmp_path, smollm2_tokenizer, "reward_on_judged_env")
    assert [line["reward"] for line in lines if "reward" in line] == [403]
    assert episodes[0].score == 0.0 and not episodes[0].success  # its wrong answer stays wrong


def test_agent_reported_rewards_must_be_finite_numbers_or_the_episode_fails(
    tmp_path, smollm2_tokenizer
):
    episodes, lines = fault_rollout(tmp_path, smollm2_tokenizer, "nan_reward", env_id="prompts-v0")
    codes = {key: line[key] for line in lines for key in ("nan", "text") if key in line}
    assert codes == {"nan": 400, "text": 400}
    # no reward taken for task 0: failed, not scored 0; task 1 reported none either
    assert all(e.failed and "reported no reward" in e.error for e in episodes)


def test_one_rollouts_key_opens_no_other_rollout(smollm2_tokenizer):
    model = ScriptedPolicy(["x"] * 4, smollm2_tokenizer)
    env = boltzoo.make("math-v0", **MATH)
    env.reset(options={"task_index": 0})
    with Gateway(model, require_session=True) as gateway, AgentHub(gateway) as hub:
        turn = Turn("solver", env.observe("solver"), env.unwrapped)
        mine, other = hub.open(turn, 10), hub.open(turn, 10)

        def answer(rollout, key):
            request = urllib.request.Request(
                f"{hub.url}/rollouts/{rollout.rollout_id}/answer",
                data=json.dumps({"answer": "hi"}).encode(),
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            )
            try:
                return urllib.request.urlopen(request, timeout=10).status
            except urllib.error.HTTPError as error:
                return error.code

        assert answer(other, mine.token) == 401 and other.answer is None
        assert answer(mine, mine.token) == 200 and mine.answer == "hi"
        hub.end(mine)
        hub.end(other)
        assert answer(other, other.token) == 409  # ended: nothing changes any more


# --- services: long-running programs that claim turns ---------------------------------------


@pytest.mark.slow
def test_a_service_claims_turns_over_http_and_plays_them(tmp_path, smollm2_tokenizer):
    import subprocess

    model = tool_model(smollm2_tokenizer, "calculator", {}, "The answer is \\boxed{{0}}.")
    with AgentService(model, timeout_s=20, claim_timeout_s=30) as service:
        process = subprocess.Popen(
            [PYTHON, str(EXAMPLES / "service.py"), service.hub.url, "--workers", "3"]
            + ["--idle-s", "3"],
        )
        try:
            episodes = boltzoo.rollout(
                "math-v0", {"solver": service}, tasks=[0, 1, 2, 3], progress=False, **MATH
            )
        finally:
            process.wait(timeout=30)
    assert not any(e.failed for e in episodes), [e.error for e in episodes]
    assert all(e.steps[0].action.model == "service:scripted" for e in episodes)
    assert all(len(e.steps[0].action.inner_calls) == 1 for e in episodes)


@pytest.mark.slow
def test_unclaimed_and_silent_service_turns_fail_and_heartbeats_keep_them(smollm2_tokenizer):
    model = ScriptedPolicy(["x"] * 8, smollm2_tokenizer)
    env = boltzoo.make("math-v0", **MATH)
    env.reset(options={"task_index": 0})
    turn = Turn("solver", env.observe("solver"), env.unwrapped)
    with AgentService(model, timeout_s=0.6, claim_timeout_s=0.5) as service:
        (unclaimed,) = service.act([turn])
        assert isinstance(unclaimed, AgentProgramError) and "no service claimed" in str(unclaimed)

        def claim_then(heartbeats: int, answer: bool) -> None:
            body = json.dumps({"wait_s": 5}).encode()
            request = urllib.request.Request(f"{service.claim_url}", data=body)
            doc = json.load(urllib.request.urlopen(request, timeout=10))
            for _ in range(heartbeats):
                time.sleep(0.3)
                beat = urllib.request.Request(
                    doc["rollout_url"] + "/heartbeat",
                    data=b"{}",
                    headers={"Authorization": f"Bearer {doc['api_key']}"},
                )
                urllib.request.urlopen(beat, timeout=10)
            if answer:
                done = urllib.request.Request(
                    doc["rollout_url"] + "/answer",
                    data=json.dumps({"answer": "ok"}).encode(),
                    headers={"Authorization": f"Bearer {doc['api_key']}"},
                )
                urllib.request.urlopen(done, timeout=10)

        import threading

        for heartbeats, answer, expect in ((0, False, "silent"), (5, True, None)):
            worker = threading.Thread(target=claim_then, args=(heartbeats, answer))
            worker.start()
            (result,) = service.act([turn])
            worker.join()
            if expect:
                assert isinstance(result, AgentProgramError) and expect in str(result)
            else:  # 1.5 s of heartbeats, each within the 0.6 s silence limit
                assert result.text == "ok"


def test_a_service_pushed_each_turn_may_answer_in_its_response(smollm2_tokenizer):
    import http.server
    import threading

    class Service(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps({"answer": f"pushed {doc['task_id']}"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    model = ScriptedPolicy(["x"] * 4, smollm2_tokenizer)
    url = f"http://127.0.0.1:{server.server_address[1]}/turn"
    try:
        with AgentService(model, push_url=url) as service:
            episodes = boltzoo.rollout("math-v0", {"solver": service}, tasks=[0, 1], **MATH)
    finally:
        server.shutdown()
    assert [e.steps[0].action.text for e in episodes] == [f"pushed {e.task_id}" for e in episodes]


def test_a_hub_beyond_loopback_needs_a_key(smollm2_tokenizer):
    with Gateway(ScriptedPolicy(["x"], smollm2_tokenizer)) as gateway:
        with pytest.raises(ValueError, match="needs an api_key"):
            AgentHub(gateway, host="0.0.0.0")


def test_the_program_policies_are_importable_from_boltzoo_agents():
    import boltzoo.agents

    assert boltzoo.agents.AgentCommand is AgentCommand
    assert boltzoo.agents.AgentService is AgentService
    assert {"AgentCommand", "AgentService"} <= set(boltzoo.agents.__all__)
