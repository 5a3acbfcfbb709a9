"""Tests for boltzoo.envs.data.rag_tasks: the fictional multi-hop world and the file loaders."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from boltzoo.envs.data import rag_tasks
from boltzoo.envs.data.loaders import load_corpus, load_hotpotqa, load_musique
from boltzoo.envs.data.rag_tasks import (
    CORPUS_ID,
    SPLITS,
    Passage,
    RAGDataset,
    RAGTask,
    generate_dataset,
)

# What the generator itself knows (entities, facts, which passage states what, hop chains).
WORLD = rag_tasks._build_world(0)
ALL_TASKS = generate_dataset("train").tasks + generate_dataset("test").tasks
PASSAGES = {p.passage_id: p for p in generate_dataset("train").corpora[CORPUS_ID]}


def word_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")


def named(name: str, text: str) -> bool:
    return word_pattern(name).search(text) is not None


def word_segments(text: str, names: list[str]) -> list[list[str]]:
    """Lowercased words of ``text``, cut into runs at every occurrence of one of ``names``."""
    lowered = text.lower()
    for name in sorted(names, key=len, reverse=True):
        lowered = lowered.replace(name.lower(), " | ")
    return [re.findall(r"[a-z0-9']+", segment) for segment in lowered.split("|")]


def ngrams(segments: list[list[str]], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for words in segments for i in range(len(words) - n + 1)}


def entity_names(task: RAGTask) -> list[str]:
    """The task's entity names: every supporting title, the answer and its aliases."""
    return [PASSAGES[pid].title for pid in task.supporting_ids] + [task.answer, *task.aliases]


# --- determinism and sizes -------------------------------------------------------------------


def test_same_seed_gives_equal_datasets_and_fresh_lists_each_call():
    first = generate_dataset("train", seed=0)
    second = generate_dataset("train", seed=0)
    assert first == second
    assert first.tasks is not second.tasks
    assert first.corpora[CORPUS_ID] is not second.corpora[CORPUS_ID]
    first.tasks.clear()  # mutating a returned list must not touch the cache
    first.corpora[CORPUS_ID].clear()
    assert generate_dataset("train", seed=0) == second


def test_rebuilding_the_world_without_the_cache_gives_the_same_data():
    fresh = rag_tasks._build_world.__wrapped__(0)
    assert fresh.passages == WORLD.passages
    assert fresh.tasks == WORLD.tasks
    assert fresh.chains == WORLD.chains


def world_digest() -> str:
    text = json.dumps(
        [[p.passage_id, p.title, p.text] for p in WORLD.passages]
        + [[t.task_id, t.question, t.answer, list(t.supporting_ids)] for t in WORLD.tasks]
    )
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.slow
def test_world_does_not_depend_on_python_hash_randomisation():
    script = (
        "import hashlib, json\n"
        "from boltzoo.envs.data.rag_tasks import _build_world\n"
        "w = _build_world(0)\n"
        "text = json.dumps([[p.passage_id, p.title, p.text] for p in w.passages]"
        " + [[t.task_id, t.question, t.answer, list(t.supporting_ids)] for t in w.tasks])\n"
        "print(hashlib.sha256(text.encode()).hexdigest())\n"
    )
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
        )
        assert result.stdout.strip() == world_digest()


def test_different_seed_gives_a_different_world():
    other = generate_dataset("train", seed=1)
    assert {t.question for t in other.tasks}.isdisjoint({t.question for t in ALL_TASKS})
    assert {p.title for p in other.corpora[CORPUS_ID]} != {p.title for p in PASSAGES.values()}


def test_defaults_are_train_seed_zero():
    assert generate_dataset() == generate_dataset("train", seed=0)


def test_bad_split_error_names_the_valid_splits():
    with pytest.raises(ValueError, match="train, test"):
        generate_dataset("dev")


def test_corpus_has_at_least_5000_passages_and_1000_questions():
    test = generate_dataset("test")
    assert len(PASSAGES) >= 5000
    assert len(ALL_TASKS) >= 1000
    assert len(test.tasks) >= 200


