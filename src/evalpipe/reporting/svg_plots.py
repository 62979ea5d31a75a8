"""The recall@K curve as a hand-written SVG: the one per-run figure drawn by default.

Importing matplotlib and rendering three PNGs cost about a second per run, most of a
small run's own work (issue #13), while the figure people open is the recall curve.
A few polylines of SVG text draw that curve in well under a millisecond with no
import, and the MLflow UI previews `.svg` artifacts like PNGs. The matplotlib
figures (`evalpipe.reporting.plots`) stay available with `plots=all`.
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalpipe.scoring.run import RunScores

WIDTH, HEIGHT = 640, 420
LEFT, RIGHT, TOP, BOTTOM = 60, 170, 40, 50  # margins; the legend sits in the right one
#: matplotlib's default cycle, so the SVG and PNG figures look alike.
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _x_positions(ks: list[int]) -> list[float]:
    """Plot x of each K: log-spaced when K spans a decade or more (as the PNG), else linear."""
    span = WIDTH - LEFT - RIGHT
    if len(ks) == 1:
        return [LEFT + span / 2]
    log = ks[-1] / ks[0] >= 10
    lo, hi = (math.log(ks[0]), math.log(ks[-1])) if log else (ks[0], ks[-1])
    return [LEFT + span * ((math.log(k) if log else k) - lo) / (hi - lo) for k in ks]


def _y(value: float) -> float:
    return TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - min(max(value, 0.0), 1.0))


def recall_curve_svg(scores: RunScores) -> str:
    """Any-hit recall@K over K: all cases bold black, each tier thin in its own colour."""
    ks = list(scores.ks)
    xs = _x_positions(ks)
    series = [("all", [scores.metric(f"recall_at_{k}") for k in ks], "#000000", 2.5)]
    tiers = [t for t, f in scores.per_tier.items() if f.get("cases", 0)]
    for i, tier in enumerate(tiers):
        n = int(scores.per_tier[tier]["cases"])
        values = [scores.metric(f"recall_at_{k}", tier) for k in ks]
        series.append((f"{tier} (n={n})", values, COLORS[i % len(COLORS)], 1.2))
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{(WIDTH - RIGHT + LEFT) / 2}" y="22" text-anchor="middle" font-size="14">'
        f"Recall@K ({scores.cases} cases)</text>",
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):  # horizontal grid and y labels
        y = _y(tick)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:.2f}</text>')
    for k, x in zip(ks, xs, strict=True):
        out.append(f'<text x="{x:.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">{k}</text>')
    out.append(f'<text x="{(WIDTH - RIGHT + LEFT) / 2}" y="{HEIGHT - 12}" text-anchor="middle">K</text>')
    out.append(
        f'<text x="16" y="{(HEIGHT - BOTTOM + TOP) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {(HEIGHT - BOTTOM + TOP) / 2})">recall@K (any expected ID in top K)</text>'
    )
    for i, (label, values, color, width) in enumerate(series):
        points = " ".join(f"{x:.1f},{_y(v):.1f}" for x, v in zip(xs, values, strict=True))
        out.append(f'<polyline points="{points}" fill="none" stroke="{color}" stroke-width="{width}"/>')
        out += [
            f'<circle cx="{x:.1f}" cy="{_y(v):.1f}" r="3" fill="{color}"/>'
            for x, v in zip(xs, values, strict=True)
        ]
        ly = TOP + 10 + 18 * i
        lx = WIDTH - RIGHT + 14
        out.append(
            f'<line x1="{lx}" x2="{lx + 20}" y1="{ly}" y2="{ly}" stroke="{color}" stroke-width="{width}"/>'
        )
        out.append(f'<text x="{lx + 26}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>\n")
    return "\n".join(out)
