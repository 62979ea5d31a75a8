"""The gate's verdict on per-case values written by hand: exact p-values worked out independently
(by enumerating every sign flip), means and deltas counted by hand."""

from __future__ import annotations

import itertools
import json

import pytest

from evalpipe.gate import render
from evalpipe.gate.baseline_file import export_side, read_baseline
from evalpipe.gate.model import DataId, FixtureKey, FixtureRun, GateError, Side
from evalpipe.gate.rules import GateRules, apply, parse_drop_flags, read_rules_file
from evalpipe.gate.same_data import same_digest
from evalpipe.gate.verdict import min_p, run_gate
from evalpipe.stats.comparison import cases_from_rows

FX = "a" * 64
CORPUS = "c" * 64


def exact_sign_flip_p(diffs: list[float]) -> float:
    """Two-sided exact p of the paired sign-flip test: the share of the 2^n sign patterns whose
    |sum| is at least the observed |sum| (the oracle for the Monte Carlo p)."""
    nz = [d for d in diffs if d != 0]
    observed = abs(sum(nz))
    hits = sum(
        1
        for signs in itertools.product((1, -1), repeat=len(nz))
        if abs(sum(s * d for s, d in zip(signs, nz, strict=True))) >= observed - 1e-12
    )
    return hits / 2 ** len(nz)


def fixture_run(
    tiers: dict[str, list[float]], run_id: str, fixture: str = "gold", data: DataId | None = None
) -> FixtureRun:
    """A run whose recall_at_5 (and mrr = half of it) per case is given per tier, cases t-0, t-1, ..."""
    rows = []
    for tier, values in tiers.items():
        for i, v in enumerate(values):
            rows.append({"case_id": f"{tier}-{i}", "tier": tier, "query": f"q {tier} {i}",
                         "expected": json.dumps({f"doc-{tier}-{i}": 1}), "top": json.dumps([f"doc-{i}"]),
                         "first_rank": 1 if v else 0, "recall_at_5": v, "mrr": v / 2})  # fmt: skip
    cases = cases_from_rows(rows, run_id=run_id, name=run_id, objective="recall_at_5")
    return FixtureRun(FixtureKey(fixture), data or DataId(FX, CORPUS, "all", "tags"), cases, {})


def side(*runs: FixtureRun, label: str = "side") -> Side:
    return Side(label=label, run_id=runs[0].run_id if len(runs) == 1 else label, runs=list(runs))


def row(result, metric="recall_at_5", tier="overall", fixture="gold"):
    return next(r for r in result.rows if (r.metric, r.tier, r.key.fixture) == (metric, tier, fixture))


def test_a_regression_in_one_tier_hidden_by_a_gain_in_another_fails():
    # exact: 20 cases 1 -> 0 (every one lost); concept: 20 cases 0 -> 1 (every one won).
    base = fixture_run({"exact": [1.0] * 20, "concept": [0.0] * 20}, "base")
    cand = fixture_run({"exact": [0.0] * 20, "concept": [1.0] * 20}, "cand")
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",)))
    overall = row(result)
    assert overall.baseline == 0.5 and overall.candidate == 0.5 and overall.delta == 0.0
    assert overall.verdict == "unchanged"  # the aggregate sees nothing
    exact = row(result, tier="exact")
    assert (exact.baseline, exact.candidate, exact.delta) == (1.0, 0.0, -1.0)
    assert exact.verdict == "regression" and exact.p < 0.001  # exact p = 2 / 2^20
    assert row(result, tier="concept").verdict == "improved"
    assert not result.passed and result.exit_code == 1
    assert [r.tier for r in result.regressions] == ["exact"]
    text = render.markdown(result)
    assert "FAIL: 1 regression (recall_at_5 on gold/exact)" in text
    assert "| **recall_at_5** | **exact** | **20** | **1.0000** | **0.0000** | **-1.0000** |" in text
    # The lost cases are listed (20 lost, 20 won), each with its query.
    assert "20 lost, 20 won, 0 unchanged" in text and "| lost | exact | exact-0 | q exact 0 |" in text