def test_train_and_test_share_the_whole_corpus_and_have_disjoint_questions():
    train, test = generate_dataset("train"), generate_dataset("test")
    assert list(train.corpora) == list(test.corpora) == [CORPUS_ID]
    assert train.corpora[CORPUS_ID] == test.corpora[CORPUS_ID] == list(WORLD.passages)
    train_questions = {t.question for t in train.tasks}
    test_questions = {t.question for t in test.tasks}
    assert not train_questions & test_questions
    assert len(train_questions) == len(train.tasks) and len(test_questions) == len(test.tasks)
    assert len(ALL_TASKS) == len(WORLD.tasks)


def test_split_is_by_question_hash_about_85_15():
    for split in SPLITS:
        for task in generate_dataset(split).tasks:
            in_test = int(hashlib.sha256(task.question.encode()).hexdigest(), 16) % 100 < 15
            assert in_test == (split == "test")
    share = len(generate_dataset("test").tasks) / len(ALL_TASKS)
    assert 0.10 < share < 0.20


@pytest.mark.parametrize("split", SPLITS)
def test_each_split_has_two_and_three_hop_questions(split):
    hops = Counter(task.hops for task in generate_dataset(split).tasks)
    assert set(hops) == {2, 3}
    assert min(hops.values()) >= 0.3 * sum(hops.values())


def test_task_fields_and_ids():
    ids = [task.task_id for task in ALL_TASKS]
    assert len(set(ids)) == len(ids)
    for task in ALL_TASKS:
        assert task.task_id == f"fv0-{hashlib.sha256(task.question.encode()).hexdigest()[:10]}"
        assert task.corpus_id == CORPUS_ID
        assert task.hops == len(task.supporting_ids) == len(set(task.supporting_ids))
        assert task.template is not None and task.question.endswith("?")
        assert task.answer and task.answer not in task.aliases


def test_every_template_is_used_with_several_phrasings():
    by_template: dict[str, set[str]] = {}
    for task in ALL_TASKS:
        shape = task.question
        for name in entity_names(task)[:1]:
            shape = shape.replace(name, "X")
        by_template.setdefault(task.template, set()).add(shape)
    templates = {name for name, _, _ in rag_tasks._QUESTION_TEMPLATES}
    assert set(by_template) == templates
    assert len(templates) >= 20
    for template, shapes in by_template.items():
        assert len(shapes) >= 3, template


# --- passages ------------------------------------------------------------------------------


def test_passage_ids_are_unique():
    passages = generate_dataset("train").corpora[CORPUS_ID]
    assert len({p.passage_id for p in passages}) == len(passages)


def test_every_passage_has_one_to_four_sentences_and_names_its_entity():
    for passage in WORLD.passages:
        info = WORLD.info[passage.passage_id]
        assert 1 <= len(info.sentences) <= 4
        assert " ".join(info.sentences) == passage.text
        assert info.subject == passage.title
        assert named(passage.title, passage.text), passage


def test_relations_are_phrased_in_several_ways():
    first_sentences = Counter()
    for passage in WORLD.passages:
        info = WORLD.info[passage.passage_id]
        if info.role == "fact" and len(info.relations) == 1 and len(info.sentences) == 1:
            shape = passage.text.replace(passage.title, "X")
            first_sentences[(info.relations[0], re.sub(r"[A-Z][a-z]+|\d{4}", "N", shape))] += 1
    shapes_per_relation = Counter(relation for relation, _ in first_sentences)
    for relation in ("born_in", "born_year", "founder", "headquarters", "leader", "mentor"):
        assert shapes_per_relation[relation] >= 3, relation


def test_each_real_fact_is_stated_in_exactly_one_fact_passage():
    stated = Counter()
    for info in WORLD.info.values():
        if info.role == "fact":
            for relation in info.relations:
                stated[info.subject, relation] += 1
    for entity in WORLD.entities.values():
        if entity.decoy:
            continue
        for relation in entity.facts:
            assert stated[entity.name, relation] == 1, (entity.name, relation)
    assert all(count == 1 for count in stated.values())


