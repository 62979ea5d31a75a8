"""The default per-run figure: a recall@K SVG drawn without matplotlib, and the `plots` modes."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from evalpipe.core import Hit
from evalpipe.reporting.plots import plot_mode, run_figures
from evalpipe.reporting.svg_plots import HEIGHT, TOP, _y, recall_curve_svg
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import score_results

SVG = "{http://www.w3.org/2000/svg}"


def _scores():
    def case(cid, tier, expected, ranked):
        return CaseResult(cid, tier, "q", {expected: 1}, tuple(Hit(d) for d in ranked), 10, 1)

    results = [
        case("a", "exact", "x", ["x", "y"]),  # hit at 1
        case("b", "concept", "y", ["x", "z", "w", "y"]),  # hit at 4
        case("c", "concept", "z", ["y"]),  # never
    ]
    return score_results(results, [1, 5])


def test_recall_curve_svg_plots_the_recall_values():
    root = ET.fromstring(recall_curve_svg(_scores()))
    lines = root.findall(f"{SVG}polyline")
    assert len(lines) == 3  # all, exact, concept
    ys = [[float(p.split(",")[1]) for p in line.get("points").split()] for line in lines]
    # all: recall@1 = 1/3, recall@5 = 2/3; exact: 1, 1; concept: 0, 1/2 (hand-worked)
    assert ys == [[_y(1 / 3), _y(2 / 3)], [_y(1.0), _y(1.0)], [_y(0.0), _y(0.5)]]
    assert _y(1.0) == TOP and _y(0.0) < HEIGHT
    labels = [t.text for t in root.findall(f"{SVG}text")]
    assert "Recall@K (3 cases)" in labels and "concept (n=2)" in labels


def test_plot_modes():
    assert [plot_mode(v) for v in (True, False, None, "recall", "ALL", "none")] == [
        "all", "none", "none", "recall", "all", "none"
    ]  # fmt: skip
    with pytest.raises(ValueError, match="plots must be recall, all or none"):
        plot_mode("some")
    scores = _scores()
    assert list(run_figures(scores, [10, 10, 10], "recall")) == ["recall_at_k.svg"]
    assert run_figures(scores, [10], "none") == {}


def test_the_default_figure_does_not_import_matplotlib():
    code = (
        "import sys\n"
        "from tests.test_svg_plots import _scores\n"
        "from evalpipe.reporting.plots import run_figures\n"
        "run_figures(_scores(), [1], 'recall')\n"
        "print('matplotlib' in sys.modules)\n"
    )
    from conftest import ROOT

    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}:{ROOT / 'tests'}", "MLFLOW_DISABLE_TELEMETRY": "true"},
        timeout=120,
    )
    assert out.stdout.strip() == "False", out.stderr
