"""Label completeness (judged@k, bpref, condensed figures) against reference implementations.

- bpref: trec_eval's, through pytrec_eval, on each run cut at the evaluation depth;
- judged@k: ir_measures' `Judged@k`;
- condensed figures: trec_eval (pytrec_eval) run on the condensed run (unlabelled items removed
  before the cut), the definition of a condensed list, computed by the reference, not by us.

On the random collection of tests/test_metrics_trec_eval.py (graded, negative and all-zero
judgements, empty runs, ties) and on the shared Cranfield qrels.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalpipe.scoring import completeness as c
from evalpipe.scoring import metrics as m
from evalpipe.scoring.names import metric_name
from test_metrics_trec_eval import CRANFIELD, random_collection, read_qrels, trec_order

pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier is not installed (dev extra)")
ir_measures = pytest.importorskip("ir_measures", reason="ir_measures is not installed (dev extra)")

TOL = 1e-9
KS = [1, 3, 5, 10]


def _cut(run: dict[str, dict[str, float]], depth: int) -> dict[str, dict[str, float]]:
    """Each query's top `depth` in trec order, as a run trec_eval reads the same way."""
    return {q: {d: float(depth - i) for i, d in enumerate(trec_order(s)[:depth])} for q, s in run.items()}


def check(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], ks: list[int]) -> dict:
    depth = max(ks)
    qids = sorted(set(qrels) & set(run))
    ranked = [trec_order(run[q]) for q in qids]
    judged = [qrels[q] for q in qids]
    ours = c.completeness_per_case(ranked, judged, ks, m.FAMILIES)
    # The same from the run's strict matrix (how a run computes them): identical.
    reused = c.completeness_per_case(
        ranked, judged, ks, m.FAMILIES, m.relevance_matrix(ranked, judged, depth)
    )
    assert set(reused) == set(ours) and all(np.array_equal(reused[k], ours[k]) for k in ours)
    cut = _cut(run, depth)

    # bpref: trec_eval on the run cut at the depth (trec_eval has no cutoff for bpref).
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"bpref"}).evaluate(cut)
    for i, q in enumerate(qids):
        if q in trec:
            assert ours["bpref"][i] == pytest.approx(trec[q]["bpref"], abs=TOL), q

    # judged@k: ir_measures, per query (it reports the queries that retrieved something).
    measures = [ir_measures.Judged @ k for k in ks]
    nonempty = {q: s for q, s in cut.items() if s}  # ir_measures divides by zero on an empty run
    ref = {(x.query_id, str(x.measure)): x.value for x in ir_measures.iter_calc(measures, qrels, nonempty)}
    compared = 0
    for i, q in enumerate(qids):
        for k in ks:
            key = (q, f"Judged@{k}")
            if run[q]:
                assert ours[f"judged_at_{k}"][i] == pytest.approx(ref[key], abs=TOL), key
                compared += 1
            else:  # ir_measures cannot score an empty run (0 / 0); ours says 1 (nothing unlabelled)
                assert ours[f"judged_at_{k}"][i] == 1.0
    assert compared > 0

    # Condensed: trec_eval on the condensed run (unlabelled items removed, then cut at the depth).
    condensed = {
        q: {
            d: float(depth - j)
            for j, d in enumerate([d for d in trec_order(s) if d in qrels.get(q, {})][:depth])
        }
        for q, s in cut.items()
    }
    kstr = ",".join(map(str, ks))
    measures_c = {f"success.{kstr}", f"ndcg_cut.{kstr}", "recip_rank"}
    trec_c = pytrec_eval.RelevanceEvaluator(qrels, measures_c).evaluate(condensed)
    for i, q in enumerate(qids):
        if q not in trec_c:
            continue
        assert ours["condensed_mrr"][i] == pytest.approx(trec_c[q]["recip_rank"], abs=TOL), q
        for k in ks:
            assert ours[f"condensed_recall_at_{k}"][i] == pytest.approx(trec_c[q][f"success_{k}"], abs=TOL)
            assert ours[f"condensed_ndcg_at_{k}"][i] == pytest.approx(trec_c[q][f"ndcg_cut_{k}"], abs=TOL)
    return ours


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_collection_matches_references(seed):
    qrels, run = random_collection(seed)
    ours = check(qrels, run, KS)
    # The collection exercised what matters (so the test can fail): partly judged top k, bpref
    # with judged negatives above a relevant item, condensed above strict somewhere.
    assert 0 < ours["judged_at_5"].mean() < 1
    assert np.any((ours["bpref"] > 0) & (ours["bpref"] < 1))


@pytest.mark.skipif(not CRANFIELD.is_dir(), reason=f"shared Cranfield data not found at {CRANFIELD}")
def test_cranfield_matches_references():
    qrels = read_qrels(CRANFIELD / "qrels" / "test.tsv")
    rng = np.random.default_rng(38)
    docs = np.array([str(i) for i in range(1, 1401)])
    run: dict[str, dict[str, float]] = {}
    for q, judged in sorted(qrels.items()):
        pool = list(dict.fromkeys(list(judged) + list(rng.choice(docs, size=60, replace=False))))
        order = rng.permutation(len(pool))[:50]
        run[q] = {pool[j]: float(50 - r) for r, j in enumerate(order)}
    ours = check(qrels, run, [1, 5, 10, 20])
    assert 0.05 < ours["judged_at_10"].mean() < 0.95


def test_worked_example():
    """A hand-computed case: labels a (2), b (0), c (1); ranking x a y b c (x, y unlabelled)."""
    qrels = [{"a": 2, "b": 0, "c": 1}]
    ranked = [["x", "a", "y", "b", "c"]]
    out = c.completeness_per_case(ranked, qrels, [1, 3, 5], m.FAMILIES)
    assert out["judged_at_1"][0] == 0.0  # x
    assert out["judged_at_3"][0] == pytest.approx(1 / 3)  # a of x a y
    assert out["judged_at_5"][0] == pytest.approx(3 / 5)  # a b c
    # bpref: R=2, N=1; a has no judged negative above (1); c has b above: 1 - min(1,2)/min(2,1) = 0.
    assert out["bpref"][0] == pytest.approx(0.5)
    # condensed list: a b c -> R@1 = 1, MRR 1; nDCG@3 = (2 + 0 + 1/log2(4)) / (2 + 1/log2(3))
    assert out["condensed_recall_at_1"][0] == 1.0
    assert out["condensed_mrr"][0] == 1.0
    assert out["condensed_ndcg_at_3"][0] == pytest.approx((2 + 0.5) / (2 + 1 / np.log2(3)))
    # names: grouped under labels/ in MLflow
    assert metric_name("judged_at_5") == "labels/judged_at_5"
    assert metric_name("bpref") == "labels/bpref"
    assert metric_name("condensed_recall_at_5") == "labels/condensed_recall_at_5"
    assert metric_name("judged_recall_at_5") == "judged_recall_at_5"  # the LLM judge's figure: unchanged


def test_judged_at_is_not_mistaken_for_a_judge_figure():
    """`judged_at_K` is a strict figure; an objective naming it must not be read as the LLM judge's."""
    from evalpipe.judge.run import _judged_name

    assert _judged_name("judged_at_5") is None
    assert _judged_name("tier/concept/judged_at_5") is None
    assert _judged_name("tier/concept/judged_recall_at_5") == ("concept", "judged_recall_at_5", False)
    assert c.is_completeness("condensed_ndcg_at_20") and not c.is_completeness("judged_mrr")