def test_decoy_titles_differ_from_real_entities_and_are_never_supporting():
    real = {e.name.lower() for e in WORLD.entities.values() if not e.decoy}
    decoys = [e for e in WORLD.entities.values() if e.decoy]
    assert len(decoys) >= 500
    assert len({e.kind for e in decoys}) >= 4
    for decoy in decoys:
        assert decoy.name.lower() not in real
    decoy_titles = {d.name for d in decoys}
    supporting = {pid for task in ALL_TASKS for pid in task.supporting_ids}
    roles = Counter(WORLD.info[pid].role for pid in supporting)
    assert set(roles) == {"fact"}
    for passage in WORLD.passages:
        if WORLD.info[passage.passage_id].role == "decoy":
            assert passage.title in decoy_titles
        else:
            assert passage.title.lower() in real


def test_each_decoy_is_one_small_change_away_from_a_real_entity_of_its_kind():
    def masked(name: str) -> list[tuple[str, ...]]:
        words = name.split()
        return [tuple(words[:i] + ["*"] + words[i + 1 :]) for i in range(len(words))]

    real: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for entity in WORLD.entities.values():
        if not entity.decoy:
            for position, key in enumerate(masked(entity.name)):
                real.setdefault((entity.kind, key), []).append(entity.name.split()[position])
    org_kinds = {e.subtype for e in WORLD.entities.values() if e.kind == "organisation"}
    for decoy in (e for e in WORLD.entities.values() if e.decoy):
        close = False
        for position, key in enumerate(masked(decoy.name)):
            word = decoy.name.split()[position]
            for other in real.get((decoy.kind, key), []):
                # One vowel (or a vowel pair: "ei" -> "ou") changed, or another organisation kind.
                one_vowel = (
                    len(other) == len(word)
                    and 1 <= sum(a != b for a, b in zip(other, word, strict=True)) <= 2
                )
                close = close or one_vowel or {word, other} <= org_kinds
        assert close, decoy.name


def test_mention_and_decoy_passages_exist_and_state_no_question_fact_of_a_real_entity():
    roles = Counter(info.role for info in WORLD.info.values())
    assert roles["mention"] >= 500 and roles["decoy"] >= 500
    for info in WORLD.info.values():
        if info.role == "mention":
            assert info.relations == ()


def test_entity_names_are_unique_and_avoid_reserved_words():
    names = [e.name.lower() for e in WORLD.entities.values()]
    assert len(set(names)) == len(names)
    for entity in WORLD.entities.values():
        for word in re.findall(r"[a-z]+", entity.name.lower()):
            if entity.kind in ("person", "city", "region", "country"):
                assert word not in rag_tasks._RESERVED, entity.name


# --- questions against their passages ------------------------------------------------------


def test_every_supporting_passage_id_exists_in_the_corpus():
    for task in ALL_TASKS:
        for passage_id in task.supporting_ids:
            assert passage_id in PASSAGES


def test_following_the_hops_by_the_generators_facts_gives_the_answer():
    for task in ALL_TASKS:
        chain = WORLD.chains[task.task_id]
        assert len(chain) == task.hops
        for position, (subject, relation, value) in enumerate(chain):
            assert WORLD.entities[subject].facts[relation] == value
            info = WORLD.info[task.supporting_ids[position]]
            assert info.subject == subject and relation in info.relations
            if position + 1 < len(chain):
                assert chain[position + 1][0] == value
        assert chain[-1][2] == task.answer


def test_answer_is_in_the_last_passage_and_each_bridge_in_the_one_before():
    for task in ALL_TASKS:
        texts = [PASSAGES[pid].text for pid in task.supporting_ids]
        titles = [PASSAGES[pid].title for pid in task.supporting_ids]
        assert named(task.answer, texts[-1]), task
        for position in range(1, task.hops):
            assert named(titles[position], texts[position - 1]), (task, position)


def test_first_hop_entity_is_named_in_the_question_and_later_ones_are_not():
    for task in ALL_TASKS:
        titles = [PASSAGES[pid].title for pid in task.supporting_ids]
        assert named(titles[0], task.question), task
        assert named(titles[0], PASSAGES[task.supporting_ids[0]].text)
        for title in titles[1:]:
            assert not named(title, task.question), task
        for answer in (task.answer, *task.aliases):
            assert not named(answer, task.question), task


