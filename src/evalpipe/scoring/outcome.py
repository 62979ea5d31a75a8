"""Whether a run that completed actually measured something, and the exit code that says so.

A run whose ranker was skipped, or whose cases mostly raised, produces a table of
zeros that looks like a result. These checks turn that into a non-zero exit with the
reason on one line (and the run marked), so scripts, CI and sweeps cannot mistake it
for a measurement. Exit codes: 0 ok, 1 run failed, 2 bad input, 3 skipped,
130/143 interrupted by SIGINT/SIGTERM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalpipe.corpus import Corpus
from evalpipe.scoring.results import CaseResult

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_SKIPPED = 3
#: More than this share of cases with a retrieval error fails the run.
MAX_ERROR_SHARE = 0.5
#: Distinct error messages printed when a run fails.
SHOWN_ERRORS = 3


class RunNotMeasured(Exception):
    """Raised inside the tracked run so it ends FAILED; `lines` are printed, `code` is the exit status."""

    def __init__(self, code: int, lines: Sequence[str]):
        super().__init__(lines[0])
        self.code = code
        self.lines = tuple(lines)


def verdict(
    skipped: str, results: Sequence[CaseResult], allow_skipped: bool, ranker: str
) -> RunNotMeasured | None:
    """The reason this run is not a success, or None."""
    if skipped:
        if allow_skipped:
            return None
        skipped = " ".join(skipped.split())
        return RunNotMeasured(
            EXIT_SKIPPED,
            [f"ranker {ranker} skipped, nothing was measured: {skipped} (allow_skipped=true accepts this)"],
        )
    errors = [r for r in results if r.error is not None]
    if results and len(errors) > MAX_ERROR_SHARE * len(results):
        first_case: dict[str, str] = {}  # distinct message -> first case that raised it
        for r in errors:
            first_case.setdefault(" ".join(str(r.error).split()), r.case_id)
        distinct = list(first_case)
        lines = [f"run failed: {len(errors)} of {len(results)} cases raised a retrieval error; first errors:"]
        lines += [f"  case {first_case[m]}: {m[:300]}" for m in distinct[:SHOWN_ERRORS]]
        if len(distinct) > SHOWN_ERRORS:
            lines.append(f"  ... and {len(distinct) - SHOWN_ERRORS} more distinct errors (see cases.jsonl)")
        return RunNotMeasured(EXIT_FAILED, lines)
    return None


def error_note(results: Sequence[CaseResult]) -> str:
    """One line for the terminal and report when some cases raised (too few to fail the run)."""
    errors = [r for r in results if r.error is not None]
    if not errors:
        return ""
    first = errors[0]
    return (
        f"{len(errors)} of {len(results)} cases raised a retrieval error (scored as misses), "
        f"e.g. {first.case_id}: {' '.join(str(first.error).split())[:200]}"
    )


@dataclass(frozen=True)
class UnknownIds:
    """Returned IDs that are not units of the corpus (they can never match an expected ID)."""

    count: int
    cases: int
    examples: tuple[tuple[str, str], ...]  # (case id, returned id)
    corpus: str = ""

    def note(self) -> str:
        shown = ", ".join(f"{cid}: {uid!r}" for cid, uid in self.examples)
        return (
            f"{self.count} returned IDs in {self.cases} cases are not in the corpus {self.corpus} "
            f"(a different corpus or ID scheme?), e.g. {shown}"
        )


def unknown_ids(results: Sequence[CaseResult], corpus: Corpus, examples: int = 3) -> UnknownIds:
    found = [(r.case_id, h.id) for r in results for h in r.hits if h.id not in corpus]
    cases = len({cid for cid, _ in found})
    return UnknownIds(len(found), cases, tuple(found[:examples]), corpus.source or corpus.name)
