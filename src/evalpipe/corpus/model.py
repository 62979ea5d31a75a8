"""The corpus: retrievable units and the winnow filter every ranker shares.

A unit is what a ranker returns: a code symbol, a Markdown section, a chunk of a
document or a BEIR passage. Keeping one flat record for all of them lets every
ranker, metric and report work on any corpus without special cases.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from evalpipe.core.unit import Unit
from evalpipe.safety.errors import EvalpipeError


class CorpusError(EvalpipeError, ValueError):
    """A corpus file that cannot be used; the message names the file and line."""


class _HashingReader(io.RawIOBase):
    """Reads a binary file while hashing its bytes, so a corpus is read once for both."""

    def __init__(self, raw: BinaryIO):
        self.raw = raw
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = self.raw.readinto(buffer)
        if n:
            self.sha.update(memoryview(buffer)[:n])
        return n or 0


class Corpus:
    """An ordered, immutable collection of units with an ID index.

    Row `i` of any ranker's index is `units[i]`, so a boolean mask over rows is
    the common currency for winnow constraints.
    """

    def __init__(self, units: Iterable[Unit], name: str = "", source: str = "", sha256: str = ""):
        self.units: tuple[Unit, ...] = tuple(units)
        self.name = name
        self.source = source
        self.ids: list[str] = [u.id for u in self.units]
        self.index_of: dict[str, int] = {}
        for i, uid in enumerate(self.ids):
            if uid in self.index_of:
                raise CorpusError(f"{source or name}: duplicate unit id {uid!r}")
            self.index_of[uid] = i
        self.sha256 = (
            sha256
            or hashlib.sha256(
                "\n".join(json.dumps(u.to_record(), sort_keys=True) for u in self.units).encode()
            ).hexdigest()
        )
        self._mask_cache: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.units)

    def __iter__(self) -> Iterator[Unit]:
        return iter(self.units)

    def __contains__(self, uid: object) -> bool:
        return uid in self.index_of

    def get(self, uid: str) -> Unit | None:
        i = self.index_of.get(uid)
        return None if i is None else self.units[i]

    def allowed_mask(self, constraints: Mapping[str, Any] | None) -> np.ndarray | None:
        """Boolean mask of units that satisfy `constraints`, or None for "all".

        `path_prefix` matches the start of `path`; any other key matches the unit
        field or metadata value, a list meaning "any of". Masks are cached per
        constraint set because fixtures reuse the same few constraints.
        """
        if not constraints:
            return None
        key = json.dumps(constraints, sort_keys=True, default=str)
        cached = self._mask_cache.get(key)
        if cached is not None:
            return cached
        mask = np.ones(len(self.units), dtype=bool)
        for name, wanted in constraints.items():
            options = [str(w) for w in wanted] if isinstance(wanted, list | tuple) else [str(wanted)]
            if name == "path_prefix":
                col = [any(u.path.startswith(p) for p in options) for u in self.units]
            else:
                col = [str(u.get(name, "")) in options for u in self.units]
            mask &= np.asarray(col, dtype=bool)
        self._mask_cache[key] = mask
        return mask

    def allows(self, uid: str, constraints: Mapping[str, Any] | None) -> bool:
        mask = self.allowed_mask(constraints)
        return mask is None or (uid in self.index_of and bool(mask[self.index_of[uid]]))


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _check_record(record: Any, path: Path, lineno: int) -> dict[str, Any]:
    """A JSONL record as a unit's fields, or a CorpusError saying what is wrong with it (file:line)."""
    if type(record) is not dict:
        got = "null" if record is None else type(record).__name__
        raise CorpusError(f"{path}:{lineno}: each line must be a JSON object with an 'id', got {got}")
    if "id" not in record and "_id" in record:
        record["id"] = record.pop("_id")
    uid = record.get("id", _ABSENT)
    if uid is _ABSENT:
        raise CorpusError(f"{path}:{lineno}: record has no 'id'")
    if isinstance(uid, bool) or not isinstance(uid, str | int) or not str(uid).strip():
        raise CorpusError(f"{path}:{lineno}: 'id' must be a non-empty string, got {uid!r}")
    for key in ("kind", "title", "text", "path", "language"):
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, str | int | float)):
            got = type(value).__name__
            raise CorpusError(f"{path}:{lineno}: unit {uid!r}: '{key}' must be a string, got {got}")
    rels = record.get("relations")
    if rels is not None:
        ok = isinstance(rels, dict) and all(
            isinstance(v, list) and all(isinstance(x, str | int) and not isinstance(x, bool) for x in v)
            for v in rels.values()
        )
        if not ok:
            raise CorpusError(
                f"{path}:{lineno}: unit {uid!r}: 'relations' must map a kind to a list of unit IDs, "
                f'e.g. {{"calls": ["pkg/a.py::f"]}}, got {rels!r}'[:300]
            )
    return record


