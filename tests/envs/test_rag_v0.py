"""rag-v0: the PettingZoo contract, searcher/answerer protocol, data sources, scoring."""

from __future__ import annotations

import pytest
from pettingzoo.test import api_test

import boltzoo
from boltzoo.agents import NaivePolicy, OraclePolicy
from boltzoo.errors import DatasetError

TEAM = ("searcher", "answerer")
VARIANTS = [TEAM, ("answerer",)]


@pytest.mark.parametrize("agents", VARIANTS)
@pytest.mark.parametrize("retriever", ["dense", "bm25"])
def test_pettingzoo_api_test_passes(agents, retriever):
    api_test(boltzoo.make("boltzoo/rag-v0", agents=agents, retriever=retriever), num_cycles=60)


@pytest.mark.parametrize("agents", VARIANTS)
@pytest.mark.slow
def test_oracle_scores_one_on_every_bundled_test_task(agents):
    env = boltzoo.make("rag-v0", split="test")
    episodes = boltzoo.rollout(
        "rag-v0",
        {a: OraclePolicy() for a in agents},
        tasks=range(env.unwrapped.num_tasks),
        split="test",
        agents=agents,
        progress=False,
    )
    assert len(episodes) >= 150
    assert not [e.error for e in episodes if e.failed]
    assert all(e.success and e.score == 1.0 for e in episodes)


@pytest.mark.slow
def test_oracle_searcher_finds_the_supporting_passages():
    episodes = boltzoo.rollout(
        "rag-v0",
        {a: OraclePolicy() for a in TEAM},
        tasks=range(100),
        split="test",
        max_searches=3,
        progress=False,
    )
    found = [e.steps[-1].info["supporting_retrieved"] for e in episodes]
    env = boltzoo.make("rag-v0", split="test")
    needed = [len(env.unwrapped.tasks[i].supporting_ids) for i in range(100)]
    # Searching with the name of the entity a passage is about brings that passage back.
    assert sum(f >= min(n, 3) for f, n in zip(found, needed, strict=True)) >= 95


def test_oracle_scores_one_on_a_musique_file(musique_file):
    for shared in (False, True):
        episodes = boltzoo.rollout(
            "rag-v0",
            {a: OraclePolicy() for a in TEAM},
            tasks=[0, 1],
            dataset="musique",
            path=str(musique_file),
            shared_corpus=shared,
            progress=False,
        )
        assert [e.score for e in episodes] == [1.0, 1.0]
    with pytest.raises(DatasetError, match="'train' split only"):
        boltzoo.make("rag-v0", dataset="musique", path=str(musique_file), split="test")
    files = {"train": str(musique_file), "dev": str(musique_file)}
    assert boltzoo.make("rag-v0", dataset="musique", path=files, split="dev").unwrapped.num_tasks


def test_answerer_sees_retrieved_passages_verbatim_and_is_scored_by_f1(musique_file):
    env = boltzoo.make("rag-v0", dataset="musique", path=str(musique_file), max_searches=1, k=2)
    env.reset(options={"task_index": 0})
    env.step("author of Gray Tides")
    assert env.agent_selection == "answerer"
    text = env.observe("answerer")["messages"][-1]["content"]
    assert "Gray Tides is a novel written by Ansel Brook in 1931." in text
    assert "In which city was the author of Gray Tides born?" in text
    assert "Velmora" not in env.observe("answerer")["messages"][0]["content"]
    env.step("Answer: the city of Velmora")
    # F1 of "city of velmora" vs "velmora city": overlap 2, precision 2/3, recall 1 -> 0.8
    assert env.unwrapped.episode.score == pytest.approx(0.8)
    assert env.unwrapped.episode.success is False
    env.reset(options={"task_index": 0})
    env.step("Gray Tides")
    env.step("Answer: Velmora City")
    assert env.unwrapped.episode.success is True and env.unwrapped.episode.score == 1.0


