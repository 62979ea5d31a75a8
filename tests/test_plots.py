"""Run and sweep figures: which files are drawn, and that each is a real PNG of the intended size."""

from __future__ import annotations

import io

import numpy as np
import pytest

from evalpipe.core import Hit
from evalpipe.reporting.plots import DPI, run_plots, sweep_plots
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import score_results
from evalpipe.tracking.sweep_summary import SweepRow

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def image(png: bytes) -> np.ndarray:
    from matplotlib.image import imread

    assert png.startswith(PNG_MAGIC)
    return imread(io.BytesIO(png), format="png")


def case(cid: str, tier: str, expected: str, ranked: list[str], latency: int) -> CaseResult:
    hits = tuple(Hit(d, 1.0 / (i + 1)) for i, d in enumerate(ranked))
    return CaseResult(cid, tier, f"query {cid}", {expected: 1}, hits, latency, 10)


@pytest.fixture
def scores():
    results = [
        case("a", "exact", "x", ["x", "y"], 50),
        case("b", "concept", "y", ["x", "z", "w", "y"], 120),
        case("c", "multi_hop", "z", ["y"], 3000),
    ]
    return score_results(results, [1, 5]), [r.latency_us for r in results]


def test_run_plots_draw_three_pngs(scores):
    s, latencies = scores
    # By hand: recall_at_1 = 1/3 (only a), recall_at_5 = 2/3 (a, b): the curve has something to show.
    assert (s.metric("recall_at_1"), s.metric("recall_at_5")) == pytest.approx((1 / 3, 2 / 3))
    out = run_plots(s, latencies)
    assert set(out) == {"recall_at_k.png", "tier_recall.png", "latency_hist.png"}
    h, w, _ = image(out["recall_at_k.png"]).shape
    assert (w, h) == (round(6.4 * DPI), round(4.2 * DPI))
    assert set(run_plots(s)) == {"recall_at_k.png", "tier_recall.png"}  # no latencies, no histogram


def rows() -> list[SweepRow]:
    """A 3 x 2 grid (k1 x method) plus a failed point, which must not be drawn."""
    out = []
    job = 0
    for k1 in ("0.9", "1.2", "1.5"):
        for method in ("lucene", "robertson"):
            r5 = 0.5 + 0.1 * float(k1) + (0.05 if method == "lucene" else 0.0)
            metrics = {"recall_at_5": r5, "mrr": r5 / 2}
            out.append(
                SweepRow(
                    job, f"run{job}", "", "FINISHED", {"ranker.k1": k1, "ranker.method": method}, metrics
                )
            )
            job += 1
    out.append(SweepRow(job, "bad", "", "FAILED", {"ranker.k1": "2.0", "ranker.method": "lucene"}, {}))
    return out


def test_sweep_plots_one_figure_per_swept_parameter():
    out = sweep_plots(rows(), ["recall_at_5", "mrr", "ndcg_at_10"])  # ndcg_at_10 absent: no panel
    assert set(out) == {"sweep_ranker.k1.png", "sweep_ranker.method.png"}
    h, w, _ = image(out["sweep_ranker.k1.png"]).shape
    assert (w, h) == (round(2 * 5.6 * DPI), round(4.2 * DPI))  # two panels: recall_at_5 and mrr


def test_sweep_plots_skip_constant_parameters_and_missing_metrics():
    constant = [SweepRow(0, "r0", "", "FINISHED", {"a": "1", "b": "x"}, {"mrr": 0.5})]
    constant.append(SweepRow(1, "r1", "", "FINISHED", {"a": "2", "b": "x"}, {"mrr": 0.6}))
    assert set(sweep_plots(constant, ["mrr"])) == {"sweep_a.png"}
    assert sweep_plots(constant, ["recall_at_5"]) == {}
