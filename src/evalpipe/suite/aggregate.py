"""A suite's figures from its fixtures' figures: per fixture, the macro mean, the minimum, the worst.

Pure (metrics in, metrics out), so the arithmetic is testable without MLflow. A figure is
aggregated only when every fixture has it (a tier or a RAG measure one fixture lacks is
reported per fixture only): a mean over the fixtures that happen to have it would compare
different things across suites.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Figures that describe cost or bookkeeping, not quality: per fixture only.
NOT_AGGREGATED = ("cost/", "count/", "index/", "fixture/")


@dataclass(frozen=True)
class SuiteFigures:
    metrics: dict[str, float]
    worst_fixture: str
    objective_value: float | None


def aggregate(
    per_fixture: Mapping[str, Mapping[str, float]], objective: str, agg: str = "mean"
) -> SuiteFigures:
    """`suite/<fixture>/<m>`, `suite/mean/<m>`, `suite/min/<m>`, and `<m>` itself = the `agg` of the
    fixtures (so `objective` names the suite's figure, as for a single run); the worst fixture is the
    one with the lowest objective."""
    # lazy: evalpipe.scoring.names, ~2 ms
    from evalpipe.scoring.names import lookup

    out: dict[str, float] = {}
    for fixture, metrics in per_fixture.items():
        for name, value in metrics.items():
            out[f"suite/{fixture}/{name}"] = float(value)
    names: Sequence[str] = []
    if per_fixture:
        shared = set.intersection(*(set(m) for m in per_fixture.values()))
        names = sorted(n for n in shared if not n.startswith(NOT_AGGREGATED))
    for name in names:
        values = [float(m[name]) for m in per_fixture.values()]
        mean = sum(values) / len(values)
        out[f"suite/mean/{name}"] = mean
        out[f"suite/min/{name}"] = min(values)
        out[name] = mean if agg == "mean" else min(values)
    out["suite/fixtures"] = float(len(per_fixture))
    scored = {f: lookup(m, objective) for f, m in per_fixture.items()}
    scored = {f: v for f, v in scored.items() if v is not None}
    worst = min(scored, key=lambda f: (scored[f], f)) if scored else ""
    value = lookup(out, objective)
    if value is None and objective in out:
        value = out[objective]
    return SuiteFigures(out, worst, None if value is None else float(value))


def headline_columns(ks: Sequence[int], present: set[str]) -> list[tuple[str, str, str]]:
    """(header, metric, format) of the suite table: R@K per K, MRR, nDCG@K at the tier cutoff."""
    # lazy: evalpipe.reporting.report, numpy, yaml, ~111 ms
    from evalpipe.reporting.report import tier_k

    cols = [(f"R@{k}", f"recall_at_{k}", "pct") for k in sorted(ks)]
    cols.append(("MRR", "mrr", "3f"))
    k = tier_k(ks)
    cols.append((f"nDCG@{k}", f"ndcg_at_{k}", "4f"))
    return [c for c in cols if c[1] in present]


def table(
    per_fixture: Mapping[str, Mapping[str, float]], figures: SuiteFigures, ks: Sequence[int], agg: str
) -> tuple[list[str], list[list[str]]]:
    """Fixture x headline metrics, then the macro mean and the minimum (the worst fixture's row)."""
    # lazy: evalpipe.reporting.report, numpy, yaml, ~111 ms
    from evalpipe.reporting.report import DASH, pct

    present = set.intersection(*(set(m) for m in per_fixture.values())) if per_fixture else set()
    cols = headline_columns(ks, present)

    def fmt(value: float | None, kind: str) -> str:
        if value is None:
            return DASH
        return pct(value) if kind == "pct" else f"{value:.3f}" if kind == "3f" else f"{value:.4f}"

    header = ["fixture", "cases", *(h for h, _, _ in cols)]
    body = []
    for fixture, metrics in per_fixture.items():
        cases = metrics.get("count/cases")
        mark = " (worst)" if fixture == figures.worst_fixture and len(per_fixture) > 1 else ""
        body.append(
            [fixture + mark, DASH if cases is None else f"{cases:.0f}"]
            + [fmt(metrics.get(name), kind) for _, name, kind in cols]
        )
    for label, prefix in (
        (f"macro mean{' *' if agg == 'mean' else ''}", "mean"),
        (f"min{' *' if agg == 'min' else ''}", "min"),
    ):
        body.append(
            [label, ""] + [fmt(figures.metrics.get(f"suite/{prefix}/{name}"), kind) for _, name, kind in cols]
        )
    return header, body
