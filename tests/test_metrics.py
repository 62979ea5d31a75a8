"""Hand-worked metric values for the recall harness's edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalpipe.scoring import metrics as m

# Five cases, one per harness edge case; every query is judged binary here.
RANKED = [
    ["x", "y", "z"],  # 0: no hit
    ["a", "x", "y"],  # 1: hit at rank 1
    ["x", "y", "a", "b"],  # 2: first hit at rank 3
    ["x", "b", "a"],  # 3: two expected IDs, found at ranks 2 and 3
    [],  # 4: empty ranked list
]
QRELS = [{"a": 1}, {"a": 1}, {"a": 1}, {"a": 1, "b": 1}, {"a": 1}]
KS = [1, 5]


def test_relevance_matrix_shapes_and_padding():
    rel = m.relevance_matrix(RANKED, QRELS, depth=5)
    assert rel.grades.shape == (5, 5)
    assert rel.n_ret.tolist() == [3, 3, 4, 3, 0]
    assert rel.n_rel.tolist() == [1, 1, 1, 2, 1]
    assert rel.grades[3].tolist() == [0, 1, 1, 0, 0]
    assert rel.ideal[3].tolist() == [1, 1, 0, 0, 0]
    assert m.first_hit_rank(rel).tolist() == [0, 1, 3, 2, 0]


def test_edge_cases_per_case():
    pc = m.evaluate(RANKED, QRELS, KS)
    assert pc["recall_at_1"].tolist() == [0, 1, 0, 0, 0]
    assert pc["recall_at_5"].tolist() == [0, 1, 1, 1, 0]
    # MRR looks as deep as the largest k (5): ranks 1, 3, 2 -> 1, 1/3, 1/2.
    assert pc["mrr"] == pytest.approx([0, 1, 1 / 3, 1 / 2, 0])
    assert pc["mrr_at_1"] == pytest.approx([0, 1, 0, 0, 0])
    # Case 3 at k=5: relevant at ranks 2 and 3 -> precision 2/5, AP (1/2 + 2/3) / 2 = 7/12.
    assert pc["precision_at_5"] == pytest.approx([0, 1 / 5, 1 / 5, 2 / 5, 0])
    assert pc["map_at_5"] == pytest.approx([0, 1, 1 / 3, 7 / 12, 0])
    assert pc["frac_recall_at_5"] == pytest.approx([0, 1, 1, 1, 0])
    # Case 3 nDCG@5 (binary): DCG = 1/log2(3) + 1/log2(4); ideal = 1 + 1/log2(3).
    nd3 = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    # Case 2: DCG = 1/log2(4) = 0.5, ideal = 1.
    assert pc["ndcg_at_5"] == pytest.approx([0, 1, 0.5, nd3, 0])


def test_aggregate_means_and_hit_counts():
    agg = m.aggregate(m.evaluate(RANKED, QRELS, KS))
    assert agg["hits_at_1"] == 1
    assert agg["hits_at_5"] == 3
    assert agg["recall_at_5"] == pytest.approx(3 / 5)
    # (0 + 1 + 1/3 + 1/2 + 0) / 5 = 11/30
    assert agg["mrr"] == pytest.approx(11 / 30)


def test_metric_names():
    pc = m.evaluate(RANKED, QRELS, [5, 1])
    assert set(pc) == {
        "recall_at_1",
        "recall_at_5",
        "mrr",
        "mrr_at_1",
        "mrr_at_5",
        "ndcg_at_1",
        "ndcg_at_5",
        "map_at_1",
        "map_at_5",
        "precision_at_1",
        "precision_at_5",
        "frac_recall_at_1",
        "frac_recall_at_5",
    }
    only = m.evaluate(RANKED, QRELS, [5], metrics=["recall", "ndcg"])
    assert set(only) == {"recall_at_5", "ndcg_at_5"}
    assert set(m.aggregate(only)) == {"recall_at_5", "hits_at_5", "ndcg_at_5"}


def test_tier_slices_with_mask_including_extra_tier():
    tiers = np.array(["exact", "exact", "concept", "multi_hop", "di"])
    pc = m.evaluate(RANKED, QRELS, KS)
    exact = m.aggregate(pc, tiers == "exact")
    assert exact["hits_at_1"] == 1 and exact["recall_at_1"] == 0.5
    assert exact["mrr"] == pytest.approx(0.5)  # (0 + 1) / 2
    di = m.aggregate(pc, tiers == "di")  # a tier the stock three do not name
    assert di["hits_at_5"] == 0 and di["recall_at_5"] == 0.0
    multi = m.aggregate(pc, tiers == "multi_hop")
    assert multi["map_at_5"] == pytest.approx(7 / 12)
    # A tier with no cases keeps its shape with zeros.
    none = m.aggregate(pc, tiers == "nope")
    assert none["recall_at_5"] == 0.0 and none["hits_at_5"] == 0.0


def test_graded_ndcg_by_hand():
    ranked = [["d1", "d2", "d3", "d4"]]
    qrels = [{"d1": 1, "d2": 0, "d3": 3, "d4": -1, "d5": 2}]  # d5 is relevant but never retrieved
    pc = m.evaluate(ranked, qrels, [1, 3, 4])
    # k=1: DCG = 1/log2(2) = 1; ideal = 3/log2(2) = 3 -> 1/3.
    assert pc["ndcg_at_1"][0] == pytest.approx(1 / 3)
    # k=3: DCG = 1/1 + 0/log2(3) + 3/log2(4) = 1 + 1.5 = 2.5
    #      ideal grades 3, 2, 1: 3/1 + 2/log2(3) + 1/2 = 3.5 + 1.26186 = 4.76186
    #      -> 2.5 / 4.76186 = 0.52500
    idcg3 = 3.5 + 2 / math.log2(3)
    assert pc["ndcg_at_3"][0] == pytest.approx(2.5 / idcg3)
    assert pc["ndcg_at_3"][0] == pytest.approx(0.52500, abs=1e-5)
    # k=4: d4's grade -1 is 0 gain, and the ideal has only three positive grades -> same as k=3.
    assert pc["ndcg_at_4"][0] == pytest.approx(2.5 / idcg3)
    # n_rel = 3 (d1, d3, d5); relevant at ranks 1 and 3 -> AP@4 = (1/1 + 2/3) / 3 = 5/9.
    assert pc["map_at_4"][0] == pytest.approx(5 / 9)
    assert pc["precision_at_4"][0] == pytest.approx(2 / 4)
    assert pc["frac_recall_at_4"][0] == pytest.approx(2 / 3)


def test_query_without_relevant_docs_scores_zero():
    pc = m.evaluate([["a", "b"]], [{"a": 0, "b": -1}], [2])
    assert all(v.tolist() == [0.0] for v in pc.values())


def test_repeated_doc_counts_once():
    pc = m.evaluate([["a", "a", "b"]], [{"a": 1}], [3])
    # Ranks 1..3 are a, a(dup, no gain), b -> one relevant of three.
    assert pc["precision_at_3"][0] == pytest.approx(1 / 3)
    assert pc["frac_recall_at_3"][0] == pytest.approx(1.0)


def test_long_list_is_cut_at_depth():
    # The hit at rank 4 is past depth = max(ks) = 3, so MRR does not see it...
    assert m.evaluate([["x", "y", "z", "a"]], [{"a": 1}], [3])["mrr"][0] == 0.0
    # ...unless the caller asks for a deeper MRR.
    assert m.evaluate([["x", "y", "z", "a"]], [{"a": 1}], [3], depth=4)["mrr"][0] == 0.25


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: m.evaluate([["a"]], [{}, {}], [1]), "1 ranked lists but 2 qrels"),
        (lambda: m.evaluate([["a"]], [{}], []), "non-empty list of positive cutoffs"),
        (lambda: m.evaluate([["a"]], [{}], [0]), "non-empty list of positive cutoffs"),
        (lambda: m.evaluate([["a"]], [{}], [1], metrics=["bleu"]), "unknown metric family 'bleu'"),
        (lambda: m.evaluate([["a"]], [{}], [5], depth=3), "smaller than the largest cutoff"),
        (lambda: m.ndcg_at(m.relevance_matrix([["a"]], [{}], 2), 3), "outside 1..depth=2"),
    ],
)
def test_bad_input_messages(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_latency_percentile_index_rule():
    lats = [50, 10, 40, 30, 20, 100, 60, 70, 90, 80, 110]
    # Sorted: 10 20 ... 110 (n = 11). p50 index int(10 * 0.5) = 5 -> 60;
    # p95 index int(10 * 0.95) = int(9.5) = 9 -> 100 (an interpolating rule would say 105).
    assert m.latency_percentiles(lats) == (60, 100, 110)
    assert lats[0] == 50  # the caller's list is not sorted in place
    assert m.latency_percentiles([]) == (0, 0, 0)
    assert m.latency_percentiles([7]) == (7, 7, 7)
    # n = 4: p50 index int(1.5) = 1 -> 2; p95 index int(2.85) = 2 -> 3.
    assert m.latency_percentiles([4, 3, 2, 1]) == (2, 3, 4)
