"""The judging batch (`evalpipe pool`'s output) and the people's labels written beside it.

A **batch** is JSONL: a header line, then one line per (case, candidate) to judge, in the
order a person should judge them. Every line carries the fixture's sha256, so a batch
cannot be labelled or merged against another fixture, or against the same fixture edited
since pooling (the labels the pool left out could have changed).

    {"kind": "evalpipe.batch", "format": 1, "fixture": "fixtures/gold.yaml",
     "fixture_sha256": "...", "depth": 5, "runs": [{"label": "bm25", "source": "..."}], ...}
    {"fixture_sha256": "...", "case_id": "c1", "tier": "concept", "query": "...",
     "candidate": "src/x.py::f", "runs": {"bm25": 2, "exact": null}, "priority": 0.33,
     "reason": "..."}

The **labels** file is `<batch stem>.labels.jsonl` beside the batch: one JSON line per
verdict, appended and fsync'd the moment it is given (`append_label`), so killing the
server loses nothing and a restart resumes after the last line. An undo is a line too
(`"grade": null, "undo": true`), so the file is a log and never rewritten. The verdict of
a (case, candidate, assessor) is the last line about it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalpipe.safety.errors import EvalpipeError

KIND = "evalpipe.batch"
FORMAT = 1
GRADES = (0, 1, 2)


@dataclass(frozen=True)
class Item:
    """One (case, candidate) to judge, with which runs retrieved the candidate and at what rank."""

    case_id: str
    tier: str
    query: str
    candidate: str
    runs: Mapping[str, int | None]  # run label -> 1-based rank, None when not in its top `depth`
    priority: float
    reason: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.case_id, self.candidate)


@dataclass(frozen=True)
class Batch:
    path: Path
    header: Mapping[str, Any]
    items: tuple[Item, ...]

    @property
    def fixture_sha256(self) -> str:
        return str(self.header.get("fixture_sha256", ""))

    @property
    def labels_path(self) -> Path:
        return labels_path(self.path)


def labels_path(batch: Path) -> Path:
    name = batch.name.removesuffix(".jsonl")
    return batch.with_name(f"{name}.labels.jsonl")


def write_batch(path: Path, header: Mapping[str, Any], items: Sequence[Item]) -> None:
    """The batch as JSONL, written to a temporary file and renamed (never half a batch)."""
    digest = header["fixture_sha256"]
    lines = [json.dumps({"kind": KIND, "format": FORMAT, **header})]
    for it in items:
        lines.append(
            json.dumps(
                {
                    "fixture_sha256": digest,
                    "case_id": it.case_id,
                    "tier": it.tier,
                    "query": it.query,
                    "candidate": it.candidate,
                    "runs": dict(it.runs),
                    "priority": round(it.priority, 6),
                    "reason": it.reason,
                }
            )
        )
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise EvalpipeError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_batch(path: Path) -> Batch:
    """The batch, checked line by line (a wrong line is named, never skipped)."""
    if not path.is_file():
        raise EvalpipeError(f"{path}: no such batch file (write one with `evalpipe pool`)")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalpipeError(f"{path}: cannot read the batch: {exc}") from None
    header: dict[str, Any] | None = None
    items: list[Item] = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise EvalpipeError(
                f"{path}:{n}: not JSON ({exc.msg}); a batch is written by `evalpipe pool`"
            ) from None
        if header is None:
            if not isinstance(rec, dict) or rec.get("kind") != KIND:
                raise EvalpipeError(
                    f"{path}:{n}: not an evalpipe judging batch (write one with `evalpipe pool`)"
                )
            if rec.get("format") != FORMAT:
                raise EvalpipeError(
                    f"{path}:{n}: batch format {rec.get('format')!r}, this evalpipe reads {FORMAT}"
                )
            header = rec
            continue
        try:
            if rec["fixture_sha256"] != header["fixture_sha256"]:
                raise EvalpipeError(f"{path}:{n}: this line is for another fixture than the batch's header")
            items.append(
                Item(
                    str(rec["case_id"]),
                    str(rec.get("tier") or ""),
                    str(rec.get("query") or ""),
                    str(rec["candidate"]),
                    {str(k): (None if v is None else int(v)) for k, v in dict(rec.get("runs") or {}).items()},
                    float(rec.get("priority") or 0.0),
                    str(rec.get("reason") or ""),
                )
            )
        except (KeyError, TypeError, ValueError):
            raise EvalpipeError(
                f"{path}:{n}: a batch line needs fixture_sha256, case_id and candidate"
            ) from None
    if header is None:
        raise EvalpipeError(f"{path}: empty batch (write one with `evalpipe pool`)")
    return Batch(path, header, tuple(items))


@dataclass(frozen=True)
class Label:
    """One person's verdict on one (case, candidate): grade 0/1/2, or None for a skip or an undo."""

    case_id: str
    candidate: str
    grade: int | None
    assessor: str
    at: str  # ISO time (UTC) the verdict was given
    seconds: float = 0.0  # time from showing the item to the verdict
    how: str = "page"  # page (evalpipe label), judge:<backend:model>, ...
    fixture_sha256: str = ""
    undo: bool = False
    skip: bool = False
    line: int = 0  # where it was read from (for error lines)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return {
            "fixture_sha256": self.fixture_sha256,
            "case_id": self.case_id,
            "candidate": self.candidate,
            "grade": self.grade,
            "assessor": self.assessor,
            "how": self.how,
            "at": self.at,
            "seconds": round(self.seconds, 3),
            **({"undo": True} if self.undo else {}),
            **({"skip": True} if self.skip else {}),
        }