def test_questions_do_not_copy_their_passages():
    """No 5 consecutive question words (entity names removed) occur in a supporting passage."""
    longest = 0
    for task in ALL_TASKS:
        names = entity_names(task)
        question_segments = word_segments(task.question, names)
        for passage_id in task.supporting_ids:
            passage_segments = word_segments(PASSAGES[passage_id].text, names)
            for n in range(1, 6):
                if ngrams(question_segments, n) & ngrams(passage_segments, n):
                    longest = max(longest, n)
            shared = ngrams(question_segments, 5) & ngrams(passage_segments, 5)
            assert not shared, (task.question, PASSAGES[passage_id].text, shared)
    assert longest <= 4


def test_person_answers_with_an_honorific_have_it_as_their_alias():
    with_alias = [task for task in ALL_TASKS if task.aliases]
    assert with_alias
    all_text = "\n".join(p.text for p in WORLD.passages)
    for task in ALL_TASKS:
        entity = WORLD.entities.get(task.answer)
        if entity is not None and entity.honorific:
            assert task.aliases == (f"{entity.honorific} {entity.name}",)
            assert task.aliases[0] in all_text
        else:
            assert task.aliases == ()


def test_answers_are_entities_or_years():
    kinds = Counter()
    for task in ALL_TASKS:
        if re.fullmatch(r"1[6-9]\d\d|20\d\d", task.answer):
            kinds["year"] += 1
        else:
            kinds[WORLD.entities[task.answer].kind] += 1
    assert {"year", "person", "city", "country", "region"} <= set(kinds)


# --- MuSiQue ---------------------------------------------------------------------------------


def musique_row(row_id: str, question: str, paragraphs: list[tuple[str, str, bool]], **extra):
    return {
        "id": row_id,
        "question": question,
        "answer": extra.pop("answer", "Paris"),
        "answer_aliases": extra.pop("answer_aliases", []),
        "paragraphs": [
            {"idx": i, "title": title, "paragraph_text": text, "is_supporting": supporting}
            for i, (title, text, supporting) in enumerate(paragraphs)
        ],
        **extra,
    }


def write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


@pytest.fixture
def musique_file(tmp_path):
    path = tmp_path / "musique.jsonl"
    shared = ("Shared Title", "  Shared text,\twith odd  spacing — and ünïcode. ", False)
    rows = [
        musique_row(
            "2hop__1_2",
            "Who is the spouse of the director of Film A?",
            [
                ("Film A", "Film A was directed by B.", True),
                shared,
                ("B", "B married C.", True),
            ],
            answer="C",
            answer_aliases=["Ms. C", "C"],
            answerable=True,
            question_decomposition=[
                {"id": 1, "question": "director of Film A?", "paragraph_support_idx": 0},
                {"id": 2, "question": "spouse of #1", "paragraph_support_idx": 2},
            ],
        ),
        musique_row(
            "3hop__9_8_7",
            "Where was the founder of the maker of D born?",
            [
                ("E", "E was founded by F.", True),
                ("D", "D is made by E.", True),
                shared,
                ("F", "F was born in G.", True),
            ],
            answer="G",
            question_decomposition=[
                {"id": 1, "paragraph_support_idx": 1},
                {"id": 2, "paragraph_support_idx": 0},
                {"id": 3, "paragraph_support_idx": 3},
            ],
        ),
        musique_row(
            "2hop__5_6",
            "Unanswerable?",
            [("H", "H text.", False), ("I", "I text.", False)],
            answer="J",
            answerable=False,
        ),
    ]
    write_jsonl(path, rows)
    return path


def test_load_musique_keeps_rows_in_order_with_aliases_and_hop_ordered_support(musique_file):
    data = load_musique(musique_file)
    assert isinstance(data, RAGDataset)
    assert [t.task_id for t in data.tasks] == ["2hop__1_2", "3hop__9_8_7", "2hop__5_6"]
    first, second, third = data.tasks
    assert first.answer == "C" and first.aliases == ("Ms. C",)
    assert first.supporting_ids == ("2hop__1_2-0", "2hop__1_2-2")
    assert second.supporting_ids == ("3hop__9_8_7-1", "3hop__9_8_7-0", "3hop__9_8_7-3")
    assert (first.hops, second.hops, third.hops) == (2, 3, 0)
    assert third.supporting_ids == () and third.answer == "J"
    assert all(t.template is None for t in data.tasks)


