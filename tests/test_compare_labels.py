"""`evalpipe compare` warns when a strict difference may be the labels' doing (compare/labels.py)."""

from __future__ import annotations

from evalpipe.compare.labels import GAP, cutoff, label_warnings
from evalpipe.stats.comparison import cases_from_rows, compare_runs

N = 40


def run(run_id: str, hits: int, judged: float, condensed: float | None = None, mrr: float = 0.5):
    rows = []
    for i in range(N):
        row = {
            "case_id": f"c{i}",
            "tier": "concept",
            "recall_at_5": 1.0 if i < hits else 0.0,
            "judged_at_5": judged,
            "judged_at_20": judged,
            "mrr": mrr,
        }
        if condensed is not None:
            row["condensed_recall_at_5"] = condensed
        rows.append(row)
    return cases_from_rows(rows, run_id=run_id, name=run_id)


def warnings_for(*runs, metrics=("recall_at_5",)):
    result = compare_runs(list(runs), 0, list(metrics), resamples=200, seed=1)
    return label_warnings(result)


def test_same_direction_gap_is_flagged_with_both_gaps_and_the_condensed_difference():
    base = run("A", hits=20, judged=0.40, condensed=0.9)
    better_labelled = run("B", hits=30, judged=0.60, condensed=0.95)
    (line,) = warnings_for(base, better_labelled)
    assert line.startswith("recall_at_5: B (B) differs from A (A) by +0.2500")
    assert "judged@5 is 60.0% against 40.0% (+20.0 points" in line
    assert "condensed condensed_recall_at_5 differs by +0.0500" in line


def test_against_the_labels_lean_or_a_small_gap_is_not_flagged():
    base = run("A", hits=20, judged=0.40)
    wins_with_fewer_labels = run("C", hits=30, judged=0.30)  # more labels could only widen its win
    small_gap = run("D", hits=30, judged=0.40 + GAP / 2)
    assert warnings_for(base, wins_with_fewer_labels, small_gap) == []
    # The same gap just over the threshold, losing run less labelled: flagged.
    loses_less_labelled = run("E", hits=10, judged=0.40 - GAP - 0.01)
    (line,) = warnings_for(base, loses_less_labelled)
    assert "E (E) differs from A (A) by -0.2500" in line and "-6.0 points" in line


def test_mrr_is_read_at_the_depth():
    base = run("A", hits=20, judged=0.40, mrr=0.3)
    other = run("B", hits=20, judged=0.70, mrr=0.6)
    assert cutoff("mrr", base) == 20
    (line,) = warnings_for(base, other, metrics=("mrr",))
    assert line.startswith("mrr: B (B) differs") and "judged@20" in line
