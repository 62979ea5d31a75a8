"""The per-unit embedding cache: one vector per (model and settings, exact text fed to the model).

Why per unit: the whole-corpus cache it replaces was keyed on every text at once, so editing
one file of a 15k-unit repository embedded all 15k units again (about 25 minutes on two
cores). Here a unit's vector is found by the sha256 of its rendered text inside the folder of
its settings, so a corpus where 1% of the units changed embeds 1% of them, and two corpora
sharing units (a fixture's dev and test splits, two snapshots of a repository) share vectors.

Layout (`python -m evalpipe.rankers.dense.embed_store <cache_dir>` prints it)::

    <cache_dir>/units-v1/<settings key>/settings.json     what the key was made of
    <cache_dir>/units-v1/<settings key>/<name>.pack       immutable packs of vectors

The settings key is a sha256 over the model (label and content fingerprint), engine,
precision, `max_seq_length` and normalisation: everything but the text that changes a vector.
A pack is written once, atomically (`evalpipe.atomic.write_atomic`), by the run that embedded
its rows, and never modified: concurrent runs of a sweep each add their own pack and can never
see half of one. Why packs and not one file per unit: writing 15k small files cost
(measured, `docs/performance.md`) far more than one pack, and reading them back costs 15k opens.

Pack format (little-endian): the 8-byte magic ``EPUNIT01``, uint32 rows ``n``, uint32
dimension ``d``; then ``n`` 32-byte sha256 digests of the texts; ``n`` uint32 CRC-32s, each
over its digest and its vector's bytes; the ``n x d`` float32 vectors; and a CRC-32 of all of
the above. A pack of the wrong size or with a bad header is skipped whole; when the pack's CRC
matches, its rows are served as they are (one check per pack: a warm 15k-unit run costs about
what loading one whole matrix did); otherwise each row is checked, and a row whose CRC does not
match is a miss (re-embedded and written to a new pack). A vector that is not finite is a miss.

Bounded: after a run writes a pack, if all packs under `units-v1/` together exceed
`max_bytes`, whole packs are deleted least recently used first (by mtime, which a run
refreshes on every pack it reads a row from), never one the current run used. A corpus whose
rows are spread over more than `MAX_PACKS_PER_CORPUS` packs (after many edit-and-re-run
rounds) is written again as one pack, so the next run reads one file, and the old packs age out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import sys
import time
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.atomic import write_atomic
from evalpipe.safety.cli_parser import CommandParser

FORMAT = 1
MAGIC = b"EPUNIT01"
_HEADER = struct.Struct("<8sII")
DIGEST_BYTES = 32
#: Default bound on all packs under one cache directory (`ranker.cache_max_bytes`).
DEFAULT_MAX_BYTES = 2 << 30
#: More packs than this for one corpus: it is written again as one pack.
MAX_PACKS_PER_CORPUS = 8


def text_digest(text: str) -> bytes:
    """The 32-byte sha256 of a text exactly as it is fed to the model (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def settings_key(settings: Mapping[str, Any]) -> str:
    """sha256 over the settings as canonical JSON (order of the names does not matter)."""
    blob = json.dumps({"format": FORMAT, **settings}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _row_crc(digest: bytes, vector: np.ndarray) -> int:
    return zlib.crc32(vector.tobytes(), zlib.crc32(digest))


@dataclass
class Pack:
    """One pack read from disk: its digests, their CRCs and the vectors (views on the file's bytes)."""

    path: Path
    digests: list[bytes]
    crcs: np.ndarray
    vectors: np.ndarray
    intact: bool  # the whole-pack CRC matches: no row needs checking

    @classmethod
    def read(cls, path: Path) -> Pack | None:
        """The pack, or None when it is gone, unreadable, or its size or header is wrong."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        if len(data) < _HEADER.size:
            return None
        magic, n, d = _HEADER.unpack_from(data)
        body = _HEADER.size + n * (DIGEST_BYTES + 4 + 4 * d)
        if magic != MAGIC or d == 0 or len(data) not in (body, body + 4):
            return None
        # without its last 4 bytes (the pack CRC) a pack is still read, every row checked
        intact = (
            len(data) == body + 4
            and zlib.crc32(memoryview(data)[:body]) == struct.unpack_from("<I", data, body)[0]
        )
        off = _HEADER.size
        keys = data[off : off + n * DIGEST_BYTES]
        off += n * DIGEST_BYTES
        crcs = np.frombuffer(data, dtype="<u4", count=n, offset=off)
        off += 4 * n
        vectors = np.frombuffer(data, dtype="<f4", count=n * d, offset=off).reshape(n, d)
        digests = [keys[i : i + DIGEST_BYTES] for i in range(0, len(keys), DIGEST_BYTES)]
        return cls(path, digests, crcs, vectors, intact)

    def rows(self, wanted: Iterable[bytes]) -> tuple[dict[bytes, np.ndarray], int]:
        """The wanted digests' vectors found here, and how many found rows were damaged: when
        the pack is intact only non-finite vectors are refused, else every row's CRC is checked."""
        index = dict(zip(self.digests, range(len(self.digests)), strict=True))
        hits = [(d, i) for d in wanted if (i := index.get(d)) is not None]
        finite = np.isfinite(self.vectors).all(axis=1)
        out, damaged = {}, 0
        for digest, i in hits:
            vector = self.vectors[i]
            if not finite[i] or (not self.intact and _row_crc(digest, vector) != int(self.crcs[i])):
                damaged += 1
                continue
            out[digest] = vector
        return out, damaged


def pack_bytes(digests: Sequence[bytes], vectors: np.ndarray) -> bytes:
    """The on-disk form of a pack (see the module docstring)."""
    vectors = np.ascontiguousarray(vectors, dtype="<f4")
    if vectors.ndim != 2 or vectors.shape[0] != len(digests) or vectors.shape[1] == 0:
        raise ValueError(f"embedding store: {len(digests)} digests for a matrix of shape {vectors.shape}")
    if any(len(d) != DIGEST_BYTES for d in digests):
        raise ValueError("embedding store: digests must be 32-byte sha256 values")
    crcs = np.array([_row_crc(k, v) for k, v in zip(digests, vectors, strict=True)], dtype="<u4")
    n, d = vectors.shape
    blob = b"".join((_HEADER.pack(MAGIC, n, d), *digests, crcs.tobytes(), vectors.tobytes()))
    return blob + struct.pack("<I", zlib.crc32(blob))


@dataclass
class Lookup:
    """What a lookup found: digest -> vector, and the packs the vectors came from."""

    found: dict[bytes, np.ndarray] = field(default_factory=dict)
    used: set[Path] = field(default_factory=set)
    damaged_rows: int = 0
    damaged_packs: int = 0


class UnitStore:
    """The packs of one settings key under `<cache_dir>/units-v1/`."""

    def __init__(
        self, cache_dir: str | Path, settings: Mapping[str, Any], max_bytes: int = DEFAULT_MAX_BYTES
    ):
        self.root = Path(cache_dir) / f"units-v{FORMAT}"
        self.settings = dict(settings)
        self.key = settings_key(self.settings)
        self.dir = self.root / self.key[:32]
        self.max_bytes = int(max_bytes)

    def packs(self) -> list[Path]:
        """This settings key's packs, by name (a digest in two packs resolves alike every run)."""
        try:
            return sorted(p for p in self.dir.iterdir() if p.suffix == ".pack" and not p.name.startswith("."))
        except OSError:
            return []

    def lookup(self, wanted: Iterable[bytes]) -> Lookup:
        """The stored vector of each wanted digest that has one; the packs read are touched (LRU)."""
        want = set(wanted)
        out = Lookup()
        for path in self.packs():
            if len(out.found) == len(want):
                break
            pack = Pack.read(path)
            if pack is None:
                out.damaged_packs += path.exists()
                continue
            rows, damaged = pack.rows(d for d in want if d not in out.found)
            out.damaged_rows += damaged
            if rows:
                out.found.update(rows)
                out.used.add(path)
        for path in out.used:
            with contextlib.suppress(OSError):  # read-only or evicted meanwhile: only the LRU order suffers
                os.utime(path)
        return out

    def add(self, digests: Sequence[bytes], vectors: np.ndarray) -> Path:
        """Write one new pack of these rows atomically; raises OSError when the folder is not writable."""
        blob = pack_bytes(digests, vectors)
        self.dir.mkdir(parents=True, exist_ok=True)
        meta = self.dir / "settings.json"
        if not meta.exists():
            text = json.dumps({"format": FORMAT, "key": self.key, **self.settings}, indent=2, sort_keys=True)
            write_atomic(meta, lambda fh: fh.write(text.encode("utf-8")))
        name = hashlib.sha256(blob[: _HEADER.size + len(digests) * DIGEST_BYTES]).hexdigest()[:24]
        path = self.dir / f"{name}.pack"
        write_atomic(path, lambda fh: fh.write(blob))
        return path

    def evict(self, keep: Iterable[Path] = ()) -> list[Path]:
        """Delete least recently used packs (any settings key) until all fit in `max_bytes`."""
        return evict(self.root, self.max_bytes, keep)


def _all_packs(root: Path) -> list[tuple[float, int, Path]]:
    out = []
    for path in root.glob("*/*.pack"):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((st.st_mtime, st.st_size, path))
    return out


def evict(root: Path, max_bytes: int, keep: Iterable[Path] = ()) -> list[Path]:
    """Delete whole packs, oldest mtime first, never one in `keep`, until the total is <= max_bytes."""
    packs = sorted(_all_packs(root))
    total = sum(size for _, size, _ in packs)
    kept = {Path(p) for p in keep}
    removed = []
    for _, size, path in packs:
        if total <= max_bytes:
            break
        if path in kept:
            continue
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
    return removed


def describe(cache_dir: str | Path) -> str:
    """A table of the settings keys under `cache_dir`: settings, packs, rows, bytes, last use."""
    root = Path(cache_dir) / f"units-v{FORMAT}"
    lines = [f"{root}"]
    total = 0
    for folder in sorted(p for p in root.glob("*") if p.is_dir()):
        try:
            settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            settings = {}
        shown = ", ".join(
            f"{k}={settings[k]}" for k in sorted(settings) if k not in ("key", "format", "model_fingerprint")
        )
        rows = size = 0
        newest = 0.0
        packs = sorted(folder.glob("*.pack"))
        for path in packs:
            pack = Pack.read(path)
            st = path.stat()
            size += st.st_size
            newest = max(newest, st.st_mtime)
            rows += len(pack.digests) if pack is not None else 0
        total += size
        used = time.strftime("%Y-%m-%d %H:%M", time.localtime(newest)) if packs else "-"
        lines.append(f"  {folder.name}  {len(packs)} packs  {rows} rows  {size / 1e6:.1f} MB  used {used}")
        lines.append(f"    {shown}")
    lines.append(f"total {total / 1e6:.1f} MB")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(
        prog="python -m evalpipe.rankers.dense.embed_store",
        description="Inspect or trim the semantic ranker's per-unit embedding cache.",
    )
    parser.add_argument("cache_dir", nargs="?", default=".cache/evalpipe/embeddings")
    parser.add_argument(
        "--evict-to", type=float, metavar="MB", help="delete LRU packs until at most MB remain"
    )
    args = parser.parse_args(argv)
    if args.evict_to is not None:
        removed = evict(Path(args.cache_dir) / f"units-v{FORMAT}", int(args.evict_to * 1e6))
        print(f"removed {len(removed)} packs", file=sys.stderr)
    print(describe(args.cache_dir))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
