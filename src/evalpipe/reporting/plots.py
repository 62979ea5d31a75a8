"""PNG figures for one run (recall@K, per tier, latency) and for a sweep (metric over each swept parameter).

Figures are drawn with matplotlib's object API on an Agg canvas (no pyplot, no
global backend switch), so plotting is safe in headless sweep parents, joblib
workers and tests, and returns bytes the caller logs wherever it likes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from evalpipe.scoring.run import RunScores


class SweepRow(Protocol):
    """What a sweep plot reads of a point (`tracking.sweep_summary.SweepRow` is one): the store
    layer collects the points, this module only draws them, so it does not import that layer."""

    @property
    def values(self) -> Mapping[str, str]: ...

    @property
    def metrics(self) -> Mapping[str, float]: ...

    @property
    def measured(self) -> bool: ...


#: More lines than this in one panel become an unlabelled scatter (a legend would be unreadable).
MAX_LINES = 10
DPI = 110


def _figure(ncols: int = 1, width: float = 6.4, height: float = 4.2) -> tuple[Any, list[Any]]:
    # lazy: matplotlib, numpy, ~374 ms
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * ncols, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _png(fig: Any) -> bytes:
    # lazy: matplotlib, numpy, ~249 ms
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _tiers(scores: RunScores) -> list[str]:
    return [t for t, f in scores.per_tier.items() if f.get("cases", 0)]


def recall_curve(scores: RunScores) -> bytes:
    """Any-hit recall@K (and fractional recall@K) over K, overall bold and per tier thin."""
    fig, (ax,) = _figure()
    ks = list(scores.ks)
    ax.plot(ks, [scores.metric(f"recall_at_{k}") for k in ks], "o-", lw=2.5, color="black", label="all")
    if f"frac_recall_at_{ks[0]}" in scores.overall:
        frac = [scores.metric(f"frac_recall_at_{k}") for k in ks]
        ax.plot(ks, frac, "s--", lw=1.5, color="grey", label="all (fractional recall)")
    for tier in _tiers(scores):
        n = int(scores.per_tier[tier]["cases"])
        values = [scores.metric(f"recall_at_{k}", tier) for k in ks]
        ax.plot(ks, values, "o-", lw=1, alpha=0.8, label=f"{tier} (n={n})")
    ax.set_xscale("log" if ks[-1] / ks[0] >= 10 else "linear")
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("K")
    ax.set_ylabel("recall@K (any expected ID in top K)")
    ax.set_title(f"Recall@K ({scores.cases} cases)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return _png(fig)


def tier_bars(scores: RunScores) -> bytes:
    """Recall@K per tier: one group per tier, one bar per K, labelled with the percentage."""
    tiers = _tiers(scores)
    ks = list(scores.ks)
    fig, (ax,) = _figure(width=max(6.4, 1.6 * len(tiers) * max(1, len(ks)) / 2))
    width = 0.8 / len(ks)
    x = np.arange(len(tiers))
    for i, k in enumerate(ks):
        values = [scores.metric(f"recall_at_{k}", t) for t in tiers]
        bars = ax.bar(x + (i - (len(ks) - 1) / 2) * width, values, width, label=f"R@{k}")
        ax.bar_label(bars, labels=[f"{v * 100:.0f}%" for v in values], fontsize="x-small", padding=1)
    ax.set_xticks(x, [f"{t}\n(n={int(scores.per_tier[t]['cases'])})" for t in tiers])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("recall@K")
    ax.set_title("Recall@K per tier")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", ncols=len(ks), loc="upper right")
    return _png(fig)


def latency_histogram(latency_us: Sequence[int]) -> bytes:
    """Per-case search latency (µs) with p50/p95 marked; log-spaced bins when it spans >2 decades."""
    lat = np.asarray(latency_us, dtype=np.float64)
    lat = lat[np.isfinite(lat)]
    fig, (ax,) = _figure()
    lo, hi = max(float(lat.min()), 1.0), max(float(lat.max()), 1.0)
    if hi / lo > 100:
        bins = np.geomspace(lo, hi, 40)
        ax.set_xscale("log")
    else:
        bins = 40
    ax.hist(np.clip(lat, lo, None), bins=bins, color="tab:blue", alpha=0.8)
    for q, style in ((50, "-"), (95, "--")):
        v = float(np.percentile(lat, q))
        ax.axvline(v, color="black", ls=style, lw=1.2, label=f"p{q} = {v:,.0f} µs")
    ax.set_xlabel("latency per query (µs)")
    ax.set_ylabel("cases")
    ax.set_title(f"Search latency ({lat.size} cases)")
    ax.legend(fontsize="small")
    return _png(fig)


def run_plots(scores: RunScores, latency_us: Sequence[int] | None = None) -> dict[str, bytes]:
    """{filename: PNG} for one run.

    `latency_us` are the per-case latencies (RunScores keeps only percentiles); without them
    the latency histogram is left out.
    """
    out = {"recall_at_k.png": recall_curve(scores), "tier_recall.png": tier_bars(scores)}
    if latency_us is not None and len(latency_us):
        out["latency_hist.png"] = latency_histogram(latency_us)
    return out


#: Config `plots`: "recall" (default) = the recall@K curve as SVG, no matplotlib (~0 s);
#: "all" (or true) = the three matplotlib PNGs (~1 s: import plus rendering); "none" (or false).
PLOT_MODES = ("recall", "all", "none")


def plot_mode(value: Any) -> str:
    """The `plots` config value as one of PLOT_MODES (true/false kept for older configs)."""
    if value is True:
        return "all"
    if value is False or value is None:
        return "none"
    if isinstance(value, str) and value.lower() in PLOT_MODES:
        return value.lower()
    raise ValueError(f"plots must be recall, all or none (or true/false), got {value!r} (e.g. plots=all)")


def run_figures(scores: RunScores, latency_us: Sequence[int] | None, mode: str) -> dict[str, bytes]:
    """The per-run figures `mode` asks for, as {filename: bytes}."""
    if mode == "none":
        return {}
    if mode == "recall":
        # lazy: evalpipe.reporting.svg_plots, ~4 ms
        from evalpipe.reporting.svg_plots import recall_curve_svg

        return {"recall_at_k.svg": recall_curve_svg(scores).encode("utf-8")}
    return run_plots(scores, latency_us)


def _as_numbers(values: Sequence[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "param"


def _panel(ax: Any, rows: Sequence[SweepRow], param: str, others: Sequence[str], metric: str) -> None:
    rows = [r for r in rows if r.measured and metric in r.metrics and param in r.values]
    raw = list(dict.fromkeys(r.values[param] for r in rows))
    numbers = _as_numbers(raw)
    if numbers is not None:
        position = dict(zip(raw, numbers, strict=True))
    else:
        position = {v: float(i) for i, v in enumerate(sorted(raw))}
        ax.set_xticks(list(position.values()), [v[:24] for v in position], rotation=20, fontsize="small")
    groups: dict[tuple[str, ...], list[SweepRow]] = {}
    for r in rows:
        groups.setdefault(tuple(r.values.get(o, "") for o in others), []).append(r)
    if len(groups) > MAX_LINES:
        ax.scatter([position[r.values[param]] for r in rows], [r.metrics[metric] for r in rows], alpha=0.7)
    else:
        for combo, members in sorted(groups.items()):
            members = sorted(members, key=lambda r: position[r.values[param]])
            label = ", ".join(f"{o.split('.')[-1]}={v}" for o, v in zip(others, combo, strict=True)) or "all"
            ax.plot(
                [position[r.values[param]] for r in members],
                [r.metrics[metric] for r in members],
                "o-",
                label=label[:60],
            )
        if others:
            ax.legend(fontsize="x-small")
    ax.set_xlabel(param)
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)


def sweep_plots(
    rows: Sequence[SweepRow], metrics: Sequence[str] = ("recall_at_5", "mrr")
) -> dict[str, bytes]:
    """{`sweep_<param>.png`: PNG}: each metric over each swept parameter that takes >1 value.

    One line per combination of the other swept parameters (a scatter beyond
    MAX_LINES combinations); one panel per metric present in the runs.
    """
    params = list(dict.fromkeys(k for r in rows for k in r.values))
    params = [p for p in params if len({r.values.get(p) for r in rows}) > 1]
    present = [m for m in dict.fromkeys(metrics) if any(m in r.metrics for r in rows if r.measured)]
    out: dict[str, bytes] = {}
    if not present:
        return out
    for param in params:
        others = [p for p in params if p != param]
        fig, axes = _figure(ncols=len(present), width=5.6)
        for ax, metric in zip(axes, present, strict=True):
            _panel(ax, rows, param, others, metric)
        fig.suptitle(f"sweep: {', '.join(present)} over {param}")
        out[f"sweep_{_slug(param)}.png"] = _png(fig)
    return out
