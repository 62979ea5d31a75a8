"""The per-unit embedding store: lookups by text, damaged rows and packs, eviction, concurrent
writers (no model needed), and `quantize: auto`'s choice of precision from the CPU's flags."""

from __future__ import annotations

import multiprocessing
import os
import struct
from pathlib import Path

import numpy as np
import pytest

from evalpipe.evaluation.identity import config_hash
from evalpipe.rankers.dense import embed_store, precision
from evalpipe.rankers.dense.embed_store import Pack, UnitStore, evict, settings_key, text_digest
from evalpipe.rankers.dense.semantic import SemanticRanker
from evalpipe.reporting.params import measurement_params

SETTINGS = {"model": "m", "model_fingerprint": "f", "engine": "torch", "quantize": "fp32",
            "max_seq_length": 256, "normalize": True}  # fmt: skip


def _vectors(n: int, d: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _texts(n: int, tag: str = "") -> list[str]:
    return [f"func F{i}{tag}() {{ return {i} }}" for i in range(n)]


def test_round_trip_by_text_and_settings(tmp_path):
    store = UnitStore(tmp_path, SETTINGS)
    texts, vectors = _texts(5), _vectors(5)
    digests = [text_digest(t) for t in texts]
    assert store.lookup(digests).found == {}  # an absent folder is a miss
    path = store.add(digests, vectors)
    assert path.parent == tmp_path / "units-v1" / settings_key(SETTINGS)[:32] and path.suffix == ".pack"
    found = store.lookup([*digests, text_digest("never stored")]).found
    assert set(found) == set(digests)
    for d, v in zip(digests, vectors, strict=True):
        np.testing.assert_array_equal(found[d], v)
    # the same texts under other settings are another folder: a miss
    assert UnitStore(tmp_path, {**SETTINGS, "max_seq_length": 128}).lookup(digests).found == {}
    assert UnitStore(tmp_path, {**SETTINGS, "quantize": "bf16"}).lookup(digests).found == {}
    # the digest is of the exact text (one character more is another entry)
    assert text_digest(texts[0]) != text_digest(texts[0] + " ")
    assert '"max_seq_length": 256' in (store.dir / "settings.json").read_text()


def test_one_changed_text_is_the_only_miss(tmp_path):
    store = UnitStore(tmp_path, SETTINGS)
    texts = _texts(100)
    store.add([text_digest(t) for t in texts], _vectors(100))
    edited = list(texts)
    edited[37] += "\n// edited"
    found = store.lookup([text_digest(t) for t in edited]).found
    missing = [i for i, t in enumerate(edited) if text_digest(t) not in found]
    assert missing == [37]


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x55
    path.write_bytes(bytes(data))


def test_a_damaged_row_is_a_miss_and_the_others_still_hit(tmp_path):
    store = UnitStore(tmp_path, SETTINGS)
    texts, vectors = _texts(10), _vectors(10, d=8)
    digests = [text_digest(t) for t in texts]
    path = store.add(digests, vectors)
    n, d = 10, 8
    header = struct.calcsize("<8sII")
    _flip(path, header + n * 32 + n * 4 + 3 * d * 4 + 5)  # a byte of row 3's vector
    _flip(path, header + 6 * 32 + 1)  # a byte of row 6's digest
    got = store.lookup(digests)
    assert sorted(i for i, dg in enumerate(digests) if dg not in got.found) == [3, 6]
    assert got.damaged_rows == 1  # row 6's digest no longer names any wanted text
    # re-embedding writes a new pack; the damaged one is passed over for those rows
    store.add([digests[3], digests[6]], vectors[[3, 6]])
    again = store.lookup(digests).found
    assert len(again) == 10
    np.testing.assert_array_equal(again[digests[3]], vectors[3])


@pytest.mark.parametrize("damage", ["truncate", "magic", "empty", "nan"])
def test_a_damaged_pack_is_a_miss(tmp_path, damage):
    store = UnitStore(tmp_path, SETTINGS)
    digests = [text_digest(t) for t in _texts(4)]
    vectors = _vectors(4)
    if damage == "nan":
        vectors[2, 0] = np.nan  # a non-finite vector (e.g. a broken model) is never served
    path = store.add(digests, vectors)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) - 7])
    elif damage == "magic":
        path.write_bytes(b"XXXXXXXX" + data[8:])
    elif damage == "empty":
        path.write_bytes(b"")
    found = store.lookup(digests).found
    if damage == "nan":
        assert set(found) == set(digests) - {digests[2]}
    else:
        assert found == {}
        assert Pack.read(path) is None


def test_a_pack_without_its_pack_crc_is_checked_row_by_row(tmp_path):
    store = UnitStore(tmp_path, SETTINGS)
    digests = [text_digest(t) for t in _texts(6)]
    vectors = _vectors(6)
    path = store.add(digests, vectors)
    data = bytearray(path.read_bytes()[:-4])  # the last 4 bytes are the CRC of the whole pack
    data[-1] ^= 0x01  # a bit of the last row's vector
    path.write_bytes(bytes(data))
    pack = Pack.read(path)
    assert pack is not None and not pack.intact
    found = store.lookup(digests).found
    assert set(found) == set(digests[:5])
    np.testing.assert_array_equal(found[digests[0]], vectors[0])


def test_pack_rejects_mismatched_input():
    with pytest.raises(ValueError, match="digests"):
        embed_store.pack_bytes([b"x" * 32], _vectors(2))
    with pytest.raises(ValueError, match="32-byte"):
        embed_store.pack_bytes([b"short"], _vectors(1))


