"""Soak the gateway: many concurrent clients for minutes, then a volley of malformed requests.

    python scripts/soak_gateway.py [--seconds 600] [--clients 64] [--baseline-commit REV]
        [--baseline-seconds 60] [--out FILE]

The gateway runs in a process of its own (so that its resident memory is its own), in front of a
scripted policy with SmolLM2's tokenizer (64-token answers, with token ids: every call is
recorded as in training). ``--clients`` threads each post a 2,000-character chat, one request
after another, each to its own session, for ``--seconds``. Reported: requests/s, p50/p99
latency, resident memory of the gateway's process at the start and the end (sampled every 10 s),
and, from the JSON-lines file the gateway records to (``record_to``), that every answered request
is recorded exactly once. Then 1,000 malformed requests (bad JSON, known fields of the wrong
type, sampling fields out of range or NaN, a lone surrogate escape, nesting 50k-100k levels
deep, bodies over the limit, bodies sent slowly, clients that hang up mid-body), each of which
must get its 4xx status, and a last good request that must still be answered; then 20
connections whose bodies never finish, each of which must get 408 (``body_timeout_s``) while a
normal request is served.

``--baseline-commit REV`` runs the same load first against the gateway of that commit (as it
was: no ``record_to``, so no record check) for ``--baseline-seconds``, for a ratio in the same
run.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchlib import write_record

ANSWER_TOKENS = 64
CHAT_CHARS = 2000


# --- the server process ----------------------------------------------------------------------


def serve(gateway_file: str | None, record_to: str | None) -> None:
    """Run a gateway over a scripted policy; print its port; serve until stdin closes."""
    import importlib.util

    from transformers import AutoTokenizer

    from boltzoo.agents.models import smollm2_tokenizer_dir
    from boltzoo.agents.scripted import ScriptedPolicy

    if gateway_file:  # an older gateway, loaded from its source file
        spec = importlib.util.spec_from_file_location("old_gateway", gateway_file)
        module = importlib.util.module_from_spec(spec)
        sys.modules["old_gateway"] = module  # (its dataclasses look their module up)
        spec.loader.exec_module(module)
        gateway_class = module.Gateway
    else:
        from boltzoo.agents.gateway import Gateway as gateway_class

    tokenizer = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())
    answer = tokenizer.decode(list(range(1000, 1000 + ANSWER_TOKENS)))
    policy = ScriptedPolicy(lambda turn: answer, tokenizer, name="soak")
    options = {"max_body_bytes": 1_000_000}
    if record_to:
        options["record_to"] = record_to
    with gateway_class(policy, **options) as gateway:
        print(gateway.address[1], flush=True)
        sys.stdin.read()  # until the parent closes it


def start_server(gateway_file: str | None, record_to: str | None) -> tuple[subprocess.Popen, int]:
    command = [sys.executable, __file__, "--serve"]
    if gateway_file:
        command += ["--gateway-file", gateway_file]
    if record_to:
        command += ["--record-to", record_to]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    port = int(process.stdout.readline())
    return process, port


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- the load ----------------------------------------------------------------------------


def chat_body(client: int, request: int) -> bytes:
    tag = f"client {client} request {request}. "
    return json.dumps(
        {"messages": [{"role": "user", "content": tag + "x" * (CHAT_CHARS - len(tag))}]}
    ).encode()


def load(port: int, pid: int, clients: int, seconds: float) -> dict:
    latencies: list[float] = []
    answered: list[tuple[int, int]] = []
    errors: list[str] = []
    memory = [resident_mib(pid)]
    stop = time.monotonic() + seconds
    lock = threading.Lock()

    def client(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        request = 0
        while time.monotonic() < stop:
            started = time.perf_counter()
            try:
                connection.request(
                    "POST",
                    f"/sessions/c{index}/v1/chat/completions",
                    chat_body(index, request),
                    {"Content-Type": "application/json"},
                )
                response = connection.getresponse()
                body = response.read()
                ok = response.status == 200 and json.loads(body)["choices"][0]["token_ids"]
            except (OSError, http.client.HTTPException, ValueError) as error:
                ok, body = False, str(error).encode()
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            with lock:
                if ok:
                    latencies.append(time.perf_counter() - started)
                    answered.append((index, request))
                else:
                    errors.append(body[:200].decode(errors="replace"))
            request += 1
        connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        time.sleep(min(10.0, max(0.1, stop - time.monotonic())))
        memory.append(resident_mib(pid))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "seconds": elapsed,
        "requests": len(answered),
        "errors": len(errors),
        "first_errors": errors[:3],
        "requests_per_second": len(answered) / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
        "rss_start_mib": memory[0],
        "rss_end_mib": memory[-1],
        "rss_max_mib": max(memory),
        "answered": answered,
    }


def check_records(record_file: Path, answered: list[tuple[int, int]]) -> dict:
    seen = []
    for line in record_file.read_text().splitlines():
        row = json.loads(line)
        words = row["messages"][-1]["content"].split(".")[0].split()
        if words[0] != "client":  # the malformed volley's good requests
            continue
        seen.append((int(words[1]), int(words[3])))
        assert row["session"] == f"c{words[1]}" and row["completion"]["response_token_ids"]
    duplicated = len(seen) - len(set(seen))
    lost = len(set(answered) - set(seen))
    return {"records": len(seen), "lost": lost, "duplicated": duplicated}


# --- malformed requests ------------------------------------------------------------------


def raw_request(port: int, payload: bytes, pause_s: float = 0.0, hang_up: bool = False) -> int:
    """Send ``payload`` (a whole HTTP request) in two halves; return the status (0: none)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        half = len(payload) // 2
        sock.sendall(payload[:half])
        time.sleep(pause_s)
        if hang_up:
            return 0
        sock.sendall(payload[half:])
        reply = b""
        while b"\r\n" not in reply:
            data = sock.recv(4096)
            if not data:
                return 0
            reply += data
        return int(reply.split()[1])


