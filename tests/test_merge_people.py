"""`evalpipe merge-judgements FIXTURE <batch>.labels.jsonl`: people's labels into a new fixture version,
grade-0 negatives kept, provenance per label, conflicts refused one line each unless a rule is given;
the merged fixture passes check-fixture and its strict figures change exactly as the labels say."""

from __future__ import annotations

import json
import math

import pytest

from conftest import TINY_UNITS
from evalpipe.fixture_check import cli as check_cli
from evalpipe.inputs.fixture import load_fixture
from evalpipe.judge import merge
from evalpipe.judge.batch import Item, Label, append_label, labels_path, write_batch
from evalpipe.scoring import metrics

FIXTURE = """\
name: tiny
version: 1
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: combine two settings dicts, expected: ["pkg/a.py::merge_settings"]}
  - {id: c2, tier: exact, query: Open, expected: {"pkg/b.go::Open": 1, "pkg/a.py": 0}}
  - id: c3
    tier: concept
    query: install the package
    expected:
      - docs/guide.md#install
"""
MS, SM, OPEN, GUIDE, MOD = (
    "pkg/a.py::merge_settings",
    "pkg/a.py::Session.merge",
    "pkg/b.go::Open",
    "docs/guide.md#install",
    "pkg/a.py",
)


@pytest.fixture
def labelled(tmp_path):
    (tmp_path / "corpus.jsonl").write_text(
        "".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8"
    )
    fx = tmp_path / "fx.yaml"
    fx.write_text(FIXTURE, encoding="utf-8")
    sha = load_fixture(fx).sha256
    pairs = [("c1", SM), ("c1", GUIDE), ("c2", GUIDE), ("c3", MOD)]
    batch = tmp_path / "fx.pool.jsonl"
    write_batch(
        batch,
        {"fixture": str(fx), "fixture_sha256": sha, "depth": 5, "runs": []},
        [Item(c, "t", "q", u, {"r": 1}, 1.0, "") for c, u in pairs],
    )
    path = labels_path(batch)

    def give(case, unit, grade, who, undo=False):
        append_label(
            path, Label(case, unit, grade, who, "2026-12-03T16:00:00.000+00:00", 4.0, "page", sha, undo=undo)
        )

    give("c1", SM, 2, "alice")
    give("c1", GUIDE, 0, "alice")  # a judged negative: kept
    give("c2", GUIDE, 2, "alice")
    give("c2", GUIDE, None, "alice", undo=True)  # taken back ...
    give("c2", GUIDE, 1, "alice")  # ... and given again
    give("c1", SM, 2, "bob")  # agrees with alice
    give("c3", MOD, 1, "bob")
    give("c3", MOD, 0, "alice")  # disagrees with bob
    return fx, path


