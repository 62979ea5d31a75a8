"""The embedding cache: keys, round trips, corrupt entries and concurrent writers (no model needed)."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import numpy as np
import pytest

from evalpipe.rankers.dense.embed_cache import EmbeddingCache, model_fingerprint, texts_sha256

BASE = dict(
    corpus_sha256="c" * 64,
    texts=["alpha", "beta"],
    model="m",
    model_fingerprint="f",
    template="{title}",
    max_seq_length=256,
    normalize=True,
)


def test_key_is_stable_and_order_independent_in_names():
    a = EmbeddingCache.key(**BASE)
    b = EmbeddingCache.key(**dict(reversed(list(BASE.items()))))
    assert a == b
    assert len(a) == 64 and int(a, 16) >= 0


@pytest.mark.parametrize(
    "change",
    [
        {"corpus_sha256": "d" * 64},
        {"texts": ["alpha", "gamma"]},
        {"texts": ["beta", "alpha"]},  # order matters: row i is unit i
        {"texts": ["alphabeta"]},  # item boundaries matter
        {"texts": ["alph", "abeta"]},
        {"model": "other"},
        {"model_fingerprint": "g"},
        {"template": "{text}"},
        {"max_seq_length": 128},
        {"normalize": False},
    ],
)
def test_every_part_changes_the_key(change):
    assert EmbeddingCache.key(**{**BASE, **change}) != EmbeddingCache.key(**BASE)


def test_texts_digest_separates_item_boundaries():
    assert texts_sha256(["ab", "c"]) != texts_sha256(["a", "bc"])


def test_save_load_round_trip_and_sidecar(tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    key = cache.key(**BASE)
    assert cache.load(key) is None  # miss on an empty (even absent) directory
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    path = cache.save(key, matrix, {"model": "m", "template": "{title}"})
    assert path == tmp_path / "emb" / f"{key}.npy"
    loaded = cache.load(key)
    assert loaded is not None and loaded.dtype == np.float32
    np.testing.assert_array_equal(loaded, matrix)
    meta = json.loads((tmp_path / "emb" / f"{key}.json").read_text())
    assert meta["shape"] == [3, 4] and meta["model"] == "m" and meta["key"] == key and meta["created"]
    # no temporary files are left behind
    assert sorted(p.name for p in (tmp_path / "emb").iterdir()) == [f"{key}.json", f"{key}.npy"]


def test_float64_input_is_stored_as_float32(tmp_path):
    cache = EmbeddingCache(tmp_path)
    cache.save("k", np.ones((2, 3), dtype=np.float64))
    assert cache.load("k").dtype == np.float32


def test_truncated_file_is_a_miss_and_is_overwritten(tmp_path):
    cache = EmbeddingCache(tmp_path)
    matrix = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    path = cache.save("k", matrix)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # e.g. a full disk during a non-atomic copy
    assert cache.load("k") is None
    cache.save("k", matrix)
    np.testing.assert_array_equal(cache.load("k"), matrix)


@pytest.mark.parametrize("content", [b"", b"not a numpy file", b"\x93NUMPY\x01\x00garbage"])
def test_garbage_file_is_a_miss(tmp_path, content):
    cache = EmbeddingCache(tmp_path)
    cache.path("k").write_bytes(content)
    assert cache.load("k") is None


def test_wrong_dtype_or_rank_or_sidecar_shape_is_a_miss(tmp_path):
    cache = EmbeddingCache(tmp_path)
    np.save(cache.path("a"), np.ones((2, 2), dtype=np.float64))
    np.save(cache.path("b"), np.ones(4, dtype=np.float32))
    assert cache.load("a") is None and cache.load("b") is None
    cache.save("c", np.ones((2, 2), dtype=np.float32))
    cache.meta_path("c").write_text(json.dumps({"shape": [3, 2]}))
    assert cache.load("c") is None
    with pytest.raises(ValueError, match="2-D"):
        cache.save("d", np.ones(3))


def _writer(directory: str, seed: int, rounds: int) -> None:
    cache = EmbeddingCache(directory)
    matrix = np.random.default_rng(seed).standard_normal((200, 64)).astype(np.float32)
    for _ in range(rounds):
        cache.save("shared", matrix, {"writer": seed})


def _expected() -> np.ndarray:
    return np.random.default_rng(7).standard_normal((200, 64)).astype(np.float32)


def test_concurrent_thread_writers_leave_a_correct_file(tmp_path):
    # Same key means same content in practice (same inputs), so all writers write the same matrix.
    cache = EmbeddingCache(tmp_path)
    seen: list[np.ndarray | None] = []

    def reader() -> None:
        for _ in range(30):
            seen.append(cache.load("shared"))

    threads = [threading.Thread(target=_writer, args=(str(tmp_path), 7, 20)) for _ in range(4)]
    threads.append(threading.Thread(target=reader))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(cache.load("shared"), _expected())
    # a concurrent reader sees either a miss or the complete matrix, never a partial one
    for got in seen:
        assert got is None or np.array_equal(got, _expected())
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []


def test_concurrent_process_writers_leave_a_correct_file(tmp_path):
    ctx = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), 7, 10)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    np.testing.assert_array_equal(EmbeddingCache(tmp_path).load("shared"), _expected())


def test_unwritable_directory_raises_oserror(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OSError):
        EmbeddingCache(blocker / "sub").save("k", np.ones((1, 1), dtype=np.float32))


def _fake_model(root: Path, config: str, weights: bytes) -> Path:
    (root / "1_Pooling").mkdir(parents=True)
    (root / "config.json").write_text(config)
    (root / "1_Pooling" / "config.json").write_text("{}")
    (root / "model.safetensors").write_bytes(weights)
    (root / "README.md").write_text("docs")
    return root


def test_model_fingerprint_tracks_content_not_location(tmp_path):
    weights = bytes(range(256)) * (3 << 12)  # 3 MiB: hashed as size + head + tail
    a = model_fingerprint(_fake_model(tmp_path / "a", '{"dim": 384}', weights))
    moved = model_fingerprint(_fake_model(tmp_path / "elsewhere" / "b", '{"dim": 384}', weights))
    other_config = model_fingerprint(_fake_model(tmp_path / "c", '{"dim": 768}', weights))
    other_tail = model_fingerprint(_fake_model(tmp_path / "d", '{"dim": 384}', weights[:-1] + b"\x00"))
    assert a == moved
    assert len({a, other_config, other_tail}) == 3
    (tmp_path / "a" / "README.md").write_text("edited docs")  # docs do not change embeddings
    assert model_fingerprint(tmp_path / "a") == a
