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

import numpy as np

from evalpipe.scoring import metrics

JUDGED_AT = "judged_at_{k}"
BPREF = "bpref"
CONDENSED = "condensed_"
#: The strict families that get a condensed twin (any-hit recall, MRR, nDCG).
CONDENSED_FAMILIES = (metrics.RECALL, metrics.MRR, metrics.NDCG)


def judged_matrix(
    ranked: Sequence[Sequence[str]], qrels: Sequence[Mapping[str, int]], depth: int
) -> np.ndarray:
    """bool[n, depth]: the item at this rank carries a label (any grade); False past the list's end.

    One C-level `map(dict.__contains__, ...)` per case and one scatter, not a Python loop per rank."""
    out = np.zeros((len(ranked), depth), dtype=bool)
    rows: list[int] = []
    cols: list[int] = []
    for i, (ids, judged) in enumerate(zip(ranked, qrels, strict=True)):
        if judged and ids:
            top = ids[:depth]
            hit = [pos for pos, yes in enumerate(map(judged.__contains__, top)) if yes]
            rows += [i] * len(hit)
            cols += hit
    if rows:
        out[rows, cols] = True
    return out


def judged_at(
    ranked: Sequence[Sequence[str]], qrels: Sequence[Mapping[str, int]], ks: Sequence[int]
) -> dict[str, np.ndarray]:
    """``judged_at_{k}`` per case for every k (ir_measures ``Judged@k``; 1 for an empty ranking)."""
    ks = sorted({int(k) for k in ks})
    labelled = judged_matrix(ranked, qrels, ks[-1]).cumsum(axis=1)
    returned = np.fromiter(map(len, ranked), dtype=np.int64, count=len(ranked))
    out = {}
    for k in ks:
        shown = np.minimum(returned, k)
        num = labelled[:, k - 1].astype(np.float64) if labelled.size else np.zeros(len(ranked))
        out[JUDGED_AT.format(k=k)] = np.where(shown > 0, num / np.maximum(shown, 1), 1.0)
    return out


def bpref(ranked: Sequence[Sequence[str]], qrels: Sequence[Mapping[str, int]], depth: int) -> np.ndarray:
    """float[n]: trec_eval ``bpref`` of each ranking cut at `depth` (0 without a relevant label)."""
    out = np.zeros(len(ranked), dtype=np.float64)
    for i, (ids, judged) in enumerate(zip(ranked, qrels, strict=True)):
        n_rel = sum(1 for g in judged.values() if g >= metrics.RELEVANCE_LEVEL)
        if not n_rel:
            continue
        n_nonrel = sum(1 for g in judged.values() if 0 <= g < metrics.RELEVANCE_LEVEL)
        seen: set[str] = set()
        nonrel_above = 0
        total = 0.0
        for doc in ids[:depth]:
            if doc in seen or judged.get(doc, -1) < 0:
                continue  # unlabelled (or negative: trec_eval's "not in the pool") items do not count
            seen.add(doc)
            if judged[doc] >= metrics.RELEVANCE_LEVEL:
                total += 1.0 - (min(nonrel_above, n_rel) / min(n_rel, n_nonrel) if nonrel_above else 0.0)
            else:
                nonrel_above += 1
        out[i] = total / n_rel
    return out


def condensed(
    ranked: Sequence[Sequence[str]], qrels: Sequence[Mapping[str, int]], depth: int
) -> list[list[str]]:
    """Each ranking (cut at `depth`) with its unlabelled items removed, order kept."""
    return [[d for d in ids[:depth] if d in judged] for ids, judged in zip(ranked, qrels, strict=True)]


def completeness_per_case(
    ranked: Sequence[Sequence[str]],
    qrels: Sequence[Mapping[str, int]],
    ks: Sequence[int],
    families: Sequence[str],
) -> dict[str, np.ndarray]:
    """Every label-completeness column: judged@k, bpref, and the condensed twin of each strict family
    in `families` that has one (recall@k, mrr, ndcg@k), all over the top max(ks) as the strict ones."""
    ks = sorted({int(k) for k in ks})
    depth = ks[-1]
    out = judged_at(ranked, qrels, ks)
    out[BPREF] = bpref(ranked, qrels, depth)
    wanted = [f for f in CONDENSED_FAMILIES if f in families]
    if wanted:
        strict = metrics.evaluate(condensed(ranked, qrels, depth), qrels, ks, wanted, depth=depth)
        for name, values in strict.items():
            if not name.startswith("mrr_at_"):
                out[CONDENSED + name] = values
    return out


def is_completeness(name: str) -> bool:
    """A figure of this module (judged@k, bpref, condensed_*), e.g. to group it apart in MLflow."""
    return (
        name == BPREF or name.startswith(CONDENSED) or (name.startswith("judged_at_") and name[10:].isdigit())
    )