def test_a_drop_within_noise_passes_and_shows_its_p():
    # 50 cases: 4 lost, 1 won -> delta -3/50 = -0.06, beyond the allowed 0.02; exact p = 12/32.
    values = [1.0] * 50
    cand_values = list(values)
    for i in range(4):
        cand_values[i] = 0.0
    base_values = list(values)
    base_values[10] = 0.0  # the one the candidate wins
    base = fixture_run({"concept": base_values}, "base")
    cand = fixture_run({"concept": cand_values}, "cand")
    diffs = [c - b for c, b in zip(cand_values, base_values, strict=True)]
    oracle = exact_sign_flip_p(diffs)
    assert oracle == pytest.approx(12 / 32)
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",), resamples=20000))
    r = row(result)
    assert r.delta == pytest.approx(-0.06) and r.changed == 5
    assert r.p == pytest.approx(oracle, abs=0.015)  # Monte Carlo p against the exact one
    assert r.verdict == "noise" and result.passed and result.exit_code == 0
    assert r.ci[0] <= r.delta <= r.ci[1]
    text = render.markdown(result)
    assert f"| {r.p:.4f} | 0.02 | drop within noise |" in text
    assert text.startswith("## evalpipe gate: PASS")


def test_a_significant_drop_within_the_allowed_drop_passes():
    # 1000 cases, 10 lost: delta -0.01 (allowed 0.02) although exact p = 2/1024 is tiny.
    base = fixture_run({"exact": [1.0] * 1000}, "base")
    cand = fixture_run({"exact": [0.0] * 10 + [1.0] * 990}, "cand")
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",), scope="overall"))
    r = row(result)
    assert r.delta == pytest.approx(-0.01) and r.p < 0.01 and r.verdict == "allowed"
    assert result.passed and [x.tier for x in result.rows] == ["overall"]
    # The same drop with a tighter allowance fails: both conditions hold.
    tight = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",), max_drop=0.005))
    assert row(tight).verdict == "regression" and tight.exit_code == 1
    # A per-metric allowance applies to that metric only.
    rules = GateRules(metrics=("recall_at_5", "mrr"), max_drop=0.005, max_drops={"recall_at_5": 0.02})
    mixed = run_gate(side(base), side(cand), rules)
    assert row(mixed).verdict == "allowed" and row(mixed, "mrr").delta == pytest.approx(-0.005)
    assert row(mixed, "mrr").verdict == "allowed"  # 0.005 is not more than 0.005


def test_a_tier_too_small_to_test_passes_with_a_warning():
    base = fixture_run({"exact": [1.0] * 40, "tiny": [1.0] * 4}, "base")
    cand = fixture_run({"exact": [1.0] * 40, "tiny": [0.0] * 4}, "cand")
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",)))
    tiny = row(result, tier="tiny")
    assert tiny.delta == -1.0 and tiny.verdict == "untestable" and min_p(4) == 0.125
    assert tiny.p == pytest.approx(exact_sign_flip_p([-1.0] * 4), abs=0.02)
    assert result.passed
    assert any("the tier has only 4 cases" in w and "0.125" in w for w in result.warnings)


def test_different_data_cannot_be_compared_unless_allowed():
    base = fixture_run({"exact": [1.0] * 10}, "base")
    other_corpus = fixture_run({"exact": [1.0] * 10}, "cand", data=DataId(FX, "d" * 64, "all", "inputs"))
    with pytest.raises(
        GateError, match=r"corpus sha256 differs: baseline cccccccccccc .*candidate dddddddddddd"
    ):
        run_gate(side(base), side(other_corpus), GateRules())
    other_fixture = fixture_run({"exact": [1.0] * 10}, "cand", data=DataId("b" * 64, CORPUS, "all", "inputs"))
    with pytest.raises(GateError, match="fixture sha256 differs"):
        run_gate(side(base), side(other_fixture), GateRules())
    other_split = fixture_run({"exact": [1.0] * 10}, "cand", data=DataId(FX, CORPUS, "test", "inputs"))
    with pytest.raises(GateError, match="split differs: baseline 'all', candidate 'test'"):
        run_gate(side(base), side(other_split), GateRules())
    unknown = fixture_run({"exact": [1.0] * 10}, "cand", data=DataId("", CORPUS, "all", "tags"))
    with pytest.raises(GateError, match=r"fixture sha256 differs: .*candidate \(none recorded\)"):
        run_gate(side(base), side(unknown), GateRules())
    flagged = run_gate(side(base), side(other_corpus), GateRules(), allow_different_data=True)
    assert flagged.different_data and flagged.passed
    assert "Warning: compared on different data" in render.markdown(flagged)
    assert json.loads(render.to_json(flagged))["different_data"] is True