def test_conflicts_are_refused_one_line_each(labelled, capsys):
    fx, labels = labelled
    assert merge.main([str(fx), str(labels), "-o", str(fx.parent / "out.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"evalpipe merge-judgements: error: {labels}:8: case 'c3' unit 'pkg/a.py': "
        "assessors disagree (bob 1, alice 0)",
        "evalpipe merge-judgements: 1 conflict(s): settle them, or give --rule max|min|majority",
    ]
    assert not (fx.parent / "out.yaml").exists()


def strict(qrels_by_case, ranked_by_case):
    ids = sorted(ranked_by_case)
    out = metrics.evaluate([ranked_by_case[c] for c in ids], [qrels_by_case[c] for c in ids], [1, 3])
    return {name: dict(zip(ids, map(float, v), strict=True)) for name, v in out.items()}


def test_merged_with_a_rule_passes_check_fixture_and_figures_change_as_labelled(labelled, capsys):
    fx, labels = labelled
    out = fx.parent / "merged.yaml"
    assert merge.main([str(fx), str(labels), "-o", str(out), "--rule", "max"]) == 0
    assert "merged 4 judged IDs" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert "provenance: labels by alice 4, bob 2 (page), given 2026-12-03..2026-12-03" in text
    new = {c.id: dict(c.qrels) for c in load_fixture(out).cases}
    old = {c.id: dict(c.qrels) for c in load_fixture(fx).cases}
    assert new == {
        "c1": {MS: 1, SM: 2, GUIDE: 0},  # a plain list became a mapping to hold 2 and 0
        "c2": {OPEN: 1, MOD: 0, GUIDE: 1},
        "c3": {GUIDE: 1, MOD: 1},  # max of bob 1 and alice 0
    }
    # Provenance per label: who, how, when.
    prov = [json.loads(x) for x in merge.provenance_path(out).read_text(encoding="utf-8").splitlines()]
    c3 = next(p for p in prov if p["case_id"] == "c3")
    assert c3["grade"] == 1 and {(v["assessor"], v["grade"], v["how"]) for v in c3["verdicts"]} == {
        ("bob", 1, "page"),
        ("alice", 0, "page"),
    }
    # check-fixture passes on the merged fixture.
    assert check_cli.main([str(out)]) == 0
    # Strict figures recounted by hand for fixed rankings.
    ranked = {"c1": [SM, GUIDE, MS], "c2": [GUIDE, OPEN], "c3": [MOD, GUIDE]}
    before, after = strict(old, ranked), strict(new, ranked)
    assert before["recall_at_1"] == {"c1": 0.0, "c2": 0.0, "c3": 0.0}
    assert after["recall_at_1"] == {"c1": 1.0, "c2": 1.0, "c3": 1.0}
    assert before["mrr"] == pytest.approx({"c1": 1 / 3, "c2": 1 / 2, "c3": 1 / 2})
    assert after["mrr"] == {"c1": 1.0, "c2": 1.0, "c3": 1.0}
    d = [1 / math.log2(r + 1) for r in (1, 2, 3)]
    # c1: gains 2, 0, 1 against the ideal 2, 1 (grade 0 earns nothing).
    assert after["ndcg_at_3"]["c1"] == pytest.approx((2 * d[0] + 1 * d[2]) / (2 * d[0] + 1 * d[1]))
    assert before["ndcg_at_3"]["c1"] == pytest.approx(d[2] / d[0])
    # c2: GUIDE 1 at 1, OPEN 1 at 2; ideal 1, 1.
    assert after["ndcg_at_3"]["c2"] == pytest.approx(1.0)


def test_bad_labels_are_refused_with_one_line(labelled, capsys):
    fx, labels = labelled
    sha = load_fixture(fx).sha256
    append_label(labels, Label("zz", MOD, 1, "carol", "2026-12-03T17:00:00Z", 1.0, "page", sha))
    assert merge.main([str(fx), str(labels), "--rule", "max", "-o", str(fx.parent / "o.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{labels}:9: case 'zz' is not in" in err[0]
    # An edited fixture since labelling: refused before anything is merged.
    fx.write_text(FIXTURE.replace("install the package", "install it"), encoding="utf-8")
    assert merge.main([str(fx), str(labels), "--rule", "max", "-o", str(fx.parent / "o.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "edited since pooling" in err[0]
    assert not (fx.parent / "o.yaml").exists()


def test_a_block_list_becomes_a_mapping_when_a_person_grades_2_or_0():
    rows = [merge.Row(1, "c3", MOD, 2, "alice"), merge.Row(2, "c3", SM, 0, "alice")]
    text, data, _, added = merge.merge_text(FIXTURE, rows, "fx.yaml", "l.jsonl", people=True)
    assert added == 2
    assert data["cases"][2]["expected"] == {GUIDE: 1, MOD: 2, SM: 0}
    assert "    expected: {docs/guide.md#install: 1, pkg/a.py: 2, pkg/a.py::Session.merge: 0}\n" in text
    # A block list at the key's own indentation (yaml.safe_dump's layout) too.
    dumped = FIXTURE.replace(
        "    expected:\n      - docs/guide.md#install\n",
        "    expected:\n    - docs/guide.md#install\n    notes: x\n",
    )
    text, data, _, _ = merge.merge_text(dumped, rows, "fx.yaml", "l.jsonl", people=True)
    assert data["cases"][2]["expected"] == {GUIDE: 1, MOD: 2, SM: 0} and data["cases"][2]["notes"] == "x"
    with pytest.raises(merge.EvalpipeError, match="grade 2 for case 'c3'"):  # a judge's TSV still refuses
        merge.merge_text(FIXTURE, rows, "fx.yaml", "j.tsv")
