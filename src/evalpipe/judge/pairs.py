"""Which (case, candidate) pairs the judge is asked about.

Rescue (default): for each miss, the unlabelled candidates that could change its
judged figures, i.e. every one in the top K (K = the largest cutoff) when no
expected ID was found, and only those ranked above the first expected ID when it
was found lower than rank 1 (a candidate below it cannot change any any-hit
figure). Pooling (`judge.pool=true`): every unlabelled candidate in the top K of
every answerable case, to grow the fixture's labels. Calibration: a seeded sample
of labelled pairs, expected IDs as positives and each case's highest-ranked
non-expected candidate (a hard negative) as negatives.

Unanswerable cases and cases whose ranker raised are never judged: the first have
no ranking figures to rescue, the second have no candidates.
"""

from __future__ import annotations

import random
from collections.abc import Container, Sequence
from dataclasses import dataclass

from evalpipe.scoring.results import CaseResult


@dataclass(frozen=True)
class Pair:
    case_id: str
    query: str
    unit_id: str
    rank: int  # 1-based rank in the case's ranking; 0 for an expected ID the ranker did not return
    gold: bool | None = None  # calibration only: the fixture's label


def _answerable(r: CaseResult) -> bool:
    return bool(r.qrels) and r.error is None


def rescue_pairs(
    results: Sequence[CaseResult], first_rank: Sequence[int], depth: int, pool: bool
) -> list[Pair]:
    out: list[Pair] = []
    for r, first in zip(results, first_rank, strict=True):
        if not _answerable(r) or (first == 1 and not pool):
            continue
        window = r.ranked_ids[:depth] if (pool or first == 0) else r.ranked_ids[: int(first) - 1]
        out += [Pair(r.case_id, r.query, uid, i + 1) for i, uid in enumerate(window) if uid not in r.qrels]
    return out


def calibration_pairs(
    results: Sequence[CaseResult], corpus: Container[str], size: int, seed: int
) -> list[Pair]:
    """Up to `size` labelled pairs, half positive and half negative (as available), seeded."""
    positives: list[Pair] = []
    negatives: list[Pair] = []
    for r in results:
        if not _answerable(r):
            continue
        ranked = r.ranked_ids
        for uid, grade in r.qrels.items():
            if grade > 0 and uid in corpus:
                rank = ranked.index(uid) + 1 if uid in ranked else 0
                positives.append(Pair(r.case_id, r.query, uid, rank, gold=True))
        strong = next((i for i, uid in enumerate(ranked) if r.qrels.get(uid, 0) <= 0), None)
        if strong is not None:
            negatives.append(Pair(r.case_id, r.query, ranked[strong], strong + 1, gold=False))
    rng = random.Random(seed)
    n_pos = min(len(positives), size - min(len(negatives), size // 2))
    n_neg = min(len(negatives), size - n_pos)
    pos_idx = sorted(rng.sample(range(len(positives)), n_pos))
    neg_idx = sorted(rng.sample(range(len(negatives)), n_neg))
    return [positives[i] for i in pos_idx] + [negatives[i] for i in neg_idx]
