"""Ranking metrics over all cases at once, as numpy arrays.

Every metric is computed from one `Relevance` matrix (case x rank) so a run with
thousands of cases is scored with a handful of array operations, and every
per-case value can be logged and re-aggregated later (per tier, per slice, in
`evalpipe compare`) without re-running anything.

Definitions follow trec_eval (relevance_level 1) wherever a trec_eval measure
exists, and the any-hit recall of the original recall harness where it does not.
A document is *relevant* when its judged grade is >= 1; its *gain* is its grade,
with negative grades counted as 0. A query with no relevant document (n_rel == 0)
scores 0 on every metric, as trec_eval does, so it drags a mean down rather than
silently vanishing from it.

Metric names (the same strings in reports, JSON and MLflow):

==========================  ===============================================  =====================
name                        per case                                         trec_eval equivalent
==========================  ===============================================  =====================
``recall_at_{k}``           1 if any relevant doc is in the top k, else 0     ``success_{k}``
``hits_at_{k}``             (aggregate only) number of cases with a hit       --
``mrr``                     1 / rank of the first relevant doc within the     ``recip_rank`` (run
                            evaluation depth (the largest k), else 0          cut at depth)
``mrr_at_{k}``              as ``mrr`` but only ranks <= k count              --
``ndcg_at_{k}``             DCG@k / ideal DCG@k, gain = grade,                ``ndcg_cut_{k}``
                            discount 1/log2(rank + 1), ideal over the grades
                            of ALL judged docs of the query
``map_at_{k}``              sum of precision@r over relevant ranks r <= k,    ``map_cut_{k}``
                            divided by n_rel (not by min(k, n_rel))
``precision_at_{k}``        relevant docs in top k / k (k even if fewer were  ``P_{k}``
                            retrieved)
``frac_recall_at_{k}``      relevant docs in top k / n_rel                    ``recall_{k}``
==========================  ===============================================  =====================

`recall_at_{k}` deliberately keeps the harness's any-hit meaning (a case is
answered if any acceptable target is found); the classic fraction-of-relevant
recall is `frac_recall_at_{k}`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

# --- metric names ---------------------------------------------------------------

RECALL = "recall"
MRR = "mrr"
NDCG = "ndcg"
MAP = "map"
PRECISION = "precision"
FRAC_RECALL = "frac_recall"
#: Metric families accepted by `evaluate(metrics=...)`, in report order.
FAMILIES: tuple[str, ...] = (RECALL, MRR, NDCG, MAP, PRECISION, FRAC_RECALL)

MRR_NAME = "mrr"
RECALL_AT = "recall_at_{k}"
HITS_AT = "hits_at_{k}"
MRR_AT = "mrr_at_{k}"
NDCG_AT = "ndcg_at_{k}"
MAP_AT = "map_at_{k}"
PRECISION_AT = "precision_at_{k}"
FRAC_RECALL_AT = "frac_recall_at_{k}"

_HITS_PREFIX = "hits_at_"
_RECALL_PREFIX = "recall_at_"

#: A judged grade at or above this makes a document relevant (trec_eval's default).
RELEVANCE_LEVEL = 1
#: Up to this many judgements per query, each is found in the ranked list by a scan
#: (see `relevance_matrix`); more, and the ranked documents are looked up in the qrels.
SCAN_LIMIT = 16


@dataclass(frozen=True, eq=False)
class Relevance:
    """What the metrics need to know about n ranked lists, as arrays.

    grades: float[n, depth], gain of the doc at each rank (negative grades -> 0,
        unjudged -> 0, past the end of a short list -> 0, repeated doc -> 0).
    n_rel:  int[n], judged docs with grade >= 1 (whether retrieved or not).
    ideal:  float[n, depth], the query's positive grades sorted descending, padded.
    n_ret:  int[n], length of each ranked list, capped at depth.
    """

    grades: np.ndarray
    n_rel: np.ndarray
    ideal: np.ndarray
    n_ret: np.ndarray

    @property
    def depth(self) -> int:
        return int(self.grades.shape[1])

    @functools.cached_property
    def relevant(self) -> np.ndarray:
        """bool[n, depth]: the doc at this rank is relevant (grade >= 1); computed once."""
        return self.grades >= RELEVANCE_LEVEL

    @functools.cached_property
    def first_rank(self) -> np.ndarray:
        """int[n]: `first_hit_rank`, computed once (MRR and the misses both need it)."""
        return _first_rank(self)


def relevance_matrix(
    ranked: Sequence[Sequence[str]], qrels: Sequence[Mapping[str, int]], depth: int
) -> Relevance:
    """Build the `Relevance` arrays for `ranked[i]` judged by `qrels[i]`, cut at `depth`.

    A document that appears twice in one list keeps its rank slot but earns gain
    only once (a repeated result tells the user nothing new), so no metric can
    exceed its trec_eval bound because of a buggy ranker.

    Built to scale linearly with small constants. Judged lists are short next to
    ranked ones (a few expected IDs against 100 results), so for a query with up
    to `SCAN_LIMIT` positive judgements each one is *found* in the ranked list by
    `list.index` (a C scan comparing string pointers first, whose first match is
    exactly the rank that earns the gain: repeats are skipped for free), instead
    of looking every retrieved document up in the qrels. Queries with more
    judgements (TREC-style pools) look their retrieved documents up in one
    `map(qrels.get, ...)` pass and drop repeats. Only positive grades are written,
    into one scatter; ideal gains are sorted for all cases at once.
    """
    if len(ranked) != len(qrels):
        raise ValueError(
            f"relevance_matrix: {len(ranked)} ranked lists but {len(qrels)} qrels; pass one qrels per case"
        )
    if depth < 1:
        raise ValueError(f"relevance_matrix: depth must be >= 1, got {depth}")
    n = len(ranked)
    grades = np.zeros((n, depth), dtype=np.float64)
    ideal = np.zeros((n, depth), dtype=np.float64)
    n_ret = np.minimum(np.fromiter(map(len, ranked), dtype=np.int64, count=n), depth)
    rows: list[int] = []
    cols: list[int] = []
    gains: list[float] = []
    for i, (ids, judged) in enumerate(zip(ranked, qrels, strict=True)):
        if not judged or not ids:
            continue
        top = ids if len(ids) <= depth else ids[:depth]
        if len(judged) <= SCAN_LIMIT:
            for doc, grade in judged.items():
                if grade > 0:
                    try:
                        cols.append(top.index(doc))
                    except ValueError:  # not retrieved
                        continue
                    rows.append(i)
                    gains.append(grade)
        else:
            seen: set[str] = set()
            for pos, grade in enumerate(map(judged.get, top, repeat(0))):
                if grade > 0 and top[pos] not in seen:
                    seen.add(top[pos])
                    rows.append(i)
                    cols.append(pos)
                    gains.append(grade)
    if rows:
        grades[rows, cols] = gains

    # Ideal: every case's positive judged grades, sorted descending, cut at depth.
    sizes = np.fromiter(map(len, qrels), dtype=np.int64, count=n)
    judged = np.fromiter(
        chain.from_iterable(q.values() for q in qrels), dtype=np.float64, count=int(sizes.sum())
    )
    owner = np.repeat(np.arange(n), sizes)
    keep = judged > 0
    judged, owner = judged[keep], owner[keep]
    n_rel = np.bincount(owner[judged >= RELEVANCE_LEVEL], minlength=n).astype(np.int64)
    if judged.size:
        order = np.lexsort((-judged, owner))  # by case, then grade descending
        judged, owner = judged[order], owner[order]
        starts = np.cumsum(np.bincount(owner, minlength=n)) - np.bincount(owner, minlength=n)
        place = np.arange(judged.size) - starts[owner]
        cut = place < depth
        ideal[owner[cut], place[cut]] = judged[cut]
    return Relevance(grades=grades, n_rel=n_rel, ideal=ideal, n_ret=n_ret)


def _check_k(rel: Relevance, k: int) -> None:
    if not 1 <= k <= rel.depth:
        raise ValueError(f"cutoff k={k} is outside 1..depth={rel.depth}; build the matrix with depth >= k")


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den with 0 wherever den == 0 (the n_rel == 0 convention)."""
    den = np.asarray(den, dtype=np.float64)
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


