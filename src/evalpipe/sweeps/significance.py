"""Which points of a sweep are tied with the best, and does anything beat the default?

A sweep's best point is the maximum of many noisy figures. Over the points' per-case values
of the objective (the cases every point scored), this module asks two families of paired
questions, each corrected over its own family (Holm by default, `evalpipe.stats.corrections`):

* every point against the best (highest mean): a point whose adjusted p >= alpha is **tied with
  the best** (`evalpipe.stats.ties`); the best is then first among equals;
* when the default configuration (the swept keys at the values the sweep's base config has)
  is one of the points: every point against it, with the paired mean difference, its bootstrap
  CI, cases won / lost and raw and adjusted p; "beats the default" is a gain with adjusted
  p < alpha. The default tied with the best means the sweep found nothing.

The tests are the paired randomization test and bootstrap of `evalpipe compare`; the
minimum detectable difference (`evalpipe.stats.power`) says how small a gain the family could
have seen at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalpipe.stats.corrections import DEFAULT_METHOD, DESCRIPTION, adjust, check_method, family_alpha
from evalpipe.stats.power import POWER, Detectable, one_run, paired
from evalpipe.stats.resampling import paired_bootstrap_ci_diff, paired_randomization_test
from evalpipe.stats.ties import Ties, tied_with_best

RESAMPLES = 10000


@dataclass(frozen=True)
class Settings:
    """How a sweep's points are compared (config `sweep.alpha`, `sweep.correction`, `sweep.power`)."""

    alpha: float = 0.05
    correction: str = DEFAULT_METHOD
    power: float = POWER
    resamples: int = RESAMPLES
    seed: int = 0

    def __post_init__(self) -> None:
        try:
            check_method(self.correction)
        except ValueError as exc:
            raise ValueError(f"sweep.correction: {exc}") from None
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"sweep.alpha must be between 0 and 1, got {self.alpha}")
        if not 0.0 < self.power < 1.0:
            raise ValueError(f"sweep.power must be between 0 and 1, got {self.power}")


def settings_from(sweep: Mapping[str, Any] | None) -> Settings:
    """The settings from the config's `sweep:` mapping (read once, at the sweep's start)."""
    sweep = sweep or {}
    numbers = {}
    for key, default in (("alpha", 0.05), ("power", POWER)):
        value = sweep.get(key, default)
        try:
            numbers[key] = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"sweep.{key} must be a number between 0 and 1, got {value!r}") from None
    return Settings(correction=str(sweep.get("correction", DEFAULT_METHOD)), **numbers)


@dataclass(frozen=True)
class VsDefault:
    """One point against the default configuration, paired over the shared cases."""

    diff: float
    lo: float
    hi: float
    won: int
    lost: int
    p: float
    p_adj: float

    def beats(self, alpha: float) -> bool:
        return self.diff > 0 and self.p_adj < alpha