def test_a_truncated_mlflow_digest_matches_the_full_sha256():
    assert same_digest(FX, FX[:36]) and not same_digest(FX, "b" * 36)
    assert not same_digest(FX, FX[:8])  # too short to identify anything
    base = fixture_run({"exact": [1.0] * 10}, "base")
    cand = fixture_run({"exact": [1.0] * 10}, "cand", data=DataId(FX[:36], CORPUS[:36], "all", "inputs"))
    assert run_gate(side(base), side(cand), GateRules()).passed


def test_a_suite_is_gated_fixture_by_fixture():
    base = side(
        fixture_run({"exact": [1.0] * 30}, "b-gold", "gold"),
        fixture_run({"concept": [1.0] * 30}, "b-docs", "docs", DataId("e" * 64, "f" * 64)),
        label="base suite",
    )
    cand = side(
        fixture_run({"exact": [1.0] * 30}, "c-gold", "gold"),
        fixture_run({"concept": [0.0] * 12 + [1.0] * 18}, "c-docs", "docs", DataId("e" * 64, "f" * 64)),
        label="cand suite",
    )
    result = run_gate(base, cand, GateRules(metrics=("recall_at_5",)))
    assert row(result, fixture="gold").verdict == "unchanged"
    docs = row(result, fixture="docs")
    assert docs.delta == pytest.approx(-0.4) and docs.verdict == "regression"
    assert {r.key.fixture for r in result.regressions} == {"docs"}
    assert "| fixture | metric | tier |" in render.markdown(result)
    # A baseline fixture the candidate did not measure: no verdict.
    partial = side(fixture_run({"exact": [1.0] * 30}, "c-gold", "gold"), label="gold only")
    with pytest.raises(GateError, match="has no run on docs"):
        run_gate(base, partial, GateRules())


def test_default_metrics_are_the_objective_and_mrr_and_unknown_ones_are_named():
    base = fixture_run({"exact": [1.0] * 10}, "base")
    cand = fixture_run({"exact": [1.0] * 10}, "cand")
    result = run_gate(side(base), side(cand), GateRules())
    assert list(dict.fromkeys(r.metric for r in result.rows)) == ["recall_at_5", "mrr"]
    with pytest.raises(GateError, match=r"no per-case 'ndcg_at_7'; available: mrr, recall_at_5"):
        run_gate(side(base), side(cand), GateRules(metrics=("ndcg_at_7",)))


def test_an_exported_baseline_gates_as_the_run_it_came_from(tmp_path):
    base = side(fixture_run({"exact": [1.0] * 20, "concept": [0.0] * 20}, "base"), label="base")
    cand = side(fixture_run({"exact": [0.0] * 20, "concept": [1.0] * 20}, "cand"))
    path = tmp_path / "baseline.json"
    path.write_text(export_side(base, name="main"), encoding="utf-8")
    case_lines = [line for line in path.read_text().splitlines() if '"case_id"' in line]
    assert len(case_lines) == 40  # one line per case
    back = read_baseline(path)
    direct, via_file = run_gate(base, cand, GateRules()), run_gate(back, cand, GateRules())
    assert [(r.metric, r.tier, r.delta, r.p, r.verdict) for r in direct.rows] == [
        (r.metric, r.tier, r.delta, r.p, r.verdict) for r in via_file.rows
    ]
    assert back.origin == "file" and back.runs[0].data.fixture_sha256 == FX


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", r"baseline.json:1: not valid JSON"),
        ('{"name": "x"}', "not an evalpipe baseline file"),
        ('{"evalpipe_baseline": 9, "fixtures": []}', "baseline format 9"),
        (
            '{"evalpipe_baseline": 1, "fixtures": [{"fixture": "g", "data": {}}]}',
            r"fixtures\[0\]: missing field 'cases'",
        ),
    ],
)
def test_a_bad_baseline_file_is_named(tmp_path, text, message):
    path = tmp_path / "baseline.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(GateError, match=message):
        read_baseline(path)