def append_label(path: Path, label: Label) -> None:
    """Append one verdict and fsync it before returning: once this returns, a kill -9 keeps it.

    One `write` of one line with O_APPEND, then fsync of the file (and of the folder the first
    time, so the file itself survives a crash). A failed write (a full disk) raises with the
    file named; nothing already written is touched."""
    data = (json.dumps(label.record()) + "\n").encode("utf-8")
    new = not path.exists()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            written = os.write(fd, data)
            if written != len(data):
                raise OSError(28, "short write (disk full?)")
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            dfd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except OSError as exc:
        raise EvalpipeError(
            f"cannot save the verdict to {path}: {exc.strerror or exc}; nothing was lost before it, "
            "free space and give it again"
        ) from None


def read_labels(path: Path) -> list[Label]:
    """Every line of a labels file, in order. A torn last line (a crash mid-write) is the only
    line that may be unreadable: it is reported, not skipped silently, by `torn_tail`."""
    if not path.is_file():
        return []
    out = []
    lines = path.read_text(encoding="utf-8").splitlines()
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
            grade = rec.get("grade")
            if grade is not None and int(grade) not in GRADES:
                raise ValueError
            out.append(
                Label(
                    str(rec["case_id"]),
                    str(rec["candidate"]),
                    None if grade is None else int(grade),
                    str(rec.get("assessor") or ""),
                    str(rec.get("at") or ""),
                    float(rec.get("seconds") or 0.0),
                    str(rec.get("how") or "page"),
                    str(rec.get("fixture_sha256") or ""),
                    bool(rec.get("undo")),
                    bool(rec.get("skip")),
                    n,
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            if n == len(lines):  # a line cut by a crash while writing: nothing after it was given
                break
            raise EvalpipeError(
                f"{path}:{n}: not a label line (case_id, candidate, grade 0/1/2 or null); fix or delete it"
            ) from None
    return out


def current(labels: Iterable[Label]) -> dict[tuple[str, str, str], Label]:
    """The standing verdict per (case, candidate, assessor): the last line, an undo removing it."""
    out: dict[tuple[str, str, str], Label] = {}
    for lab in labels:
        key = (lab.case_id, lab.candidate, lab.assessor)
        if lab.undo:
            out.pop(key, None)
        else:
            out[key] = lab
    return out


def check_fixture(batch: Batch, sha256: str, fixture: str) -> None:
    """Refuse a batch pooled on another fixture or on this one before it was edited."""
    if batch.fixture_sha256 != sha256:
        raise EvalpipeError(
            f"{batch.path}: pooled on fixture sha256 {batch.fixture_sha256[:12]} "
            f"({batch.header.get('fixture')}), "
            f"but {fixture} is {sha256[:12]}: another fixture, or edited since pooling; pool it again"
        )
