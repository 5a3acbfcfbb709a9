"""Retrieval quality and speed on rag-v0's bundled questions, when the query is the question.

    python scripts/bench_rag.py [--split test] [--k 5] [--out benchmarks/results/bench_rag.json]

Prints, per retriever (dense faiss over MiniLM, and BM25): recall@k of the first-hop supporting
passage (for 2-hop and 3-hop questions), recall@k of all supporting passages, and queries per
second searched in one batch and one at a time. The aim: recall@5 >= 0.9 on the 2-hop
questions' first hop, since the first hop's entity is named in the question.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import boltzoo
from benchlib import write_record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = parser.parse_args()
    rows = []
    for retriever in ("dense", "bm25"):
        env = boltzoo.make("rag-v0", split=args.split, retriever=retriever).unwrapped
        tasks = env.tasks
        started = time.perf_counter()
        index = env.index_of(tasks[0].corpus_id)
        build_s = time.perf_counter() - started
        questions = [t.question for t in tasks]

        started = time.perf_counter()
        results = index.search_batch(questions, k=args.k)
        batch_qps = len(questions) / (time.perf_counter() - started)
        sample = questions[:100]
        started = time.perf_counter()
        for question in sample:
            index.search(question, k=args.k)
        single_qps = len(sample) / (time.perf_counter() - started)

        row = {
            "retriever": retriever,
            "split": args.split,
            "k": args.k,
            "index_s": build_s,
            "batch_queries_per_s": batch_qps,
            "single_queries_per_s": single_qps,
        }
        for hops in (2, 3):
            chosen = [(t, hits) for t, hits in zip(tasks, results, strict=True) if t.hops == hops]
            first = [t.supporting_ids[0] in {h.passage_id for h in hits} for t, hits in chosen]
            every = [
                sum(p in {h.passage_id for h in hits} for p in t.supporting_ids)
                / len(t.supporting_ids)
                for t, hits in chosen
            ]
            row[f"questions_{hops}hop"] = len(chosen)
            row[f"first_hop_recall_{hops}hop"] = sum(first) / max(1, len(first))
            row[f"support_recall_{hops}hop"] = sum(every) / max(1, len(every))
        rows.append(row)
        print(
            f"{retriever:6} recall@{args.k} first hop: 2-hop {row['first_hop_recall_2hop']:.3f} "
            f"({row['questions_2hop']} q), 3-hop {row['first_hop_recall_3hop']:.3f} "
            f"({row['questions_3hop']} q); all supporting: 2-hop {row['support_recall_2hop']:.3f},"
            f" 3-hop {row['support_recall_3hop']:.3f}; {batch_qps:.0f} q/s batched, "
            f"{single_qps:.0f} q/s one by one; index ready in {build_s:.1f} s"
        )
    if args.out:
        write_record(args.out, rows)


if __name__ == "__main__":
    main()
