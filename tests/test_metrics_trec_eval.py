"""Agreement of every metric with trec_eval (via pytrec_eval), per query and averaged.

trec_eval quirks handled here, not in evalpipe.scoring.metrics:
* it re-sorts each query's run by score descending and breaks ties by docid
  descending (byte order), so our ranked list is built in that order
  (`trec_order`, checked against pytrec_eval in `test_trec_tie_order`);
* it drops queries absent from the run or from the qrels, so averages are taken
  over the queries it returns (via an aggregate mask);
* recip_rank looks at the whole run, so it is compared with `mrr` at a depth of
  the longest run; our `mrr_at_{k}` is compared with recip_rank of the run cut to
  its top k (in trec order).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from evalpipe.scoring import metrics as m

pytrec_eval = pytest.importorskip("pytrec_eval", reason="pytrec-eval-terrier is not installed (dev extra)")

SHARED = Path(__file__).resolve().parents[2] / "shared"
CRANFIELD = SHARED / "datasets" / "cranfield"

TOL = 1e-6


def trec_order(scored: dict[str, float]) -> list[str]:
    """Doc ids in the order trec_eval ranks them: score desc, then docid desc."""
    return [d for d, _ in sorted(scored.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)]


def test_trec_tie_order():
    docs = ["c", "a", "10", "9", "b", "2"]
    run = {"q": dict.fromkeys(docs, 1.0)}
    order = trec_order(run["q"])
    assert order == ["c", "b", "a", "9", "2", "10"]
    for expected_rank, doc in enumerate(order, start=1):
        ev = pytrec_eval.RelevanceEvaluator({"q": {doc: 1}}, {"recip_rank"})
        assert ev.evaluate(run)["q"]["recip_rank"] == pytest.approx(1 / expected_rank)


def compare_with_trec(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], ks: list[int]):
    """Assert per-query and mean agreement of every metric family; return trec's per-query output."""
    kstr = ",".join(map(str, ks))
    measures = {f"ndcg_cut.{kstr}", f"map_cut.{kstr}", f"P.{kstr}", f"recall.{kstr}", f"success.{kstr}"}
    measures.add("recip_rank")
    trec = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

    qids = sorted(set(qrels) | set(run))
    ranked = [trec_order(run.get(q, {})) for q in qids]
    judged = [qrels.get(q, {}) for q in qids]
    depth = max(max(ks), max(len(r) for r in ranked))
    ours = m.evaluate(ranked, judged, ks, depth=depth)
    kept = np.array([q in trec for q in qids])
    # pytrec_eval keeps exactly the queries present in both the run and the qrels.
    assert {q for q, keep in zip(qids, kept, strict=True) if keep} == set(run) & set(qrels)

    pairs = {"mrr": "recip_rank"}
    for k in ks:
        pairs |= {
            f"ndcg_at_{k}": f"ndcg_cut_{k}",
            f"map_at_{k}": f"map_cut_{k}",
            f"precision_at_{k}": f"P_{k}",
            f"frac_recall_at_{k}": f"recall_{k}",
            f"recall_at_{k}": f"success_{k}",
        }
    ours_mean = m.aggregate(ours, kept)
    for name, trec_name in pairs.items():
        for i, q in enumerate(qids):
            if q in trec:
                assert ours[name][i] == pytest.approx(trec[q][trec_name], abs=TOL), (q, name)
        trec_mean = float(np.mean([trec[q][trec_name] for q in trec]))
        assert ours_mean[name] == pytest.approx(trec_mean, abs=TOL), name

    # mrr_at_k == recip_rank of the run cut to its top k in trec order.
    for k in ks:
        cut = {q: {d: run[q][d] for d in trec_order(run[q])[:k]} for q in run}
        trec_k = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(cut)
        for i, q in enumerate(qids):
            if q in trec_k:
                assert ours[f"mrr_at_{k}"][i] == pytest.approx(trec_k[q]["recip_rank"], abs=TOL), (q, k)
    return trec


def random_collection(seed: int, n_queries: int = 80, n_docs: int = 40):
    """Random graded qrels and tied-score runs covering trec_eval's awkward cases."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(n_docs)]  # d10 < d9 in byte order: exercises the tie rule
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for qi in range(n_queries):
        q = f"q{qi}"
        kind = qi % 10
        judged = rng.choice(docs, size=int(rng.integers(1, 15)), replace=False)
        grades = rng.integers(0, 4, size=judged.size)  # graded 0..3
        if kind == 1:
            grades[:] = 0  # judged, but nothing relevant
        if kind == 2:
            grades[0] = -1  # a negative judgement
        if kind != 3:  # kind 3: query absent from the qrels
            qrels[q] = {str(d): int(g) for d, g in zip(judged, grades, strict=True)}
        if kind == 4:
            continue  # query absent from the run
        length = 0 if kind == 5 else int(rng.integers(1, 30))  # kind 5: empty run; many runs < k
        # Half the retrieved docs come from the judged set so hits are common.
        pool = list(dict.fromkeys(list(judged[: length // 2]) + list(rng.permutation(docs))))[:length]
        scores = rng.integers(0, 6, size=len(pool)) / 2.0  # coarse scores -> many ties
        run[q] = {str(d): float(s) for d, s in zip(pool, scores, strict=True)}
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_runs_match_trec_eval(seed):
    qrels, run = random_collection(seed)
    trec = compare_with_trec(qrels, run, [1, 3, 5, 10, 20])
    # The collection really exercised the awkward cases (so the test can fail).
    assert any(len(run[q]) == 0 for q in trec)
    assert any(trec[q]["ndcg_cut_10"] > 0 for q in trec)
    assert any(all(g < 1 for g in qrels[q].values()) for q in trec)


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)  # header: query-id corpus-id score
        for qid, doc, grade in reader:
            qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


@pytest.mark.skipif(not CRANFIELD.is_dir(), reason=f"shared Cranfield data not found at {CRANFIELD}")
def test_cranfield_qrels_match_trec_eval():
    qrels = read_qrels(CRANFIELD / "qrels" / "test.tsv")
    assert len(qrels) == 225 and any(g == -1 for q in qrels.values() for g in q.values())
    rng = np.random.default_rng(1400)
    docs = np.array([str(i) for i in range(1, 1401)])
    run: dict[str, dict[str, float]] = {}
    for q, judged in sorted(qrels.items()):
        # Deterministic run: the judged docs mixed into 100 random ones, randomly permuted,
        # scored 100, 99, ... so there are no ties.
        pool = list(dict.fromkeys(list(judged) + list(rng.choice(docs, size=100, replace=False))))
        order = rng.permutation(len(pool))[:100]
        run[q] = {pool[j]: float(100 - r) for r, j in enumerate(order)}
    trec = compare_with_trec(qrels, run, [1, 5, 10, 20, 100])
    assert len(trec) == 225
    assert np.mean([trec[q]["ndcg_cut_10"] for q in trec]) > 0.05
