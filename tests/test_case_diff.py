"""The per-case view of `evalpipe compare --cases`, on a tiny pair of runs worked out by hand."""

from __future__ import annotations

import pytest

from evalpipe.reporting.case_diff_view import case_rows, markdown, table, tier_rows
from evalpipe.stats.case_diff import CaseInfo, case_diff, case_info

INFO = {
    "c1": CaseInfo("exact", "open a file", ("b.go::Open",), ("b.go::Open", "a.py", "c.md")),
    "c2": CaseInfo("concept", "combine dicts", ("a.py::merge",), ("c.md",)),
    "c3": CaseInfo("concept", "merge sessions", ("a.py::Session.merge",), ()),
    "c4": CaseInfo("multi_hop", "install | setup", ("guide.md#install",), ()),
    "c5": CaseInfo("exact", "Open", ("b.go::Open",), ("b.go::Open",)),
}
RUN_INFO = {k: CaseInfo(v.tier, v.query, v.expected, ("x", "y", "z", "w")) for k, v in INFO.items()}

# recall@5 per case.          c1   c2   c3   c4   c5
#   baseline                   1    0    1    0    1
#   run                        0    1    1    1    1
# -> won c2 (concept), c4 (multi_hop); lost c1 (exact); unchanged c3, c5.
BASE = {"c1": 1.0, "c2": 0.0, "c3": 1.0, "c4": 0.0, "c5": 1.0}
RUN = {"c1": 0.0, "c2": 1.0, "c3": 1.0, "c4": 1.0, "c5": 1.0}


def test_wins_losses_and_tier_counts():
    d = case_diff("recall_at_5", "base", BASE, INFO, "run", RUN, RUN_INFO)
    assert [c.case_id for c in d.won] == ["c2", "c4"]
    assert [c.case_id for c in d.lost] == ["c1"]
    assert d.unchanged == 2
    assert d.per_tier == {"exact": (0, 1, 1), "concept": (1, 0, 1), "multi_hop": (1, 0, 0)}
    lost = d.lost[0]
    assert lost.query == "open a file" and lost.expected == ("b.go::Open",)
    assert lost.baseline_top == ("b.go::Open", "a.py", "c.md") and lost.run_top == ("x", "y", "z")  # top 3
    assert tier_rows(d)[1][-1] == ["all", "2", "1", "2"]


def test_first_rank_lower_is_better_and_not_found_is_worst():
    # c1 1 -> 2 (lost), c2 not found -> 5 (won), c3 3 -> 3, c4 not found both (unchanged).
    base = {"c1": 1.0, "c2": 0.0, "c3": 3.0, "c4": 0.0}
    run = {"c1": 2.0, "c2": 5.0, "c3": 3.0, "c4": 0.0}
    d = case_diff("first_rank", "base", base, INFO, "run", run, RUN_INFO)
    assert [c.case_id for c in d.won] == ["c2"] and [c.case_id for c in d.lost] == ["c1"]
    assert d.unchanged == 2
    header, body = case_rows(d)
    assert body[0][:3] == ["lost", "exact", "c1"] and body[0][5:7] == ["rank 1", "rank 2"]
    assert body[1][5:7] == ["not found", "rank 5"]


def test_cases_only_in_one_run_are_skipped():
    d = case_diff("mrr", "base", {"c1": 1.0, "c9": 0.0}, INFO, "run", {"c1": 0.5}, RUN_INFO)
    assert [c.case_id for c in d.lost] == ["c1"] and not d.won and d.unchanged == 0


def test_markdown_escapes_pipes_and_table_has_one_row_per_listed_case():
    d = case_diff("recall_at_5", "base", BASE, INFO, "run", RUN, RUN_INFO)
    text = markdown([d])
    assert "run vs base on recall_at_5: 2 won, 1 lost, 2 unchanged" in text
    assert "install \\| setup" in text
    cols = table([d])
    assert cols["case_id"] == ["c1", "c2", "c4"] and cols["outcome"] == ["lost", "won", "won"]
    assert len({len(v) for v in cols.values()}) == 1


@pytest.mark.parametrize(
    ("row", "expected", "top"),
    [
        ({"tier": "t", "expected": '{"a": 1, "b": 0, "c": 2}', "top": '["a", "x"]'}, ("a", "c"), ("a", "x")),
        ({"tier": "t", "expected": "not json", "top": None}, (), ()),
    ],
)
def test_case_info_reads_cases_json_columns(row, expected, top):
    info = case_info(row)
    assert info.expected == expected and info.top == top
