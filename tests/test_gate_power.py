"""The gate's multiple-comparison correction and its minimum detectable drops, on planted cases."""

from __future__ import annotations

import pytest

from evalpipe.gate import render
from evalpipe.gate.rules import GateRules
from evalpipe.gate.verdict import run_gate
from evalpipe.stats.power import binary_mde, min_changed
from test_gate_verdict import fixture_run, row, side


def _tiers(lost: dict[str, int], sizes: dict[str, int]):
    base = fixture_run({t: [1.0] * n for t, n in sizes.items()}, "base")
    cand = fixture_run(
        {t: [0.0] * lost.get(t, 0) + [1.0] * (n - lost.get(t, 0)) for t, n in sizes.items()}, "cand"
    )
    return base, cand


def test_allowed_drop_below_the_mde_warns_and_a_big_enough_one_does_not():
    # 40-case tiers, every baseline case a hit, 1 case lost per tier (fewer than min_changed):
    # each row's spread comes from the baseline (all hits: discordance 0), so its MDE is the
    # minimum-churn one at the level Holm holds a row of 2 metrics x 3 rows to: alpha / 6.
    base, cand = _tiers({"exact": 1, "concept": 1}, {"exact": 40, "concept": 40})
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5", "mrr")))
    assert len(result.rows) == 6
    level = 0.05 / 6
    exact = row(result, tier="exact")
    assert exact.mde is not None and exact.mde.mde == pytest.approx(binary_mde(40, 0.0, level))
    assert exact.mde.mde > 0.2  # a tier of 40 cannot see a 2-point drop, nor a 20-point one
    warning = next(w for w in result.warnings if "recall_at_5: the allowed drop 0.02 is below" in w)
    assert "3 of 3 row(s)" in warning and f"exact (40 cases) >= {exact.mde.text()}" in warning
    text = render.markdown(result)
    assert (
        "detects >=" in text
        and "this gate can detect drops of at least this size" in text
        and exact.mde.text() in text
    )
    # Allowing a drop as large as the worst MDE silences the warning.
    worst = max(r.mde.mde for r in result.rows if r.mde is not None)
    calm = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5", "mrr"), max_drop=worst + 0.01))
    assert not any("is below the smallest drop" in w for w in calm.warnings)


def test_a_tier_smaller_than_the_fewest_detectable_changes_detects_nothing():
    small = min_changed(0.05 / 3) - 1  # 3 rows: overall, exact, tiny; 2 / 2^6 > 0.05 / 3
    assert small == 6
    base, cand = _tiers({}, {"exact": 40, "tiny": small})
    result = run_gate(side(base), side(cand), GateRules(metrics=("recall_at_5",)))
    tiny = row(result, tier="tiny")
    assert tiny.mde is not None and not tiny.mde.detectable and tiny.mde.text() == "none"
    assert any("tiny (6 cases) >= none" in w for w in result.warnings)


def test_the_exit_code_uses_the_adjusted_p():
    # 8 rows (2 metrics x overall + 3 tiers). One tier loses 7 of 7 discordant cases:
    # exact p = 2 / 2^7 = 0.0156 < 0.05 raw, but Holm multiplies the smallest p by 8 rows (0.125).
    base, cand = _tiers({"exact": 7}, {"exact": 60, "concept": 60, "path": 60})
    rules = GateRules(metrics=("recall_at_5", "mrr"), max_drop=0.0, resamples=20000)
    holm = run_gate(side(base), side(cand), rules)
    exact = row(holm, tier="exact")
    assert len(holm.rows) == 8
    assert exact.p == pytest.approx(2 / 2**7, abs=0.004)
    assert exact.p_adj is not None and exact.p_adj >= 0.05 and exact.verdict == "noise"
    assert holm.exit_code == 0
    raw = run_gate(side(base), side(cand), GateRules(**{**rules.__dict__, "correction": "none"}))
    assert row(raw, tier="exact").verdict == "regression" and raw.exit_code == 1
    text = render.markdown(holm)
    assert "p holm" in text and "Holm step-down" in text