def test_load_musique_gives_each_question_its_own_verbatim_corpus(musique_file):
    data = load_musique(musique_file)
    assert list(data.corpora) == ["2hop__1_2", "3hop__9_8_7", "2hop__5_6"]
    for task in data.tasks:
        assert task.corpus_id == task.task_id
    corpus = data.corpora["2hop__1_2"]
    assert corpus[1] == Passage(
        "2hop__1_2-1", "Shared Title", "  Shared text,\twith odd  spacing — and ünïcode. "
    )
    assert [p.title for p in corpus] == ["Film A", "Shared Title", "B"]


def test_load_musique_shared_corpus_deduplicates_by_title_and_text(musique_file):
    data = load_musique(musique_file, shared_corpus=True)
    assert list(data.corpora) == ["musique-shared"]
    corpus = data.corpora["musique-shared"]
    assert len(corpus) == 3 + 3 + 2  # the shared paragraph appears once
    assert len({p.passage_id for p in corpus}) == len(corpus)
    assert sum(p.title == "Shared Title" for p in corpus) == 1
    by_id = {p.passage_id: p for p in corpus}
    for task in data.tasks:
        assert task.corpus_id == "musique-shared"
        assert all(pid in by_id for pid in task.supporting_ids)
    assert [by_id[pid].title for pid in data.tasks[1].supporting_ids] == ["D", "E", "F"]


def test_load_musique_malformed_row_names_the_file_and_row(tmp_path):
    path = tmp_path / "bad.jsonl"
    good = musique_row("a", "Q?", [("T", "text", True)])
    bad = {"id": "b", "question": "Q?", "answer": "x"}  # no paragraphs
    write_jsonl(path, [good, bad])
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2.*paragraphs"):
        load_musique(path)
    path.write_text(json.dumps(good) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        load_musique(path)
    broken = musique_row("c", "Q?", [("T", "text", True)])
    broken["paragraphs"][0].pop("paragraph_text")
    write_jsonl(path, [good, good | {"id": "d"}, broken])
    with pytest.raises(ValueError, match="line 3.*paragraph_text"):
        load_musique(path)


def test_load_musique_missing_file_raises_with_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_musique(tmp_path / "nope.jsonl")


# --- HotpotQA --------------------------------------------------------------------------------


def hotpot_rows():
    return [
        {
            "_id": "5a8b57f25542995d1e6f1371",
            "question": "Which magazine was started first, Arthur's Magazine or First for Women?",
            "answer": "Arthur's Magazine",
            "type": "comparison",
            "supporting_facts": [["Arthur's Magazine", 0], ["First for Women", 0]],
            "context": [
                ["Radio City", ["Radio City is a radio station.", " It is in India."]],
                ["Arthur's Magazine", ["Arthur's Magazine (1844–1846) was a", " periodical."]],
                ["First for Women", ["First for Women is a woman's magazine.", " Since 1989."]],
            ],
        },
        {
            "_id": "5a8c7595554299585d9e36b6",
            "question": "Who founded the company that made X?",
            "answer": "Y",
            "supporting_facts": [["X", 1], ["Company", 0], ["X", 0]],
            "context": [
                ["Company", ["Company was founded by Y."]],
                ["X", ["X is a product.", " It is made by Company."]],
                ["Radio City", ["Radio City is a radio station.", " It is in India."]],
            ],
        },
    ]


def test_load_hotpotqa_reads_the_json_array_verbatim_in_order(tmp_path):
    path = tmp_path / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps(hotpot_rows()), encoding="utf-8")
    data = load_hotpotqa(path)
    first, second = data.tasks
    assert first.task_id == "5a8b57f25542995d1e6f1371" and second.answer == "Y"
    assert first.aliases == () and first.template is None
    corpus = data.corpora[first.task_id]
    assert corpus[1] == Passage(
        f"{first.task_id}-1", "Arthur's Magazine", "Arthur's Magazine (1844–1846) was a periodical."
    )
    assert first.supporting_ids == (f"{first.task_id}-1", f"{first.task_id}-2")
    assert second.supporting_ids == (f"{second.task_id}-1", f"{second.task_id}-0")
    assert first.hops == second.hops == 2
    assert [t.corpus_id for t in data.tasks] == [first.task_id, second.task_id]