def test_searcher_sees_results_and_may_stop_early(musique_file):
    env = boltzoo.make("rag-v0", dataset="musique", path=str(musique_file), max_searches=3)
    env.reset(options={"task_index": 0})
    env.step("Gray Tides novel")
    chat = env.observe("searcher")["messages"]
    assert chat[-1]["role"] == "tool" and "Ansel Brook" in chat[-1]["content"]
    env.step("DONE")
    assert env.agent_selection == "answerer"
    assert env.infos["searcher"]["searches"] == 1


def test_tool_reward_pays_newly_found_supporting_passages(musique_file):
    env = boltzoo.make(
        "rag-v0", dataset="musique", path=str(musique_file), tool_reward=0.1, k=1, max_searches=2
    )
    env.reset(options={"task_index": 0})
    env.step("Gray Tides is a novel written by Ansel Brook in 1931.")
    env.step("Gray Tides is a novel written by Ansel Brook in 1931.")  # nothing new
    env.step("Answer: nowhere")
    episode = env.unwrapped.episode
    assert episode.steps[0].rewards["searcher"] == pytest.approx(0.1)
    assert episode.steps[1].rewards["searcher"] == 0.0
    assert episode.score == 0.0


@pytest.mark.slow
def test_wrong_answer_scores_zero_and_naive_is_worse_than_oracle():
    episodes = boltzoo.rollout(
        "rag-v0", {a: NaivePolicy() for a in TEAM}, tasks=range(100), split="test", progress=False
    )
    assert not any(e.failed for e in episodes)
    assert sum(e.score for e in episodes) / 100 < 0.5


@pytest.mark.parametrize("query", ["", "   ", "x" * 100_000, "中文 😀 \x00\u202e"])
def test_any_query_is_handled(query):
    env = boltzoo.make("rag-v0", retriever="bm25")
    env.reset(options={"task_index": 0})
    env.step(query)
    assert env.agent_selection == "searcher"
    assert env.observe("searcher")["messages"][-1]["role"] == "tool"


def test_observations_never_hold_the_gold_answer():
    env = boltzoo.make("rag-v0", split="test", agents=("answerer",), retriever="bm25")
    for index in range(30):
        env.reset(options={"task_index": index})
        task = env.unwrapped.current_task
        messages = env.observe("answerer")["messages"]
        assert task.question in messages[-1]["content"]
        assert task.question not in messages[0]["content"]
        # the answer may stand in a retrieved passage (that is the evidence), never anywhere
        # else: not in the instructions, the question or any line the env writes itself
        text = "\n".join(m["content"] for m in messages)
        assert "Passages:" in text and "Question:" in text
        evidence = text.split("Passages:", 1)[1].rsplit("Question:", 1)[0]
        rest = text.replace(evidence, "").lower()
        assert task.question.lower() in rest
        for answer in [task.answer, *task.aliases]:
            assert answer.lower() not in rest, (index, answer)


def test_hops_keeps_only_questions_of_that_many_hops():
    every = boltzoo.make("rag-v0", split="test", retriever="bm25").unwrapped.tasks
    two_hop = boltzoo.make("rag-v0", split="test", hops=2, retriever="bm25").unwrapped.tasks
    both = boltzoo.make("rag-v0", split="test", hops=(2, 3), retriever="bm25").unwrapped.tasks
    assert two_hop == [task for task in every if len(task.supporting_ids) == 2]
    assert 0 < len(two_hop) < len(every)
    assert both == every
    with pytest.raises(DatasetError, match="hops"):
        boltzoo.make("rag-v0", split="test", hops=5, retriever="bm25")


@pytest.mark.parametrize("question_search", [True, False])
def test_the_answerer_alone_starts_with_the_question_s_passages_or_none(question_search):
    # question_search=False is for an answerer with the search tool: it must find every passage
    env = boltzoo.make(
        "rag-v0", split="test", agents=("answerer",), retriever="bm25",
        question_search=question_search,
    )  # fmt: skip
    env.reset(seed=0)
    passages = env.observe("answerer")["messages"][-1]["content"]
    assert ("(no passages found)" in passages) is not question_search
    assert (env.infos["answerer"]["retrieved"] > 0) is question_search
    api_test(env, num_cycles=20)
