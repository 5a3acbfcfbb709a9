"""Gateway overhead per call: the same chats sent to the backend directly and through the gateway.

    python scripts/bench_gateway.py [--model smollm2-135m] [--requests 32] [--max-new-tokens 16]

Both sides use one policy (greedy, so both produce the same tokens) on math-v0's first solver
turns. Two patterns, each alternating direct and gateway:

* one call at a time: ``policy.generate([chat])`` against one HTTP request to
  ``/v1/chat/completions`` (JSON, chat template, batching thread, recording, token ids and
  logprobs in the response); the overhead is the difference of the median latencies;
* all at once: ``policy.generate(chats)`` as one batch against ``--requests`` concurrent HTTP
  clients, which the gateway batches; the overhead per call is the wall-time difference divided
  by the number of calls;
* streaming, one call at a time: the time to the first streamed token (``"stream": true``)
  against the time to the whole answer without streaming (what a client waits before it can
  show anything), on the same chats.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import boltzoo
from benchlib import write_record
from boltzoo.agents.gateway import Gateway
from boltzoo.agents.models import load_policy


def post(url: str, model: str, chat: list[dict], max_tokens: int) -> dict:
    body = json.dumps({"model": model, "messages": chat, "max_tokens": max_tokens}).encode()
    request = urllib.request.Request(
        url + "/chat/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)


def stream_times(url: str, model: str, chat: list[dict], max_tokens: int) -> tuple[float, float]:
    """Return (ms to the first streamed content, ms to the end of the stream) of one request."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    body = {"model": model, "messages": chat, "max_tokens": max_tokens, "stream": True}
    connection = http.client.HTTPConnection(host, int(port), timeout=600)
    started = time.perf_counter()
    connection.request("POST", "/v1/chat/completions", json.dumps(body))
    response = connection.getresponse()
    first = None
    while True:
        line = response.readline().decode()
        if not line or line.startswith("data: [DONE]"):
            break
        if first is None and line.startswith("data: {"):
            if json.loads(line[6:])["choices"][0]["delta"].get("content"):
                first = time.perf_counter()
    ended = time.perf_counter()
    connection.close()
    return 1000 * ((first or ended) - started), 1000 * (ended - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()

    policy = load_policy(args.model, max_new_tokens=args.max_new_tokens, temperature=0.0)
    env = boltzoo.make("math-v0", split="test", max_turns=1)
    chats = []
    for task in range(args.requests):
        env.reset(options={"task_index": task})
        chats.append(env.observe("solver")["messages"])
    policy.generate(chats[:2])  # warm-up

    with Gateway(policy) as gateway:
        url = gateway.base_url
        post(url, gateway.model_name, chats[0], args.max_new_tokens)  # warm-up
        # --- one call at a time
        direct_ms, gateway_ms = [], []
        for chat in chats:
            started = time.perf_counter()
            direct = policy.generate([chat])[0]
            direct_ms.append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            served = post(url, gateway.model_name, chat, args.max_new_tokens)
            gateway_ms.append(1000 * (time.perf_counter() - started))
            if served["choices"][0]["message"]["content"] != direct.text:
                raise SystemExit("the gateway's text differs from the backend's: not comparable")
        # --- all at once
        direct_s, gateway_s, batch_sizes = [], [], []
        for _ in range(args.repeats):
            started = time.perf_counter()
            policy.generate(chats)
            direct_s.append(time.perf_counter() - started)
            before = len(gateway.batch_sizes)
            started = time.perf_counter()
            with ThreadPoolExecutor(len(chats)) as pool:
                list(
                    pool.map(lambda c: post(url, gateway.model_name, c, args.max_new_tokens), chats)
                )
            gateway_s.append(time.perf_counter() - started)
            batch_sizes.extend(gateway.batch_sizes[before:])

        # --- streaming, one call at a time
        first_ms, stream_total_ms = [], []
        for chat in chats:
            first, total = stream_times(url, gateway.model_name, chat, args.max_new_tokens)
            first_ms.append(first)
            stream_total_ms.append(total)

    sequential_overhead = statistics.median(gateway_ms) - statistics.median(direct_ms)
    concurrent_overhead = (
        1000 * (statistics.median(gateway_s) - statistics.median(direct_s)) / len(chats)
    )
    rows = [
        {
            "pattern": "one call at a time",
            "direct_ms_per_call": statistics.median(direct_ms),
            "gateway_ms_per_call": statistics.median(gateway_ms),
            "overhead_ms_per_call": sequential_overhead,
            "ratio": statistics.median(direct_ms) / statistics.median(gateway_ms),
        },
        {
            "pattern": f"{len(chats)} concurrent calls",
            "direct_ms_per_call": 1000 * statistics.median(direct_s) / len(chats),
            "gateway_ms_per_call": 1000 * statistics.median(gateway_s) / len(chats),
            "overhead_ms_per_call": concurrent_overhead,
            "ratio": statistics.median(direct_s) / statistics.median(gateway_s),
            "gateway_mean_batch_size": statistics.mean(batch_sizes),
        },
    ]
    streaming = {
        "pattern": "streaming, one call at a time",
        "first_token_ms": statistics.median(first_ms),
        "stream_end_ms": statistics.median(stream_total_ms),
        "answer_without_streaming_ms": statistics.median(gateway_ms),
        "first_token_ratio": statistics.median(first_ms) / statistics.median(gateway_ms),
    }
    for row in rows:
        print(
            f"{row['pattern']}: direct {row['direct_ms_per_call']:.1f} ms/call, gateway "
            f"{row['gateway_ms_per_call']:.1f} ms/call, overhead {row['overhead_ms_per_call']:.1f} "
            f"ms/call (throughput ratio {row['ratio']:.3f})"
        )
    print(
        f"streaming: first token after {streaming['first_token_ms']:.1f} ms, end after "
        f"{streaming['stream_end_ms']:.1f} ms; without streaming the answer comes after "
        f"{streaming['answer_without_streaming_ms']:.1f} ms (first token at "
        f"{streaming['first_token_ratio']:.2f} of that)"
    )
    rows.append(streaming)
    if args.out:
        write_record(args.out, rows, model=args.model, max_new_tokens=args.max_new_tokens)


if __name__ == "__main__":
    main()
