"""People's labels (a batch's `.labels.jsonl`, written by `evalpipe label`) as rows to merge.

Each (case, unit) gets one grade. Every assessor's standing verdict counts (the last line an
assessor gave on it, after undos); skips count for nothing. Grade-0 verdicts are kept: a
judged negative is information (judged@k counts it, bpref uses it). When assessors disagree
the merge is refused with one line per conflict, unless a rule is given:

- ``max``: the highest grade any assessor gave (lenient);
- ``min``: the lowest (strict);
- ``majority``: the grade most assessors gave, ties going to the lower grade.

Provenance per merged label: who judged it, how (the page, a judge), when.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evalpipe.judge.batch import Label, current, read_labels
from evalpipe.safety.errors import EvalpipeError

RULES = ("max", "min", "majority")


class Conflicts(EvalpipeError):
    """Assessors disagree: one line per conflicting (case, unit), then what to do."""

    def __init__(self, lines: Sequence[str]):
        self.lines = list(lines)
        super().__init__(self.lines[0])


@dataclass(frozen=True)
class Merged:
    case_id: str
    unit_id: str
    grade: int
    verdicts: tuple[Label, ...]  # every assessor's standing verdict on it
    line: int  # the labels line of the last verdict (for error lines)

    @property
    def who(self) -> str:
        return ", ".join(f"{v.assessor} {v.grade} ({v.how}, {v.at})" for v in self.verdicts)

    def record(self) -> dict:
        return {
            "case_id": self.case_id,
            "unit_id": self.unit_id,
            "grade": self.grade,
            "verdicts": [
                {"assessor": v.assessor, "grade": v.grade, "how": v.how, "at": v.at, "seconds": v.seconds}
                for v in self.verdicts
            ],
        }


def decide(grades: Sequence[int], rule: str | None) -> int | None:
    """The merged grade, or None when the grades disagree and no rule is given."""
    if len(set(grades)) == 1:
        return grades[0]
    if rule == "max":
        return max(grades)
    if rule == "min":
        return min(grades)
    if rule == "majority":
        counts = Counter(grades)
        top = max(counts.values())
        return min(g for g, n in counts.items() if n == top)
    return None


def merged_labels(path: Path, fixture_sha256: str, rule: str | None = None) -> list[Merged]:
    """The labels file's standing verdicts, one grade per (case, unit); conflicts refused with one
    line each (all of them at once, so they can be settled together)."""
    if rule is not None and rule not in RULES:
        raise EvalpipeError(f"--rule {rule!r}: choose {', '.join(RULES)}")
    if not path.is_file():
        raise EvalpipeError(f"{path}: no such labels file (written beside a batch by `evalpipe label`)")
    labels = read_labels(path)
    for lab in labels:
        if lab.fixture_sha256 != fixture_sha256:
            raise EvalpipeError(
                f"{path}:{lab.line}: labelled on fixture sha256 {lab.fixture_sha256[:12] or '?'}, but the "
                f"fixture is {fixture_sha256[:12]}: another fixture, or edited since pooling; merge into the "
                "one labelled"
            )
    by_pair: dict[tuple[str, str], list[Label]] = {}
    for (case_id, unit_id, _), lab in current(labels).items():
        if lab.grade is not None:
            by_pair.setdefault((case_id, unit_id), []).append(lab)
    out: list[Merged] = []
    conflicts: list[str] = []
    for (case_id, unit_id), verdicts in by_pair.items():
        grades = [v.grade for v in verdicts if v.grade is not None]
        grade = decide(grades, rule)
        line = max(v.line for v in verdicts)
        if grade is None:
            said = ", ".join(f"{v.assessor} {v.grade}" for v in verdicts)
            conflicts.append(f"{path}:{line}: case {case_id!r} unit {unit_id!r}: assessors disagree ({said})")
            continue
        out.append(Merged(case_id, unit_id, grade, tuple(verdicts), line))
    if conflicts:
        raise Conflicts(
            conflicts + [f"{len(conflicts)} conflict(s): settle them, or give --rule {'|'.join(RULES)}"]
        )
    return out


def provenance_note(merged: Sequence[Merged], merged_on: str) -> str:
    """`provenance: labels by alice 12, bob 3 (page), given 2026-12-03..2026-12-04, merged 2026-12-05`"""
    people = Counter(v.assessor for m in merged for v in m.verdicts)
    hows = sorted({v.how for m in merged for v in m.verdicts})
    days = sorted({v.at[:10] for m in merged for v in m.verdicts if v.at})
    span = f"{days[0]}..{days[-1]}" if days else "unknown dates"
    who = ", ".join(f"{a} {n}" for a, n in sorted(people.items()))
    return f"provenance: labels by {who} ({', '.join(hows)}), given {span}, merged {merged_on}"