def http_post(body: bytes, content_length: int | None = None) -> bytes:
    length = len(body) if content_length is None else content_length
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {length}\r\nConnection: close\r\n\r\n".encode()
        + body
    )


_X = b'[{"role": "user", "content": "x"}]'
# bodies that once got 200 (the sampling ranges) or 500 (a tokenizer's TypeError on a lone
# surrogate, a RecursionError on deep nesting): each must be a 400
MALFORMED_BODIES = {
    "max_tokens 0": b'{"max_tokens": 0, "messages": ' + _X + b"}",
    "max_tokens -5": b'{"max_tokens": -5, "messages": ' + _X + b"}",
    "temperature -3": b'{"temperature": -3, "messages": ' + _X + b"}",
    "temperature NaN": b'{"temperature": NaN, "messages": ' + _X + b"}",
    "lone surrogate": b'{"messages": [{"role": "user", "content": "\\ud800"}]}',
    "50k levels in content": b'{"messages": [{"role": "user", "content": '
    + b"[" * 50_000
    + b"]" * 50_000
    + b"}]}",
    "100k levels in tools": b'{"messages": '
    + _X
    + b', "tools": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}",
    "deep unknown field": b'{"messages": '
    + _X
    + b', "extra": '
    + b"[" * 50_000
    + b"]" * 50_000
    + b"}",
}


def stalled(port: int, connections: int = 20) -> dict:
    """Open ``connections`` requests whose bodies never finish; return how long the gateway
    held them (each must get 408; 0: still open after 30 s) and whether a normal request was
    served meanwhile."""
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    started = time.perf_counter()
    sockets = []
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.sendall(http_post(b'{"messages"', content_length=1000))
        sockets.append(sock)
    served = raw_request(port, http_post(good)) == 200
    served_after = time.perf_counter() - started
    statuses, held = [], []
    for sock in sockets:
        sock.settimeout(max(0.1, 30 - (time.perf_counter() - started)))
        try:
            reply = sock.recv(200)
            statuses.append(int(reply.split()[1]) if reply else 0)
        except TimeoutError:  # still held open after 30 s
            statuses.append(0)
        held.append(time.perf_counter() - started)
        sock.close()
    return {
        "connections": connections,
        "statuses": sorted(set(statuses)),
        "held_max_s": max(held),
        "normal_request_served": served,
        "normal_request_s": served_after,
    }