def test_rules_from_a_file_then_flags(tmp_path):
    path = tmp_path / "gate.yaml"
    path.write_text("gate:\n  metrics: [mrr]\n  max_drop: 0.05\n  max_drops: {mrr: 0.1}\n  alpha: 0.01\n")
    rules = read_rules_file(path)
    assert rules.metrics == ("mrr",) and rules.allowed_drop("mrr") == 0.1 and rules.allowed_drop("x") == 0.05
    rules = apply(rules, {"alpha": 0.1, "max_drops": parse_drop_flags(["recall_at_5=0.2"])}, "flags")
    assert rules.alpha == 0.1 and rules.max_drops == {"mrr": 0.1, "recall_at_5": 0.2}
    path.write_text("metrics: [mrr]\nmax_dorp: 0.05\n")
    with pytest.raises(GateError, match=r"unknown rule\(s\) \['max_dorp'\]"):
        read_rules_file(path)
    path.write_text("alpha: 0.05\nalpha: 0.1\n")
    with pytest.raises(GateError, match="gate.yaml"):
        read_rules_file(path)
    with pytest.raises(GateError, match="alpha must be between"):
        apply(GateRules(), {"alpha": 1.5}, "flags")
    with pytest.raises(GateError, match="write METRIC=DROP"):
        parse_drop_flags(["mrr"])


def test_values_equal_to_float_precision_are_the_same_case():
    """A per-case table read back from MLflow and one read from cases.jsonl differ in the last digits."""
    base = fixture_run({"exact": [1 / 3] * 10}, "base")
    cand = fixture_run({"exact": [1 / 3 + 1e-13] * 10}, "cand")
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",)))
    assert {r.verdict for r in result.rows} == {"unchanged"} and row(result).changed == 0
    assert result.fixtures[0].diff.unchanged == 10


def test_same_digests_but_other_cases_or_versions_are_different_data():
    """A BEIR fixture's digest covers its corpus only: its dev and test splits share it."""
    base = fixture_run({"exact": [1.0] * 10}, "base", data=DataId(FX, CORPUS, "all", "tags", "test"))
    dev = fixture_run({"exact": [1.0] * 10}, "cand", data=DataId(FX, CORPUS, "all", "tags", "dev"))
    with pytest.raises(GateError, match="fixture version differs: baseline 'test', candidate 'dev'"):
        run_gate(side(base), side(dev), GateRules())
    other_cases = fixture_run({"exact": [1.0] * 8, "concept": [1.0] * 2}, "cand")
    with pytest.raises(
        GateError, match=r"different cases: 2 only in the baseline \(e.g. 'exact-8'\), 2 only"
    ):
        run_gate(side(fixture_run({"exact": [1.0] * 10}, "base")), side(other_cases), GateRules())


def test_a_fixture_with_one_tier_is_gated_once():
    base = fixture_run({"all": [1.0] * 10}, "base")
    cand = fixture_run({"all": [1.0] * 10}, "cand")
    both = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",)))
    assert [r.tier for r in both.rows] == ["overall"]
    tiers = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",), scope="tiers"))
    assert [r.tier for r in tiers.rows] == ["all"]


def test_the_step_summary_version_lists_at_most_the_case_limit():
    base = fixture_run({"exact": [1.0] * 30}, "base")
    cand = fixture_run({"exact": [0.0] * 30}, "cand")
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",)))
    full, short = render.markdown(result), render.markdown(result, case_limit=10)
    assert full.count("| lost | exact |") == 30 and short.count("| lost | exact |") == 10
    assert "... 20 more cases in the full report" in short