# --- per-case metrics -------------------------------------------------------------


def first_hit_rank(rel: Relevance) -> np.ndarray:
    """int[n]: 1-based rank of the first relevant doc within depth, 0 when there is none."""
    return rel.first_rank


def _first_rank(rel: Relevance) -> np.ndarray:
    is_rel = rel.relevant
    found = is_rel.any(axis=1)
    first = np.where(found, is_rel.argmax(axis=1) + 1, 0).astype(np.int64)
    first.setflags(write=False)  # shared by MRR and the misses: read-only
    return first


def hit_at(rel: Relevance, k: int) -> np.ndarray:
    """float[n] of 0/1: any relevant doc in the top k (the harness's any-hit recall@k)."""
    _check_k(rel, k)
    return rel.relevant[:, :k].any(axis=1).astype(np.float64)


def reciprocal_rank(rel: Relevance) -> np.ndarray:
    """float[n]: 1 / first-hit rank over the whole depth, 0 when not found."""
    first = first_hit_rank(rel)
    return _safe_div(np.ones_like(first, dtype=np.float64), first)


def rr_at(rel: Relevance, k: int) -> np.ndarray:
    """float[n]: reciprocal rank counting only a first hit at rank <= k."""
    _check_k(rel, k)
    first = first_hit_rank(rel)
    return np.where((first >= 1) & (first <= k), _safe_div(np.ones(first.shape), first), 0.0)


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def ndcg_at(rel: Relevance, k: int) -> np.ndarray:
    """float[n]: trec_eval ndcg_cut@k (linear gain, ideal over all judged grades)."""
    _check_k(rel, k)
    disc = _discounts(k)
    dcg = rel.grades[:, :k] @ disc
    idcg = rel.ideal[:, :k] @ disc
    return _safe_div(dcg, idcg)


