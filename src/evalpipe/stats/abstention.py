"""Answering nothing, chosen honestly: a threshold on a signal of the result list, picked on dev.

A RAG system should return nothing for a question its documents cannot answer. The simplest
honest rule is a threshold on a per-case signal of the ranked list (the top hit's score, or
the gap between the first and second scores): below it, abstain. This module computes what
every threshold does, picks one on the dev split for a stated objective, and reports it.

Definitions, stated once (the same as `scoring.rag`'s citation validity):
* An answerable case **keeps its hit** at threshold t when it is not abstained on
  (signal >= t) and its document hit was 1; abstaining on it costs that hit.
* An unanswerable case is **correctly empty** when it is abstained on (signal < t) or the
  ranker already returned nothing (signal NaN).
* **Citation validity** = (answerable cases keeping their hit + unanswerable cases correctly
  empty) / all cases: exactly `rag_citation_validity` of the run the threshold would give.
* The **AUC** of the signal is P(signal of an answerable case > signal of an unanswerable one),
  ties counting one half (the Mann-Whitney statistic over both sizes). 0.5 is chance: a signal
  whose AUC is near or below 0.5 cannot separate the two, and no threshold on it helps.

Objectives: `citation` maximises citation validity; `bounded` maximises the share of
unanswerable cases correctly empty while losing at most `max_loss` of the answerable cases'
hits (absolute share of answerable cases). Ties between thresholds go to the lowest one (the
least abstention). Candidate thresholds sit halfway between neighbouring dev signal values, so
a threshold never coincides with a dev case's own value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

OBJECTIVES = ("citation", "bounded")
NEVER = float("-inf")


@dataclass(frozen=True)
class Outcome:
    """What abstaining below `threshold` does to one set of cases."""

    threshold: float
    answerable: int
    unanswerable: int
    hits_kept: int  # answerable cases not abstained on whose document hit was 1
    hits_before: int  # answerable cases with a document hit, nothing abstained
    correctly_empty: int  # unanswerable cases abstained on (or empty already)
    abstained: int  # all cases abstained on at this threshold (answerable or not)

    @property
    def hit_rate(self) -> float:
        return self.hits_kept / self.answerable if self.answerable else float("nan")

    @property
    def hit_loss(self) -> float:
        return (self.hits_before - self.hits_kept) / self.answerable if self.answerable else 0.0

    @property
    def empty_rate(self) -> float:
        return self.correctly_empty / self.unanswerable if self.unanswerable else float("nan")

    @property
    def citation_validity(self) -> float:
        n = self.answerable + self.unanswerable
        return (self.hits_kept + self.correctly_empty) / n if n else float("nan")


@dataclass(frozen=True)
class Cases:
    """Per-case inputs: the signal (NaN when the ranker returned nothing or failed), whether the case
    is answerable, and its document hit without abstention."""

    signal: np.ndarray
    answerable: np.ndarray
    hit: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.signal)
        if len(self.answerable) != n or len(self.hit) != n:
            raise ValueError("signal, answerable and hit must have one value per case")


def cases(signal, answerable, hit) -> Cases:
    return Cases(
        np.asarray(signal, dtype=np.float64),
        np.asarray(answerable, dtype=bool),
        np.asarray(hit, dtype=bool),
    )


def outcome(c: Cases, threshold: float) -> Outcome:
    """The counts at one threshold (abstain when signal < threshold; NaN is always empty)."""
    empty = np.isnan(c.signal)
    kept = ~empty & (c.signal >= threshold)
    ans, un = c.answerable, ~c.answerable
    return Outcome(
        threshold=float(threshold),
        answerable=int(ans.sum()),
        unanswerable=int(un.sum()),
        hits_kept=int((ans & kept & c.hit).sum()),
        hits_before=int((ans & c.hit).sum()),
        correctly_empty=int((un & ~kept).sum()),
        abstained=int((~kept & ~empty).sum()),
    )


def auc(c: Cases) -> float:
    """P(answerable signal > unanswerable signal) + half the ties; an empty result (NaN) ranks lowest."""
    s = np.where(np.isnan(c.signal), -np.inf, c.signal)
    pos, neg = s[c.answerable], s[~c.answerable]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def candidates(c: Cases) -> list[float]:
    """Never abstain, then halfway between each pair of neighbouring distinct signal values, then above
    the largest (abstain on everything that returned something)."""
    values = np.unique(c.signal[~np.isnan(c.signal)])
    if not len(values):
        return [NEVER]
    mids = ((values[:-1] + values[1:]) / 2).tolist()
    top = float(values[-1]) + max(1.0, abs(float(values[-1]))) * 1e-6
    return [NEVER, *mids, top]


def choose(c: Cases, objective: str = "citation", max_loss: float = 0.05) -> Outcome:
    """The threshold that best meets `objective` on `c` (the dev cases), lowest threshold on ties."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if not 0.0 <= max_loss <= 1.0:
        raise ValueError(f"max_loss must be between 0 and 1, got {max_loss}")
    best: Outcome | None = None
    best_key: tuple[float, ...] = ()
    for t in candidates(c):
        o = outcome(c, t)
        if objective == "citation":
            key = (o.citation_validity,)
        else:
            if o.hit_loss > max_loss + 1e-12:
                continue
            key = (o.empty_rate, o.hit_rate)
        if best is None or key > best_key:  # strictly better only: the lowest threshold wins ties
            best, best_key = o, key
    assert best is not None  # NEVER always meets the bound (no loss)
    return best


def curve(c: Cases, points: int = 11) -> list[Outcome]:
    """What thresholds across the range of `c`'s signal do (quantiles of the signal; never abstain first)."""
    values = c.signal[~np.isnan(c.signal)]
    if not len(values):
        return [outcome(c, NEVER)]
    qs = np.unique(np.quantile(values, np.linspace(0.0, 1.0, points)))
    return [outcome(c, NEVER), *(outcome(c, float(q)) for q in qs)]


def paired_delta_ci(
    c: Cases, threshold: float, n_resamples: int = 5000, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float, float]:
    """Citation validity with abstention minus without, and its paired percentile-bootstrap CI
    (cases resampled; one Monte Carlo draw, seeded)."""
    empty = np.isnan(c.signal)
    kept = ~empty & (c.signal >= threshold)
    with_rule = np.where(c.answerable, kept & c.hit, ~kept).astype(np.float64)
    without = np.where(c.answerable, c.hit & ~empty, empty).astype(np.float64)
    d = with_rule - without
    n = len(d)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    means = d[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(d.mean()), float(lo), float(hi)
