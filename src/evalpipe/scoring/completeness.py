"""How much of a ranking the fixture's labels can see: judged@k, condensed figures and bpref.

A strict figure counts every unlabelled item as not relevant. When a ranker returns
correct answers nobody listed, its strict figure is low because of the labels, not the
ranker: the classic pooling bias against whichever ranker is least like the labeller.
Nothing here needs a judge; it reads the labels the run already has.

- ``judged_at_{k}``: the share of the top k (of what was returned, at most k items) that
  carries a label, positive or grade 0 (a judged negative). ir_measures' ``Judged@k``:
  divided by the number of items returned in the top k, not by k. A case that returned
  nothing has nothing unlabelled and scores 1.
- ``condensed_*``: the strict metric computed on the *condensed list* (Sakai 2007): the
  ranking with every unlabelled item removed, so the labelled items move up. With only
  positives labelled (most code fixtures), the condensed figure is what the ranker would
  score if every unlabelled item were wrong *and* out of the way: an optimistic bound
  beside the strict one's pessimistic one.
- ``bpref``: trec_eval's ``bpref`` (Buckley & Voorhees 2004) over the evaluation depth:
  for each relevant item retrieved, 1 - (judged non-relevant items above it, at most R)
  / min(R, N), summed and divided by R, where R is the number of relevant labels and N
  the number of judged non-relevant ones (grade 0). Unlabelled items are ignored, and so
  are negative grades, which trec_eval reads as "not in the pool".

Each is a per-case array, averaged over the judged cases like every ranking metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain

import numpy as np

from evalpipe.scoring import metrics

JUDGED_AT = "judged_at_{k}"
BPREF = "bpref"
CONDENSED = "condensed_"
#: The strict families that get a condensed twin (any-hit recall, MRR, nDCG).
CONDENSED_FAMILIES = (metrics.RECALL, metrics.MRR, metrics.NDCG)


def label_matrix(
    ranked: Sequence[Sequence[str]],
    qrels: Sequence[Mapping[str, int]],
    depth: int,
    strict: metrics.Relevance | None = None,
) -> np.ndarray:
    """float[n, depth]: the grade of the item at each rank, NaN where it is unlabelled (or past the end).

    Built like `metrics.relevance_matrix`: with up to `metrics.SCAN_LIMIT` labels a case's labels
    are found in its ranking by `list.index` (a C scan), otherwise the ranking is looked up in the
    labels; one scatter at the end. A repeated item counts at its first rank only, as in every metric.
    Given the run's `strict` matrix (same depth), its positive gains are the positive labels already
    placed, and only the labels of grade <= 0 (few, if any) are looked for.
    """
    out = np.full((len(ranked), depth), np.nan)
    reuse = strict is not None and strict.depth == depth
    if reuse:
        positive = strict.grades > 0
        out[positive] = strict.grades[positive]
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for i, (ids, judged) in enumerate(zip(ranked, qrels, strict=True)):
        if not judged or not ids:
            continue
        top = ids if len(ids) <= depth else ids[:depth]
        if len(judged) <= metrics.SCAN_LIMIT:
            for doc, grade in judged.items():
                if reuse and grade > 0:
                    continue
                try:
                    cols.append(top.index(doc))
                except ValueError:  # not retrieved
                    continue
                rows.append(i)
                vals.append(grade)
        else:
            seen: set[str] = set()
            for pos, grade in enumerate(map(judged.get, top)):
                if grade is not None and top[pos] not in seen:
                    seen.add(top[pos])
                    if reuse and grade > 0:
                        continue
                    rows.append(i)
                    cols.append(pos)
                    vals.append(grade)
    if rows:
        out[rows, cols] = vals
    return out


def _returned(ranked: Sequence[Sequence[str]], depth: int) -> np.ndarray:
    return np.minimum(np.fromiter(map(len, ranked), dtype=np.int64, count=len(ranked)), depth)


def judged_at(grades: np.ndarray, returned: np.ndarray, ks: Sequence[int]) -> dict[str, np.ndarray]:
    """``judged_at_{k}`` per case for every k (ir_measures ``Judged@k``; 1 for an empty ranking)."""
    labelled = np.cumsum(~np.isnan(grades), axis=1)
    out = {}
    for k in sorted({int(x) for x in ks}):
        shown = np.minimum(returned, k)
        num = labelled[:, k - 1].astype(np.float64)
        out[JUDGED_AT.format(k=k)] = np.where(shown > 0, num / np.maximum(shown, 1), 1.0)
    return out


def _label_counts(qrels: Sequence[Mapping[str, int]]) -> tuple[np.ndarray, np.ndarray]:
    """int[n] relevant labels (grade >= 1) and int[n] judged non-relevant ones (0 <= grade < 1)."""
    n = len(qrels)
    sizes = np.fromiter(map(len, qrels), dtype=np.int64, count=n)
    flat = np.fromiter(
        chain.from_iterable(q.values() for q in qrels), dtype=np.float64, count=int(sizes.sum())
    )
    owner = np.repeat(np.arange(n), sizes)
    rel = flat >= metrics.RELEVANCE_LEVEL
    nonrel = (flat >= 0) & ~rel
    return np.bincount(owner[rel], minlength=n), np.bincount(owner[nonrel], minlength=n)


def bpref_of(grades: np.ndarray, n_rel: np.ndarray, n_nonrel: np.ndarray) -> np.ndarray:
    """float[n]: trec_eval ``bpref`` from the label matrix (0 without a relevant label)."""
    with np.errstate(invalid="ignore"):
        rel = grades >= metrics.RELEVANCE_LEVEL
        nonrel = (grades >= 0) & ~rel
    above = np.cumsum(nonrel, axis=1) - nonrel  # judged non-relevant items above each rank
    r = n_rel[:, None].astype(np.float64)
    den = np.minimum(r, n_nonrel[:, None]).astype(np.float64)
    penalty = np.divide(np.minimum(above, r), den, out=np.zeros(grades.shape), where=(above > 0) & (den > 0))
    total = np.where(rel, 1.0 - penalty, 0.0).sum(axis=1)
    return np.divide(total, r[:, 0], out=np.zeros(len(total)), where=r[:, 0] > 0)


def bpref(ranked: Sequence[Sequence[str]], qrels: Sequence[Mapping[str, int]], depth: int) -> np.ndarray:
    """float[n]: trec_eval ``bpref`` of each ranking cut at `depth` (0 without a relevant label)."""
    return bpref_of(label_matrix(ranked, qrels, depth), *_label_counts(qrels))


def condensed(
    ranked: Sequence[Sequence[str]], qrels: Sequence[Mapping[str, int]], depth: int
) -> list[list[str]]:
    """Each ranking (cut at `depth`) with its unlabelled items removed, order kept."""
    return [[d for d in ids[:depth] if d in judged] for ids, judged in zip(ranked, qrels, strict=True)]


def condensed_relevance(grades: np.ndarray, strict: metrics.Relevance) -> metrics.Relevance:
    """The `Relevance` of the condensed lists: each row's labelled items moved up in order (a stable
    sort on "unlabelled"), with the strict matrix's ideal gains and relevant counts (they do not
    depend on the ranking)."""
    labelled = ~np.isnan(grades)
    order = np.argsort(~labelled, axis=1, kind="stable")
    packed = np.take_along_axis(grades, order, axis=1)
    gains = np.where(np.isnan(packed), 0.0, np.maximum(packed, 0.0))
    return metrics.Relevance(grades=gains, n_rel=strict.n_rel, ideal=strict.ideal, n_ret=labelled.sum(axis=1))


def completeness_per_case(
    ranked: Sequence[Sequence[str]],
    qrels: Sequence[Mapping[str, int]],
    ks: Sequence[int],
    families: Sequence[str],
    strict: metrics.Relevance | None = None,
) -> dict[str, np.ndarray]:
    """Every label-completeness column: judged@k, bpref, and the condensed twin of each strict family
    in `families` that has one (recall@k, mrr, ndcg@k), all over the top max(ks) as the strict ones.
    `strict`: the run's strict `Relevance` at that depth when the caller has it (built otherwise)."""
    ks = sorted({int(k) for k in ks})
    depth = ks[-1]
    if strict is not None and strict.depth != depth:
        strict = None
    grades = label_matrix(ranked, qrels, depth, strict)
    out = judged_at(grades, _returned(ranked, depth), ks)
    out[BPREF] = bpref_of(grades, *_label_counts(qrels))
    wanted = [f for f in CONDENSED_FAMILIES if f in families]
    if wanted:
        if strict is None:
            strict = metrics.relevance_matrix(ranked, qrels, depth)
        for name, values in metrics.evaluate_matrix(condensed_relevance(grades, strict), ks, wanted).items():
            if not name.startswith("mrr_at_"):
                out[CONDENSED + name] = values
    return out


def is_completeness(name: str) -> bool:
    """A figure of this module (judged@k, bpref, condensed_*), e.g. to group it apart in MLflow."""
    return (
        name == BPREF or name.startswith(CONDENSED) or (name.startswith("judged_at_") and name[10:].isdigit())
    )