def test_eviction_is_lru_by_mtime_under_the_byte_cap_and_keeps_what_the_run_used(tmp_path):
    store = UnitStore(tmp_path, SETTINGS)
    paths = []
    for i in range(4):
        paths.append(store.add([text_digest(t) for t in _texts(10, f"-{i}")], _vectors(10, seed=i)))
        os.utime(paths[-1], (1000 + i, 1000 + i))  # pack i last used at t=1000+i
    size = paths[0].stat().st_size
    # a lookup refreshes the mtime of the packs it read from: pack 0 becomes the newest
    assert store.lookup([text_digest(_texts(10, "-0")[0])]).used == {paths[0]}
    removed = evict(store.root, max_bytes=2 * size, keep=[paths[1]])
    # oldest first: pack 1 (kept, this run used it) is skipped, so packs 2 then 3 go
    assert removed == [paths[2], paths[3]]
    assert sorted(p.name for p in store.dir.glob("*.pack")) == sorted([paths[0].name, paths[1].name])
    assert evict(store.root, max_bytes=10 * size) == []  # under the cap: nothing goes


def test_store_describes_itself(tmp_path, capsys):
    store = UnitStore(tmp_path, SETTINGS)
    store.add([text_digest(t) for t in _texts(3)], _vectors(3))
    assert embed_store.main([str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "1 packs  3 rows" in shown and "max_seq_length=256" in shown and "quantize=fp32" in shown
    assert embed_store.main([str(tmp_path), "--evict-to", "0"]) == 0
    assert list(store.dir.glob("*.pack")) == []


def _writer(root: str, seed: int) -> None:
    store = UnitStore(root, SETTINGS)
    texts = _texts(300)
    for _ in range(5):
        store.add([text_digest(t) for t in texts[seed::3]], _vectors(300, seed=9)[seed::3])
        store.lookup([text_digest(t) for t in texts])


def test_concurrent_writers_and_readers_never_see_half_a_pack(tmp_path):
    ctx = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    )
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), s)) for s in range(3)]
    for p in procs:
        p.start()
    store = UnitStore(tmp_path, SETTINGS)
    expected = _vectors(300, seed=9)
    digests = [text_digest(t) for t in _texts(300)]
    while any(p.is_alive() for p in procs):
        got = store.lookup(digests)
        assert got.damaged_rows == 0 and got.damaged_packs == 0
        for i, dg in enumerate(digests):
            if dg in got.found:
                np.testing.assert_array_equal(got.found[dg], expected[i])
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(store.lookup(digests).found) == 300
    assert not [p for p in store.dir.iterdir() if p.name.endswith(".tmp")]


# -- quantize: auto -------------------------------------------------------------------------------

CPUINFO_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni avx512_bf16 amx_tile amx_bf16\n"
CPUINFO_PLAIN = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni\n"


@pytest.fixture
def cpuinfo(tmp_path, monkeypatch):
    def use(text: str | None) -> None:
        path = tmp_path / "cpuinfo"
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(text)
        monkeypatch.setattr(precision, "CPUINFO", str(path))

    return use


def test_auto_is_bf16_only_where_the_cpu_has_native_bf16(cpuinfo):
    cpuinfo(CPUINFO_BF16)
    assert precision.native_bf16() and precision.resolve_quantize("auto") == "bf16"
    assert SemanticRanker().quantize == "bf16" and SemanticRanker().quantize_setting == "auto"
    # the onnx engine has no bf16 path; another device is not this CPU
    assert precision.resolve_quantize("auto", engine="onnx") is None
    assert precision.resolve_quantize("auto", device="cuda") is None
    cpuinfo(CPUINFO_PLAIN)
    assert not precision.native_bf16() and precision.resolve_quantize("auto") is None
    assert SemanticRanker().quantize is None
    cpuinfo(None)  # unreadable /proc/cpuinfo: fp32
    assert precision.cpu_flags() == set() and SemanticRanker().quantize is None


def test_null_is_fp32_and_explicit_values_are_kept_whatever_the_cpu(cpuinfo):
    cpuinfo(CPUINFO_BF16)
    assert SemanticRanker(quantize=None).quantize is None
    cpuinfo(CPUINFO_PLAIN)
    assert SemanticRanker(quantize="bf16").quantize == "bf16"
    assert SemanticRanker(quantize="int8").quantize == "int8"


def test_the_resolved_precision_is_the_logged_param(cpuinfo):
    ranker = {
        "_target_": "evalpipe.rankers.dense.semantic.SemanticRanker",
        "quantize": "auto",
        "engine": "torch",
    }
    cpuinfo(CPUINFO_BF16)
    assert measurement_params({"ranker": ranker}, "semantic")["ranker.quantize"] == "bf16 (auto)"
    cpuinfo(CPUINFO_PLAIN)
    assert measurement_params({"ranker": ranker}, "semantic")["ranker.quantize"] == "fp32 (auto)"
    assert (
        measurement_params({"ranker": {**ranker, "quantize": None}}, "semantic")["ranker.quantize"] == "None"
    )


def test_auto_is_resolved_in_the_reuse_identity(cpuinfo):
    cfg = {"ranker": {"_target_": "evalpipe.rankers.dense.semantic.SemanticRanker", "quantize": "auto"}}
    cpuinfo(CPUINFO_BF16)
    on_bf16 = config_hash(cfg, "fixture", "code")
    cpuinfo(CPUINFO_PLAIN)
    assert config_hash(cfg, "fixture", "code") != on_bf16  # never reused across the two machines
    explicit = {"ranker": {**cfg["ranker"], "quantize": "bf16"}}
    assert config_hash(explicit, "fixture", "code") != on_bf16