def test_load_hotpotqa_shared_corpus_deduplicates(tmp_path):
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps(hotpot_rows()), encoding="utf-8")
    data = load_hotpotqa(path, shared_corpus=True)
    corpus = data.corpora["hotpotqa-shared"]
    assert len(corpus) == 5  # "Radio City" is in both rows
    by_id = {p.passage_id: p for p in corpus}
    assert [by_id[pid].title for pid in data.tasks[1].supporting_ids] == ["X", "Company"]
    assert all(t.corpus_id == "hotpotqa-shared" for t in data.tasks)


def test_load_hotpotqa_also_reads_jsonl_and_the_column_layout(tmp_path):
    row = hotpot_rows()[1]
    columnar = {
        "id": "hf-1",
        "question": row["question"],
        "answer": row["answer"],
        "context": {
            "title": [title for title, _ in row["context"]],
            "sentences": [sentences for _, sentences in row["context"]],
        },
        "supporting_facts": {"title": ["X", "Company"], "sent_id": [1, 0]},
    }
    path = tmp_path / "hotpot.jsonl"
    write_jsonl(path, [row, columnar])
    data = load_hotpotqa(path)
    assert [t.task_id for t in data.tasks] == ["5a8c7595554299585d9e36b6", "hf-1"]
    assert data.tasks[1].supporting_ids == ("hf-1-1", "hf-1-0")
    assert data.corpora["hf-1"][1].text == "X is a product. It is made by Company."


def test_load_hotpotqa_malformed_row_names_the_file_and_row(tmp_path):
    path = tmp_path / "hotpot.json"
    rows = hotpot_rows()
    del rows[1]["context"]
    path.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(ValueError, match=r"hotpot\.json, row 2.*context"):
        load_hotpotqa(path)
    rows = hotpot_rows()
    rows[0]["supporting_facts"].append(["Nowhere", 0])
    path.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(ValueError, match="row 1.*Nowhere"):
        load_hotpotqa(path)
    path.write_text("[{]", encoding="utf-8")
    with pytest.raises(ValueError, match="bad JSON"):
        load_hotpotqa(path)


def test_load_hotpotqa_missing_file_raises_with_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_hotpotqa(tmp_path / "missing.json")


# --- user corpora ----------------------------------------------------------------------------


def test_load_corpus_reads_passages_verbatim(tmp_path):
    path = tmp_path / "corpus.jsonl"
    rows = [
        {"id": "doc-1", "title": "Alpha", "text": " Alpha text\twith tabs. "},
        {"id": 2, "title": "", "text": "No title."},
        {"id": "doc-3", "text": "Title-less row."},
    ]
    path.write_text(json.dumps(rows[0]) + "\n\n" + "\n".join(map(json.dumps, rows[1:])) + "\n")
    assert load_corpus(path) == [
        Passage("doc-1", "Alpha", " Alpha text\twith tabs. "),
        Passage("2", "", "No title."),
        Passage("doc-3", "", "Title-less row."),
    ]


def test_load_corpus_malformed_rows_name_the_line(tmp_path):
    path = tmp_path / "corpus.jsonl"
    write_jsonl(path, [{"id": "a", "text": "x"}, {"id": "b"}])
    with pytest.raises(ValueError, match=r"corpus\.jsonl, line 2.*text"):
        load_corpus(path)
    write_jsonl(path, [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])
    with pytest.raises(ValueError, match="line 2.*used twice"):
        load_corpus(path)
    write_jsonl(path, [{"title": "no id", "text": "x"}])
    with pytest.raises(ValueError, match="line 1.*id"):
        load_corpus(path)


def test_load_corpus_missing_file_raises_with_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="absent.jsonl"):
        load_corpus(tmp_path / "absent.jsonl")