_ABSENT = object()


def _capped_lines(text: io.TextIOWrapper, limit: int):
    """(line number, line) with each line read up to `limit` characters + 1, so an over-long line
    is seen (and refused) without holding all of it."""
    lineno = 0
    while line := text.readline(limit + 1):
        lineno += 1
        yield lineno, line


def load_jsonl_corpus(path: str | Path, name: str = "") -> Corpus:
    """Load a JSONL (optionally gzipped) corpus; errors name the file and line."""
    # lazy: evalpipe.core.files, ~2 ms
    from evalpipe.core.files import BOM, InputFileError, max_line_bytes, read_text, require_file

    path = Path(path)
    units = []
    first_line: dict[str, int] = {}
    try:
        MAX_LINE_BYTES = max_line_bytes()  # noqa: N806 (read once, checked: EVALPIPE_MAX_LINE_MB)
        require_file(path, "corpus file")
        with path.open("rb") as binary:
            raw = _HashingReader(binary)
            buffered = io.BufferedReader(raw)
            stream = gzip.GzipFile(fileobj=buffered) if path.suffix == ".gz" else buffered
            try:
                for lineno, line in _capped_lines(io.TextIOWrapper(stream, encoding="utf-8"), MAX_LINE_BYTES):
                    if len(line) > MAX_LINE_BYTES and not line.endswith("\n"):
                        raise CorpusError(
                            f"{path}:{lineno}: line longer than {MAX_LINE_BYTES / 2**20:,.1f} MB (the limit; "
                            "EVALPIPE_MAX_LINE_MB=... raises it)"
                        )
                    if lineno == 1 and line.startswith(BOM):
                        line = line[1:]
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
                        raise CorpusError(
                            f"{path}:{lineno}: invalid JSON ({getattr(exc, 'msg', 'nested too deeply')})"
                        ) from None
                    unit = Unit.from_record(_check_record(record, path, lineno))
                    if unit.id in first_line:
                        first = first_line[unit.id]
                        raise CorpusError(
                            f"{path}:{lineno}: duplicate unit id {unit.id!r} (first at line {first})"
                        )
                    first_line[unit.id] = lineno
                    units.append(unit)
            except UnicodeDecodeError:  # rare: read again, strictly, to name the line and column
                read_text(path)
                raise CorpusError(f"{path}: not UTF-8 text; save the file as UTF-8") from None
            except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
                raise InputFileError(f"{path}: not a valid gzip file ({exc})") from None
            while raw.read(1 << 20):  # hash any bytes the decoder did not need (e.g. a gzip trailer)
                pass
    except CorpusError:
        raise
    except EvalpipeError as exc:  # unreadable, not UTF-8, not gzip, a directory...
        raise CorpusError(str(exc)) from None
    if not units:
        raise CorpusError(f"{path}: the corpus is empty (no units; one JSON object per line)")
    return Corpus(units, name=name or path.stem, source=str(path), sha256=raw.sha.hexdigest())


def write_jsonl_corpus(units: Iterable[Unit], path: str | Path) -> int:
    """Write units as JSONL in the given order; returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as fh:
        for unit in units:
            fh.write(json.dumps(unit.to_record(), ensure_ascii=False) + "\n")
            n += 1
    return n