@dataclass(frozen=True)
class Significance:
    """The tied group and the comparisons with the default, over `rows` (SweepRows with cases)."""

    objective: str
    settings: Settings
    rows: Sequence[Any]
    means: Sequence[float]
    cases: int
    ties: Ties
    default: int | None = None
    vs_default: Sequence[VsDefault | None] = ()
    #: the smallest difference from the best the family of comparisons detects
    mde: Detectable | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def best_row(self) -> Any:
        return self.rows[self.ties.best]

    @property
    def tied_rows(self) -> list[Any]:
        return [self.rows[i] for i in self.ties.tied]

    @property
    def default_tied(self) -> bool:
        return self.default is not None and self.ties.is_tied(self.default)

    @property
    def best_beats_default(self) -> bool | None:
        if self.default is None or self.default == self.ties.best:
            return None if self.default is None else False
        vs = self.vs_default[self.ties.best]
        return vs is not None and vs.beats(self.settings.alpha)

    def is_tied(self, run_id: str) -> bool:
        return any(self.rows[i].run_id == run_id for i in self.ties.tied)

    def method_line(self) -> str:
        s = self.settings
        return (
            f"paired randomization test on {self.cases} shared cases ({s.resamples} resamples), p adjusted "
            f"over each family ({DESCRIPTION[s.correction]}), alpha {s.alpha:g}"
        )

    def headline(self, label) -> str:
        """`3 of 12 points are tied with the best (...)`: the group in one line."""
        names = ", ".join(label(r) for r in self.tied_rows)
        return (
            f"{self.ties.size} of {len(self.rows)} points are tied with the best on {self.objective} "
            f"(not significantly worse after correction): {names}"
        )

    def warnings(self, label) -> list[str]:
        out = []
        if self.default_tied and self.default != self.ties.best:
            out.append(
                f"the default configuration ({label(self.rows[self.default])}) is tied with the best: the "
                f"sweep found nothing the paired test can tell from the default on {self.objective}"
            )
        if self.default is not None and self.best_beats_default is False and self.default != self.ties.best:
            vs = self.vs_default[self.ties.best]
            if vs is not None:
                out.append(
                    f"the best point is NOT significantly better than the default ({self.objective} "
                    f"{vs.diff:+.4f}, p = {vs.p:.4f}, adjusted {vs.p_adj:.4f}); tied with the best: "
                    + ", ".join(label(r) for r in self.tied_rows)
                )
        if self.default is not None and self.default == self.ties.best:
            out.append(
                f"the default configuration is the best point on {self.objective}: the sweep found nothing"
            )
        return out


def _matches(value: str, wanted: Any) -> bool:
    if str(value) == str(wanted):
        return True
    try:
        return abs(float(value) - float(wanted)) <= 1e-9 * max(1.0, abs(float(wanted)))
    except (TypeError, ValueError):
        return False


def default_index(rows: Sequence[Any], keys: Sequence[str], defaults: Mapping[str, Any]) -> int | None:
    """The point whose swept values are the base config's (None: a key has no default, or no point)."""
    if not keys or any(k not in defaults for k in keys):
        return None
    for i, row in enumerate(rows):
        if all(_matches(row.values.get(k, ""), defaults[k]) for k in keys):
            return i
    return None


def significance(
    rows: Sequence[Any],
    per_case: Sequence[Mapping[str, float] | None],
    objective: str,
    settings: Settings,
    default: int | None = None,
) -> Significance | None:
    """The tied group (and the comparisons with the default) from each row's per-case values.

    Rows without per-case values are left out (a note says how many); None when fewer than two
    points remain."""
    keep = [i for i, pc in enumerate(per_case) if pc]
    notes = []
    if len(keep) < len(rows):
        notes.append(f"{len(rows) - len(keep)} point(s) without per-case values are left out of the tests")
    if len(keep) < 2:
        return None
    shared = [c for c in per_case[keep[0]] or {} if all(c in (per_case[i] or {}) for i in keep)]
    if not shared:
        return None
    points = [rows[i] for i in keep]
    values = [np.array([per_case[i][c] for c in shared], dtype=np.float64) for i in keep]  # type: ignore[index]
    means = [float(v.mean()) for v in values]
    best = max(range(len(points)), key=lambda i: (means[i], -i))
    s = settings
    p_best = [
        None if i == best else paired_randomization_test(values[best], v, s.resamples, s.seed)
        for i, v in enumerate(values)
    ]
    ties = tied_with_best(means, p_best, s.alpha, s.correction, best)
    d = keep.index(default) if default is not None and default in keep else None
    vs: list[VsDefault | None] = []
    if d is not None:
        raw = [
            None if i == d else paired_randomization_test(v, values[d], s.resamples, s.seed)
            for i, v in enumerate(values)
        ]
        adjusted = adjust(raw, s.correction)
        for i, v in enumerate(values):
            if i == d or raw[i] is None:
                vs.append(None)
                continue
            diff, lo, hi = paired_bootstrap_ci_diff(v, values[d], s.resamples, 1 - s.alpha, s.seed)
            won, lost = int(np.sum(v > values[d])), int(np.sum(v < values[d]))
            vs.append(VsDefault(diff, lo, hi, won, lost, float(raw[i]), float(adjusted[i])))  # type: ignore[arg-type]
    level = family_alpha(s.alpha, len(points) - 1, s.correction)
    if d is not None and d != best:  # the spread of the best's differences from the default
        mde = paired(values[d], values[best], level, s.power)
    else:
        mde = one_run(values[best], level, s.power)
    return Significance(objective, s, points, means, len(shared), ties, d, vs, mde, tuple(notes))


