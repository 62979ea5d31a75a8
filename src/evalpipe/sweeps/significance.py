"""Which points of a sweep are tied with the best, and does anything beat the default?

A sweep's best point is the maximum of many noisy figures. Over the points' per-case values
of the objective (the cases every point scored), every question is answered from **one family**:
all pairwise differences of the points, with simultaneous intervals (`evalpipe.stats.ties`:
studentised max-T, paired bootstrap and within-case permutation, family-wise error rate alpha):

* a point is **tied with the best** unless its simultaneous interval for
  mean_i - max_{j != i} mean_j lies entirely below 0 (multiple comparisons with the best);
* its **rank** is shown with its simultaneous interval (tied with the best <=> the interval
  contains 1);
* when the default configuration (the swept keys at the values the sweep's base config has) is
  one of the points: each point's difference from it is that pair's simultaneous interval, and
  "beats the default" is that interval lying above 0. "Tied", "beats" and the logged
  `sweep/best_beats_default` are read off the same intervals, so they cannot disagree (issue #40:
  two families, Holm "vs best" and Holm "vs default", once said both "tied" and "beats").

The minimum detectable difference (`evalpipe.stats.power`) says how small a gain the family
could have seen at all, at the level one pair is held to inside the family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evalpipe.stats.corrections import DEFAULT_METHOD, check_method
from evalpipe.stats.power import POWER, Detectable, one_run, resampled
from evalpipe.stats.ties import METHOD, Pairs, Ties, all_pairs, ties_of

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
        if self.correction != DEFAULT_METHOD:
            raise ValueError(
                f"sweep.correction: {self.correction} does not apply to a sweep: its points are compared in "
                f"one family of all pairs ({METHOD}, family-wise error rate); leave it at "
                f"{DEFAULT_METHOD} (the family-wise default) or out"
            )
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
    """One point against the default configuration: that pair's simultaneous interval (the
    family's), cases won / lost and its family-adjusted p."""

    diff: float
    lo: float
    hi: float
    won: int
    lost: int
    p_adj: float
    #: the pair's simultaneous interval lies above 0 (the point is surely better than the default)
    better: bool

    def beats(self, alpha: float = 0.05) -> bool:
        return self.better


@dataclass(frozen=True)
class Significance:
    """The tied group and the comparisons with the default, over `rows` (SweepRows with cases)."""

    objective: str
    settings: Settings
    rows: Sequence[Any]
    means: Sequence[float]
    cases: int
    ties: Ties
    pairs: Pairs | None = None
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
        return vs is not None and vs.better

    def ranks(self) -> dict[str, str]:
        """{run ID: `rank [lo-hi]`}, the simultaneous rank interval of each tested point."""
        return {row.run_id: self.ties.rank_text(i) for i, row in enumerate(self.rows)}

    def is_tied(self, run_id: str) -> bool:
        return any(self.rows[i].run_id == run_id for i in self.ties.tied)

    def method_line(self) -> str:
        s = self.settings
        pairs = len(self.rows) * (len(self.rows) - 1) // 2
        return (
            f"one family: all {pairs} pairs of points on {self.cases} shared cases, {METHOD} "
            f"({s.resamples} resamples and permutations), family-wise alpha {s.alpha:g}; intervals are "
            f"simultaneous at {100 * (1 - s.alpha):g}% over the family"
        )

    def headline(self, label) -> str:
        """`3 of 12 points are tied with the best (...)`: the group in one line."""
        names = ", ".join(label(r) for r in self.tied_rows)
        return (
            f"{self.ties.size} of {len(self.rows)} points are tied with the best on {self.objective} "
            f"(no point is surely better, {100 * (1 - self.settings.alpha):g}% simultaneous): {names}"
        )

    def warnings(self, label) -> list[str]:
        out = []
        if self.default_tied and self.default != self.ties.best:
            out.append(
                f"the default configuration ({label(self.rows[self.default])}) is tied with the best: the "
                f"sweep found nothing the family's intervals can tell from the default on {self.objective}"
            )
        if self.default is not None and self.best_beats_default is False and self.default != self.ties.best:
            vs = self.vs_default[self.ties.best]
            if vs is not None:
                out.append(
                    f"the best point is NOT significantly better than the default ({self.objective} "
                    f"{vs.diff:+.4f}, {100 * (1 - self.settings.alpha):g}% simultaneous interval "
                    f"[{vs.lo:+.4f}, {vs.hi:+.4f}], family-adjusted p {vs.p_adj:.4f}); tied with the best: "
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
    values = np.array([[per_case[i][c] for c in shared] for i in keep], dtype=np.float64)  # type: ignore[index]
    means = [float(v) for v in values.mean(axis=1)]
    s = settings
    (pairs,) = all_pairs([values], s.alpha, s.resamples, s.seed)
    ties = ties_of(pairs)
    best = ties.best
    d = keep.index(default) if default is not None and default in keep else None
    vs: list[VsDefault | None] = []
    if d is not None:
        for i, v in enumerate(values):
            if i == d:
                vs.append(None)
                continue
            won, lost = int(np.sum(v > values[d])), int(np.sum(v < values[d]))
            vs.append(
                VsDefault(
                    float(pairs.diff[i, d]), pairs.lo(i, d), pairs.hi(i, d), won, lost,
                    float(pairs.p_adj[i, d]), pairs.better(i, d),
                )
            )  # fmt: skip
    level = pairs.pair_alpha
    if d is not None and d != best:  # measured: a gain planted on the default / best pair's outcomes
        mde = resampled(values[d], values[best], level, s.power, gain=True, seed=s.seed)
    else:
        mde = one_run(values[best], level, s.power)
    return Significance(objective, s, points, means, len(shared), ties, pairs, d, vs, mde, tuple(notes))


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

    level = f"{100 * (1 - sig.settings.alpha):g}% simultaneous"
    out = ["## Tied with the best", "", f"_{sig.method_line()}_", "", f"**{sig.headline(label)}**", ""]
    header = [
        "job",
        *keys,
        sig.objective,
        f"rank [{level}]",
        "Δ vs best",
        f"mean − max of the others [{level}]",
        "tied",
    ]
    if sig.default is not None:
        header += [f"Δ vs default [{level}]", "won/lost", "p adj (family)", "beats default"]
    body = []
    best = sig.means[sig.ties.best]
    t = sig.ties
    for i, row in enumerate(sig.rows):
        cells = [
            "—" if row.job is None else str(row.job),
            *(str(row.values.get(k, "—")) for k in keys),
            f"{sig.means[i]:.4f}",
            t.rank_text(i),
            "(best)" if i == t.best else f"{sig.means[i] - best:+.4f}",
            f"[{t.mcb_lo[i]:+.4f}, {t.mcb_hi[i]:+.4f}]",
            "yes" if t.is_tied(i) else "",
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
                    "yes" if vs.better else "no",
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
        "evalpipe.sweep.family": f"all {len(sig.rows) * (len(sig.rows) - 1) // 2} pairs, {METHOD}",
    }
