"""Judged figures: the strict metrics recomputed with the judge's positives added to the labels.

A candidate the fixture does not label and the judge calls relevant counts as a
hit (grade 1); everything the fixture labels keeps its label, so judging can only
add hits, never remove one. Strict figures are untouched and reported beside these.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from evalpipe.scoring import metrics
from evalpipe.scoring.results import CaseResult

PREFIX = "judged_"
# Below full coverage a judged figure is a lower bound and is logged under this prefix instead, so
# nothing that reads `judged_*` (a sweep objective, a dashboard) can mistake it for the figure.
PARTIAL = "partial_"


@dataclass(frozen=True)
class JudgedScores:
    overall: Mapping[str, float]  # judged_recall_at_K, judged_hits_at_K, judged_mrr
    per_tier: Mapping[str, Mapping[str, float]]
    per_case: Mapping[str, np.ndarray]
    first_rank: np.ndarray  # 1-based rank of the first strict-or-judged hit, 0 if none
    labelled: np.ndarray  # bool per case: has labels, so is in the means (as strict `judged_cases`)

    def flat(self, states: Mapping[str, str] | None = None) -> dict[str, float]:
        """Every figure under its logged name. `states` ("full", "partial" or "none" for "all" and
        each tier, from the coverage): partial figures get the `partial_` prefix, "none" are left out."""
        states = states or {}
        out = {}
        for scope, figures in [("all", self.overall), *self.per_tier.items()]:
            state = states.get(scope, "full")
            if state == "none":
                continue
            lead = "" if scope == "all" else f"tier/{scope}/"
            mark = PARTIAL if state == "partial" else ""
            out.update({f"{lead}{mark}{name}": value for name, value in figures.items()})
        return out


def judged_qrels(
    results: Sequence[CaseResult], positives: Collection[tuple[str, str]]
) -> list[dict[str, int]]:
    """Each case's labels plus its judged positives (grade 1) that the fixture does not label."""
    extra: dict[str, list[str]] = {}
    for case_id, unit_id in positives:
        extra.setdefault(case_id, []).append(unit_id)
    out = []
    for r in results:
        q = dict(r.qrels)
        for uid in extra.get(r.case_id, ()):
            q.setdefault(uid, 1)
        out.append(q)
    return out


def judged_scores(
    results: Sequence[CaseResult],
    ks: Sequence[int],
    positives: Collection[tuple[str, str]],
    tiers: Sequence[str] | None = None,
) -> JudgedScores:
    """Any-hit recall@K and MRR counting judged positives as hits, over the strictly judged cases
    (those with labels), overall and per tier, as the strict figures are averaged."""
    ks = sorted(set(int(k) for k in ks))
    ranked = [r.ranked_ids for r in results]
    qrels = judged_qrels(results, positives)
    computed = metrics.evaluate(ranked, qrels, ks, [metrics.RECALL, metrics.MRR])
    keep = [f"recall_at_{k}" for k in ks] + ["mrr"]
    raw = {name: computed[name] for name in keep}
    first_rank = metrics.first_hit_rank(metrics.relevance_matrix(ranked, qrels, max(ks)))
    answerable = np.array([len(r.qrels) > 0 for r in results], dtype=bool)
    overall = _prefixed(metrics.aggregate(raw, answerable))
    tier_of = np.array([r.tier for r in results], dtype=object)
    names = list(tiers) if tiers is not None else list(dict.fromkeys(r.tier for r in results))
    per_tier = {}
    for tier in names:
        mask = (tier_of == tier) & answerable
        if mask.any():
            per_tier[tier] = _prefixed(metrics.aggregate(raw, mask))
    return JudgedScores(overall, per_tier, _prefixed(raw), first_rank, answerable)


def figure_names(results: Sequence[CaseResult], ks: Sequence[int], tiers: Sequence[str] | None) -> set[str]:
    """Every judged figure name a run may log, full and partial (what an objective may name)."""
    scores = judged_scores(results, ks, (), tiers)
    names = set(scores.flat())
    names |= set(scores.flat({"all": "partial", **{t: "partial" for t in scores.per_tier}}))
    return names


def _prefixed(table: Mapping):
    return {PREFIX + name: value for name, value in table.items()}