# --- what the summary, the parent run and the terminal show ---------------------------------------


def label_for(keys: Sequence[str]):
    """How a point is named in a line: `job 3 (ranker.k1=1.2 ranker.b=0.75)`."""

    def label(row: Any) -> str:
        values = " ".join(f"{k}={row.values.get(k, '—')}" for k in keys)
        job = "" if row.job is None else f"job {row.job} "
        return f"{job}({values})" if values else job.strip() or row.run_id[:8]

    return label


def markdown(sig: Significance, keys: Sequence[str], label) -> list[str]:
    # lazy: evalpipe.reporting.report, yaml, ~51 ms
    from evalpipe.reporting.report import markdown_table

    out = ["## Tied with the best", "", f"_{sig.method_line()}_", "", f"**{sig.headline(label)}**", ""]
    header = [
        "job",
        *keys,
        sig.objective,
        "Δ vs best",
        "p vs best",
        f"p adj ({sig.settings.correction})",
        "tied",
    ]
    if sig.default is not None:
        header += ["Δ vs default [CI]", "won/lost", "p adj vs default", "beats default"]
    body = []
    best = sig.means[sig.ties.best]
    for i, row in enumerate(sig.rows):
        cells = [
            "—" if row.job is None else str(row.job),
            *(str(row.values.get(k, "—")) for k in keys),
            f"{sig.means[i]:.4f}",
            "(best)" if i == sig.ties.best else f"{sig.means[i] - best:+.4f}",
            "" if sig.ties.p_raw[i] is None else f"{sig.ties.p_raw[i]:.4f}",
            "" if sig.ties.p_adj[i] is None else f"{sig.ties.p_adj[i]:.4f}",
            "yes" if sig.ties.is_tied(i) else "",
        ]
        if sig.default is not None:
            vs = sig.vs_default[i]
            if i == sig.default:
                cells += ["(default)", "", "", ""]
            elif vs is not None:
                cells += [
                    f"{vs.diff:+.4f} [{vs.lo:+.4f}, {vs.hi:+.4f}]",
                    f"{vs.won}/{vs.lost}",
                    f"{vs.p_adj:.4f}",
                    "yes" if vs.beats(sig.settings.alpha) else "no",
                ]
            else:
                cells += ["", "", "", ""]
        body.append(cells)
    out += markdown_table(header, body) + [""]
    if sig.mde is not None:
        out += [f"_{mde_line(sig)}_", ""]
    out += [f"**warning: {w}**" for w in sig.warnings(label)] + [f"_note: {n}_" for n in sig.notes]
    return out + [""]


def mde_line(sig: Significance) -> str:
    assert sig.mde is not None
    what = "from the default" if sig.default is not None else "from the best"
    return (
        f"smallest difference {what} the {len(sig.rows) - 1} comparison(s) detect: {sig.mde.text()} "
        f"(power {sig.mde.power:g} at alpha {sig.mde.alpha:.3g}; {sig.mde.method}; docs/power.md)"
    )


def metrics(sig: Significance) -> dict[str, float]:
    out = {
        "sweep/tied_with_best": float(sig.ties.size),
        "sweep/tested_points": float(len(sig.rows)),
        "sweep/default_tied_with_best": float(sig.default_tied),
    }
    if sig.mde is not None and sig.mde.detectable:
        out["sweep/mde"] = sig.mde.mde
    beats = sig.best_beats_default
    if beats is not None:
        out["sweep/best_beats_default"] = float(beats)
    return out


def tags(sig: Significance) -> dict[str, str]:
    return {
        "evalpipe.sweep.tied_runs": ",".join(r.run_id for r in sig.tied_rows)[:5000],
        "evalpipe.sweep.correction": sig.settings.correction,
    }