def malformed(port: int, count: int = 1000) -> dict:
    good = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
    kinds = [
        ("bad JSON", lambda: raw_request(port, http_post(b'{"messages": [')), 400),
        (
            "wrong type",
            lambda: raw_request(
                port, http_post(b'{"messages": [{"role": "user", "content": "x"}], "stream": 1}')
            ),
            400,
        ),
        ("no role", lambda: raw_request(port, http_post(b'{"messages": [{"content": "x"}]}')), 400),
        ("over the limit", lambda: raw_request(port, http_post(b"x" * 200, 10_000_000)), 413),
        ("slow body", lambda: raw_request(port, http_post(good), pause_s=0.2), 200),
        ("hang up mid-body", lambda: raw_request(port, http_post(good), hang_up=True), 0),
        *[
            (name, lambda body=body: raw_request(port, http_post(body)), 400)
            for name, body in MALFORMED_BODIES.items()
        ],
    ]
    results: dict[str, dict] = {name: {"right": 0, "wrong": 0} for name, _, _ in kinds}
    for i in range(count):
        name, send, expected = kinds[i % len(kinds)]
        try:
            status = send()
        except OSError:
            status = -1
        results[name]["right" if status == expected else "wrong"] += 1
    alive = raw_request(port, http_post(good)) == 200
    return {"kinds": results, "still_serving": alive}


# --- main --------------------------------------------------------------------------------


def run(label: str, gateway_file: str | None, clients: int, seconds: float) -> dict:
    record_file = None
    if gateway_file is None:
        record_file = Path(tempfile.mkdtemp()) / "calls.jsonl"
    process, port = start_server(gateway_file, str(record_file) if record_file else None)
    try:
        time.sleep(1.0)
        result = load(port, process.pid, clients, seconds)
        answered = result.pop("answered")
        result["malformed"] = malformed(port)
        result["stalled_bodies"] = stalled(port)
    finally:
        process.stdin.close()
        process.wait(timeout=120)
    if record_file is not None:
        result |= check_records(record_file, answered)
    result["gateway"] = label
    print(
        f"{label}: {result['requests']} requests in {result['seconds']:.0f} s "
        f"({result['requests_per_second']:.0f}/s), {result['errors']} errors, p50 "
        f"{result['p50_ms']:.0f} ms, p99 {result['p99_ms']:.0f} ms, resident memory "
        f"{result['rss_start_mib']:.0f} -> {result['rss_end_mib']:.0f} MiB (max "
        f"{result['rss_max_mib']:.0f}); records lost {result.get('lost', '-')}, duplicated "
        f"{result.get('duplicated', '-')}; malformed {result['malformed']}; stalled bodies "
        f"{result['stalled_bodies']}",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--baseline-commit", default=None)
    parser.add_argument("--baseline-seconds", type=float, default=60)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gateway-file", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--record-to", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.gateway_file, args.record_to)
        return

    rows = []
    if args.baseline_commit:
        source = subprocess.run(
            ["git", "show", f"{args.baseline_commit}:boltzoo/agents/gateway.py"],
            check=True,
            capture_output=True,
            text=True,
            cwd=Path(__file__).parent.parent,
        ).stdout
        old = Path(tempfile.mkdtemp()) / "old_gateway.py"
        old.write_text(source)
        rows.append(
            run(f"gateway of {args.baseline_commit}", str(old), args.clients, args.baseline_seconds)
        )
    rows.append(run("this gateway", None, args.clients, args.seconds))
    if len(rows) == 2:
        ratio = rows[1]["requests_per_second"] / rows[0]["requests_per_second"]
        rows[1]["requests_per_second_ratio"] = ratio
        print(f"requests/s ratio (this / baseline): {ratio:.2f}")
    if args.out:
        write_record(args.out, rows, clients=args.clients, chat_chars=CHAT_CHARS)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