def ap_at(rel: Relevance, k: int) -> np.ndarray:
    """float[n]: trec_eval map_cut@k (precision summed at relevant ranks <= k, over n_rel)."""
    _check_k(rel, k)
    is_rel = rel.relevant[:, :k].astype(np.float64)
    prec = np.cumsum(is_rel, axis=1) / np.arange(1, k + 1, dtype=np.float64)
    return _safe_div((prec * is_rel).sum(axis=1), rel.n_rel)


def precision_at(rel: Relevance, k: int) -> np.ndarray:
    """float[n]: relevant docs in the top k divided by k (trec_eval P@k)."""
    _check_k(rel, k)
    return rel.relevant[:, :k].sum(axis=1) / float(k)


def frac_recall_at(rel: Relevance, k: int) -> np.ndarray:
    """float[n]: relevant docs in the top k divided by n_rel (trec_eval recall@k)."""
    _check_k(rel, k)
    return _safe_div(rel.relevant[:, :k].sum(axis=1).astype(np.float64), rel.n_rel)


# --- whole-run entry points -------------------------------------------------------


def _check_ks(ks: Sequence[int]) -> list[int]:
    out = sorted({int(k) for k in ks})
    if not out or out[0] < 1:
        raise ValueError(f"ks must be a non-empty list of positive cutoffs, got {list(ks)!r}")
    return out


def evaluate(
    ranked: Sequence[Sequence[str]],
    qrels: Sequence[Mapping[str, int]],
    ks: Sequence[int],
    metrics: Sequence[str] | None = None,
    *,
    depth: int | None = None,
) -> dict[str, np.ndarray]:
    """Per-case values of every requested metric family at every k.

    `metrics` picks families from `FAMILIES` (default: all). The "mrr" family gives
    `mrr` (over `depth`) plus `mrr_at_{k}`. `depth` defaults to max(ks), the
    harness's rule that MRR looks no deeper than the largest cutoff; pass a larger
    depth to score reciprocal rank over a longer list. Per-case `hits_at_{k}` is
    not emitted: it equals `recall_at_{k}`, and `aggregate` adds the count.
    """
    kk = _check_ks(ks)
    depth = kk[-1] if depth is None else int(depth)
    if depth < kk[-1]:
        raise ValueError(f"depth={depth} is smaller than the largest cutoff k={kk[-1]}")
    _check_families(metrics)
    return evaluate_matrix(relevance_matrix(ranked, qrels, depth), kk, metrics)


def _check_families(metrics: Sequence[str] | None) -> list[str]:
    families = list(FAMILIES) if metrics is None else list(dict.fromkeys(metrics))
    unknown = [m for m in families if m not in FAMILIES]
    if unknown:
        raise ValueError(f"unknown metric family {unknown[0]!r}; choose from {', '.join(FAMILIES)}")
    return families


