"""One assessor's labelling session over a batch: what to show next, saving a verdict, undo.

Everything the page does goes through here, and every verdict is on disk (appended and
fsync'd, `judge.batch.append_label`) before the page is told it was saved. The standing
verdicts are re-read from the labels file at start, so a restart after a kill resumes
at the first item this assessor has not judged or skipped; undo works across restarts,
since the log says what was given in which order.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from evalpipe.core.unit import Unit
from evalpipe.judge.agreement import agreement
from evalpipe.judge.batch import GRADES, Batch, Item, Label, append_label, current, read_labels
from evalpipe.safety.errors import EvalpipeError

#: At most this many characters of a unit's text are sent to the page.
TEXT_LIMIT = 20_000


@dataclass(frozen=True)
class Shown:
    """What the page shows for one item (blind: the case's listed answers are left out)."""

    index: int
    item: Item
    unit: Unit | None
    context: str
    expected: tuple[str, ...]


def context_of(unit: Unit | None, units: Mapping[str, Unit]) -> str:
    """Where the candidate sits: the enclosing class/function of a code unit, the document and section
    path of a chunk."""
    if unit is None:
        return "(not in the fixture's corpus)"
    parent = unit.get("parent")
    if parent and parent in units:
        p = units[parent]
        head = p.text.strip().splitlines()[:6]
        return f"in {p.kind} {p.title or p.id} ({p.path}):\n" + "\n".join(head)
    heading = unit.get("heading_path")
    if heading:
        doc = unit.get("document_id") or unit.path
        return f"in {doc} › " + " › ".join(map(str, heading))
    return f"{unit.kind} in {unit.path}" if unit.path else unit.kind


class Session:
    def __init__(
        self,
        batch: Batch,
        units: Mapping[str, Unit],
        expected: Mapping[str, tuple[str, ...]],
        assessor: str,
        blind: bool = True,
    ) -> None:
        self.batch = batch
        self.units = units
        self.expected = expected
        self.assessor = assessor
        self.blind = blind
        self.path = batch.labels_path
        self._lock = threading.Lock()
        known = {it.key for it in batch.items}
        labels = read_labels(self.path)
        for lab in labels:
            if lab.fixture_sha256 and lab.fixture_sha256 != batch.fixture_sha256:
                raise EvalpipeError(f"{self.path}:{lab.line}: a label for another fixture than the batch's")
            if (lab.case_id, lab.candidate) not in known:
                raise EvalpipeError(
                    f"{self.path}:{lab.line}: case {lab.case_id!r} / unit {lab.candidate!r} "
                    "is not in the batch"
                )
        mine = [lab for lab in labels if lab.assessor == assessor]
        self.standing = {(k[0], k[1]): v for k, v in current(mine).items()}
        self.history: list[tuple[str, str]] = []  # this assessor's verdicts in order (for undo)
        for lab in mine:
            key = (lab.case_id, lab.candidate)
            if lab.undo:
                if key in self.history:
                    self.history.remove(key)
            else:
                if key in self.history:
                    self.history.remove(key)
                self.history.append(key)
        self.others = sorted({lab.assessor for lab in labels if lab.assessor != assessor})
        self._all = labels

    # --- reading ------------------------------------------------------------------------------

    def next_index(self) -> int | None:
        for i, it in enumerate(self.batch.items):
            if it.key not in self.standing:
                return i
        return None

    def shown(self) -> Shown | None:
        i = self.next_index()
        if i is None:
            return None
        it = self.batch.items[i]
        unit = self.units.get(it.candidate)
        expected = () if self.blind else self.expected.get(it.case_id, ())
        return Shown(i, it, unit, context_of(unit, self.units), expected)

    def progress(self) -> dict[str, Any]:
        graded = [v for v in self.standing.values() if v.grade is not None]
        times = sorted(v.seconds for v in graded if v.seconds > 0)
        return {
            "total": len(self.batch.items),
            "judged": len(graded),
            "skipped": sum(1 for v in self.standing.values() if v.grade is None),
            "median_seconds": times[len(times) // 2] if times else None,
            "assessor": self.assessor,
            "others": self.others,
        }

    def state(self) -> dict[str, Any]:
        s = self.shown()
        out: dict[str, Any] = {"progress": self.progress(), "blind": self.blind, "item": None}
        if s is not None:
            unit = s.unit
            out["item"] = {
                "index": s.index,
                "case_id": s.item.case_id,
                "tier": s.item.tier,
                "query": s.item.query,
                "candidate": s.item.candidate,
                "kind": unit.kind if unit else "",
                "title": unit.title if unit else "",
                "path": unit.path if unit else "",
                "language": unit.language if unit else "",
                "text": (unit.text if unit else "")[:TEXT_LIMIT],
                "context": s.context,
                "expected": list(s.expected),
            }
        return out

    def agreement_lines(self) -> list[str]:
        """This assessor against each other one on the items both graded (judge.agreement)."""
        standing = current(self._all)
        mine = {(c, u): lab.grade for (c, u, a), lab in standing.items() if a == self.assessor}
        out = []
        for other in self.others:
            pairs = [
                (mine[(c, u)], lab.grade)
                for (c, u, a), lab in standing.items()
                if a == other and lab.grade is not None and mine.get((c, u)) is not None
            ]
            found = agreement(pairs)  # type: ignore[arg-type]
            if found is not None:
                out.append(found.line(self.assessor, other))
        return out

    # --- writing ------------------------------------------------------------------------------

    def give(self, case_id: str, candidate: str, grade: int | None, seconds: float) -> None:
        """Save a verdict (grade 0/1/2, or None = skip) on the item the page showed."""
        if grade is not None and grade not in GRADES:
            raise EvalpipeError(f"grade {grade!r}: give 0, 1 or 2 (or skip)")
        with self._lock:
            s = self.shown()
            if s is None or s.item.key != (case_id, candidate):
                raise EvalpipeError("that item is not the one to judge now (another tab?): reload the page")
            lab = Label(
                case_id,
                candidate,
                grade,
                self.assessor,
                _now(),
                max(0.0, float(seconds)),
                "page",
                self.batch.fixture_sha256,
                skip=grade is None,
            )
            append_label(self.path, lab)  # on disk before anything else changes
            self.standing[(case_id, candidate)] = lab
            self.history.append((case_id, candidate))

    def undo(self) -> bool:
        """Take back this assessor's last verdict (an undo line in the log); False when there is none."""
        with self._lock:
            if not self.history:
                return False
            case_id, candidate = self.history[-1]
            lab = Label(
                case_id,
                candidate,
                None,
                self.assessor,
                _now(),
                0.0,
                "page",
                self.batch.fixture_sha256,
                undo=True,
            )
            append_label(self.path, lab)
            self.history.pop()
            self.standing.pop((case_id, candidate), None)
            return True


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
