"""The vectorised `relevance_matrix` against a plain per-case reading of its definition."""

from __future__ import annotations

import numpy as np
import pytest

from evalpipe.scoring.metrics import relevance_matrix


def _reference(ranked, qrels, depth):
    n = len(ranked)
    grades, ideal = np.zeros((n, depth)), np.zeros((n, depth))
    n_rel, n_ret = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    for i, (ids, judged) in enumerate(zip(ranked, qrels, strict=True)):
        top = ids[:depth]
        n_ret[i] = len(top)
        seen = set()
        for r, doc in enumerate(top):
            if doc not in seen and judged.get(doc, 0) > 0:
                grades[i, r] = judged[doc]
            seen.add(doc)
        positive = sorted((g for g in judged.values() if g > 0), reverse=True)[:depth]
        ideal[i, : len(positive)] = positive
        n_rel[i] = sum(g >= 1 for g in judged.values())
    return grades, ideal, n_rel, n_ret


def test_hand_worked_case():
    rel = relevance_matrix([["a", "a", "b", "x"], []], [{"a": 2, "b": 1, "c": 3, "z": -1}, {"q": 1}], 3)
    assert rel.grades.tolist() == [[2.0, 0.0, 1.0], [0.0, 0.0, 0.0]]  # the repeated "a" earns nothing
    assert rel.ideal.tolist() == [[3.0, 2.0, 1.0], [1.0, 0.0, 0.0]]
    assert rel.n_rel.tolist() == [3, 1]
    assert rel.n_ret.tolist() == [3, 0]


@pytest.mark.parametrize("seed", range(10))
def test_random_lists_match_the_reference(seed):
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(40)]
    ranked, qrels = [], []
    for _ in range(int(rng.integers(0, 60))):
        ranked.append([docs[j] for j in rng.integers(0, 40, size=int(rng.integers(0, 25)))])  # repeats
        judged = rng.choice(40, size=int(rng.integers(0, 12)), replace=False)
        qrels.append(
            {docs[j]: int(g) for j, g in zip(judged, rng.integers(-1, 4, size=judged.size), strict=True)}
        )
    depth = int(rng.integers(1, 20))
    rel = relevance_matrix(ranked, qrels, depth)
    grades, ideal, n_rel, n_ret = _reference(ranked, qrels, depth)
    assert rel.grades.shape == (len(ranked), depth)
    np.testing.assert_array_equal(rel.grades, grades)
    np.testing.assert_array_equal(rel.ideal, ideal)
    np.testing.assert_array_equal(rel.n_rel, n_rel)
    np.testing.assert_array_equal(rel.n_ret, n_ret)