def evaluate_matrix(
    rel: Relevance, ks: Sequence[int], metrics: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """`evaluate` on an already built `Relevance` (MRR over its depth), so a caller that also
    needs the matrix (first-hit ranks for misses) builds it once.

    Every family is a sum over the top k ranks, so each is read off one matrix
    product with a 0/1 "rank r is within cutoff k" matrix (depth x cutoffs): one
    pass over the case x rank matrix per family, whatever the number of cutoffs.
    Only AP needs a running sum over the ranks (precision at each relevant rank).
    Sums of the same terms as trec_eval's, equal to it to well within 1e-9.
    """
    kk = _check_ks(ks)
    families = _check_families(metrics)
    for k in kk:
        _check_k(rel, k)
    cutoffs = np.asarray(kk, dtype=np.float64)
    within_k = (np.arange(rel.depth)[:, None] < np.asarray(kk)[None, :]).astype(np.float64)
    out: dict[str, np.ndarray] = {}
    found = None  # relevant documents within the top k, per cutoff: n x len(kk)
    is_rel = None
    if any(f in families for f in (RECALL, PRECISION, FRAC_RECALL, MAP)):
        is_rel = rel.relevant.astype(np.float64)
        found = is_rel @ within_k
    for family in families:
        if family == RECALL:
            block, template = (found > 0).astype(np.float64), RECALL_AT
        elif family == MRR:
            first = first_hit_rank(rel)
            inverse = _safe_div(np.ones(first.shape, dtype=np.float64), first)
            out[MRR_NAME] = inverse
            block = np.where(
                (first[:, None] >= 1) & (first[:, None] <= cutoffs[None, :]), inverse[:, None], 0.0
            )
            template = MRR_AT
        elif family == NDCG:
            discounted = _discounts(rel.depth)[:, None] * within_k
            block, template = _safe_div(rel.grades @ discounted, rel.ideal @ discounted), NDCG_AT
        elif family == MAP:
            precision = np.cumsum(is_rel, axis=1) / np.arange(1, rel.depth + 1, dtype=np.float64)
            precision *= is_rel
            block, template = _safe_div(precision @ within_k, rel.n_rel[:, None]), MAP_AT
        elif family == PRECISION:
            block, template = found / cutoffs[None, :], PRECISION_AT
        else:  # FRAC_RECALL
            block, template = _safe_div(found, rel.n_rel[:, None]), FRAC_RECALL_AT
        for j, k in enumerate(kk):
            out[template.format(k=k)] = np.ascontiguousarray(block[:, j])
    return out


def aggregate(per_case: Mapping[str, np.ndarray], mask: np.ndarray | None = None) -> dict[str, float]:
    """Means over the cases selected by `mask` (default all); hit counts as sums.

    Every `recall_at_{k}` also yields `hits_at_{k}` (number of cases with a hit),
    and any `hits_at_{k}` column passed in is summed rather than averaged. An
    empty selection gives 0.0 for every metric, like the harness's zero-filled
    tiers, so report tables keep their shape.
    """
    out: dict[str, float] = {}
    for name, values in per_case.items():
        v = np.asarray(values, dtype=np.float64)
        if mask is not None:
            m = np.asarray(mask, dtype=bool)
            if m.shape != v.shape:
                raise ValueError(f"aggregate: mask has shape {m.shape} but {name!r} has {v.shape}")
            v = v[m]
        if name.startswith(_HITS_PREFIX):
            out[name] = float(v.sum())
            continue
        out[name] = float(v.mean()) if v.size else 0.0
        if name.startswith(_RECALL_PREFIX):
            hits = _HITS_PREFIX + name[len(_RECALL_PREFIX) :]
            if hits not in per_case:
                out[hits] = float(v.sum())
    return out


def latency_percentiles(latencies_us: Sequence[float] | np.ndarray) -> tuple[int, int, int]:
    """(p50, p95, max) in integer microseconds, by the harness's index rule.

    The rule is a sorted copy indexed at int((n - 1) * pct): no interpolation, so
    every reported value is a latency that actually happened. (0, 0, 0) when empty.
    """
    lat = np.sort(np.asarray(latencies_us, dtype=np.float64).ravel())
    n = lat.size
    if n == 0:
        return 0, 0, 0

    def at(pct: float) -> int:
        return int(lat[int(float(n - 1) * pct)])

    return at(0.50), at(0.95), int(lat[-1])
