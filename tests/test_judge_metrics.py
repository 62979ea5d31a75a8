"""Judged figures, pair selection, calibration agreement and answer parsing, worked out by hand."""

from __future__ import annotations

import pytest

from evalpipe.core import Hit
from evalpipe.judge.calibration import agreement
from evalpipe.judge.judged_metrics import judged_scores
from evalpipe.judge.pairs import calibration_pairs, rescue_pairs
from evalpipe.judge.prompt import excerpt, load_prompt
from evalpipe.judge.settings import JudgeSettings
from evalpipe.judge.verdict import MalformedAnswer, parse_answer
from evalpipe.safety.errors import EvalpipeError
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import score_results
from evalpipe.scoring.tokens import get_token_counter


def case(cid, tier, qrels, hits, error=None):
    return CaseResult(cid, tier, f"query {cid}", qrels, tuple(Hit(h) for h in hits), 10, 1, error)


# c1: expected A at rank 2; c2: B not found; c3: C at rank 1; c4: D not found, E labelled grade 0
# at rank 1; c5: unanswerable (no labels); c6: the ranker raised.
RESULTS = [
    case("c1", "exact", {"A": 1}, ["X", "A", "Y"]),
    case("c2", "exact", {"B": 1}, ["Y", "Z", "W"]),
    case("c3", "concept", {"C": 1}, ["C", "Q"]),
    case("c4", "concept", {"D": 1, "E": 0}, ["E", "F"]),
    case("c5", "concept", {}, ["G"]),
    case("c6", "concept", {"C": 1}, [], error="RuntimeError: down"),
]


def test_judged_recall_and_mrr_count_judged_positives_as_hits():
    # The judge says X (c1, rank 1), Z (c2, rank 2), E (c4: labelled 0 by the fixture, so ignored)
    # and G (c5: unanswerable, left out of the means) are relevant.
    positives = {("c1", "X"), ("c2", "Z"), ("c4", "E"), ("c5", "G")}
    j = judged_scores(RESULTS, [1, 3], positives, tiers=["exact", "concept"])
    # Labelled cases c1, c2, c3, c4, c6 (5). Judged first hits: c1 rank 1, c2 rank 2, c3 rank 1,
    # c4 none, c6 none. R@1 = 2/5, R@3 = 3/5, MRR = (1 + 1/2 + 1 + 0 + 0) / 5 = 0.5.
    assert j.overall["judged_recall_at_1"] == pytest.approx(2 / 5)
    assert j.overall["judged_recall_at_3"] == pytest.approx(3 / 5)
    assert j.overall["judged_hits_at_3"] == 3.0
    assert j.overall["judged_mrr"] == pytest.approx(0.5)
    # exact (c1, c2): R@1 1/2, R@3 2/2, MRR (1 + 1/2)/2; concept (c3, c4, c6): R@1 1/3, MRR 1/3.
    assert j.per_tier["exact"]["judged_recall_at_1"] == pytest.approx(0.5)
    assert j.per_tier["exact"]["judged_recall_at_3"] == pytest.approx(1.0)
    assert j.per_tier["exact"]["judged_mrr"] == pytest.approx(0.75)
    assert j.per_tier["concept"]["judged_recall_at_3"] == pytest.approx(1 / 3)
    assert j.per_tier["concept"]["judged_mrr"] == pytest.approx(1 / 3)
    assert list(j.first_rank) == [1, 2, 1, 0, 1, 0]
    assert j.flat()["tier/exact/judged_mrr"] == pytest.approx(0.75)
    # Strict figures are untouched: R@1 1/5, R@3 2/5, MRR (1/2 + 1)/5.
    strict = score_results(RESULTS, [1, 3], ["recall", "mrr"])
    assert strict.overall["recall_at_1"] == pytest.approx(1 / 5)
    assert strict.overall["mrr"] == pytest.approx(0.3)


def test_no_positives_means_judged_equals_strict():
    strict = score_results(RESULTS, [1, 3], ["recall", "mrr"])
    j = judged_scores(RESULTS, [1, 3], set())
    for name in ("recall_at_1", "recall_at_3", "mrr"):
        assert j.overall[f"judged_{name}"] == pytest.approx(strict.overall[name])


def test_rescue_pairs_are_the_unlabelled_candidates_that_could_change_a_figure():
    first = score_results(RESULTS, [1, 3], ["recall"]).first_rank
    pairs = rescue_pairs(RESULTS, first, depth=3, pool=False)
    # c1: only X (above A at rank 2); c2: all three; c4: F (E is labelled); c3 hit at 1; c5, c6 skipped.
    assert [(p.case_id, p.unit_id, p.rank) for p in pairs] == [
        ("c1", "X", 1),
        ("c2", "Y", 1),
        ("c2", "Z", 2),
        ("c2", "W", 3),
        ("c4", "F", 2),
    ]
    pooled = rescue_pairs(RESULTS, first, depth=3, pool=True)
    assert [(p.case_id, p.unit_id) for p in pooled] == [
        ("c1", "X"),
        ("c1", "Y"),
        ("c2", "Y"),
        ("c2", "Z"),
        ("c2", "W"),
        ("c3", "Q"),
        ("c4", "F"),
    ]


def test_calibration_sample_is_seeded_and_balanced():
    corpus = {"A", "B", "C", "D", "X", "Y", "Z", "W", "Q", "E", "F", "G"}
    pairs = calibration_pairs(RESULTS, corpus, size=4, seed=0)
    assert pairs == calibration_pairs(RESULTS, corpus, size=4, seed=0)
    assert sum(p.gold for p in pairs) == 2 and sum(not p.gold for p in pairs) == 2
    # Negatives are each case's highest-ranked candidate that is not a positive: X, Y, Q, E.
    assert {p.unit_id for p in pairs if not p.gold} <= {"X", "Y", "Q", "E"}
    everything = calibration_pairs(RESULTS, corpus, size=100, seed=3)
    assert sorted((p.case_id, p.unit_id) for p in everything if p.gold) == [
        ("c1", "A"),
        ("c2", "B"),
        ("c3", "C"),
        ("c4", "D"),
    ]
    assert sorted(p.unit_id for p in everything if not p.gold) == ["E", "Q", "X", "Y"]


def test_agreement_with_a_known_confusion_matrix():
    # tp 8, fp 2, fn 4, tn 6 (+1 pair without a verdict), n 20.
    gold = [True] * 8 + [False] * 2 + [True] * 4 + [False] * 6 + [True]
    said = [True] * 8 + [True] * 2 + [False] * 4 + [False] * 6 + [None]
    a = agreement(gold, said)
    assert (a.tp, a.fp, a.fn, a.tn, a.errors, a.n) == (8, 2, 4, 6, 1, 20)
    assert a.precision == pytest.approx(0.8)
    assert a.recall == pytest.approx(8 / 12)
    # p_o = 14/20 = 0.7; p_e = (10*12 + 10*8)/400 = 0.5; kappa = 0.2/0.5 = 0.4.
    assert a.kappa == pytest.approx(0.4)
    assert a.figures()["judge/calibration/kappa"] == pytest.approx(0.4)


def test_agreement_edge_cases():
    assert agreement([True, False], [True, False]).kappa == 1.0
    assert agreement([True, True], [True, True]).kappa == 1.0  # p_e = 1, perfect agreement
    assert agreement([True, False], [False, True]).kappa == pytest.approx(-1.0)
    assert agreement([], []).precision == 0.0


@pytest.mark.parametrize(
    ("text", "relevant", "reason"),
    [
        ('{"relevant": true, "reason": "defines it"}', True, "defines it"),
        ('```json\n{"relevant": false, "reason": "a test"}\n```', False, "a test"),
        ('Sure. {"relevant": "yes", "reason": "uses {braces}"} done', True, "uses {braces}"),
        ('{"note": 1} then {"relevant": "no"}', False, ""),
    ],
)
def test_answers_are_parsed_robustly(text, relevant, reason):
    v = parse_answer(text)
    assert (v.relevant, v.reason) == (relevant, reason)


@pytest.mark.parametrize("text", ["Yes, it is relevant.", '{"relevant": "maybe"}', "", '{"reason": "x"}'])
def test_malformed_answers_raise_a_clear_error(text):
    with pytest.raises(MalformedAnswer, match="expected"):
        parse_answer(text)


def test_excerpt_is_bounded_in_tokens():
    count = get_token_counter().count
    text = "def merge_settings(base, override):\n" + "    value = base[key] + override[key]\n" * 200
    cut = excerpt(text, 50, count)
    assert count(cut) <= 50 and cut.endswith("…") and text.startswith(cut[:-2])
    assert excerpt("short text", 50, count) == "short text"


def test_prompt_file_is_versioned_and_rendered():
    p = load_prompt("relevance_v1")
    assert p.version.startswith("relevance_v1@") and len(p.version) == len("relevance_v1@") + 8
    text = p.render("merge two configs", "a.py::merge", "merge", "a.py", "def merge(): ...")
    assert "merge two configs" in text and "ID: a.py::merge" in text and "$" not in text
    with pytest.raises(EvalpipeError, match="no prompt file"):
        load_prompt("no_such_prompt")


def test_settings_are_checked_and_the_key_stays_out_of_repr(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    s = JudgeSettings(backend="openai", model="m", api_key="sk-secret-123")
    assert "sk-secret-123" not in repr(s)
    with pytest.raises(EvalpipeError, match="export OPENAI_API_KEY"):
        JudgeSettings(backend="openai", model="m", api_key_env="OPENAI_API_KEY").resolved_api_key()
    assert JudgeSettings(backend="openai", model="m", base_url="http://127.0.0.1:1/v1").resolved_api_key()
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert (
        JudgeSettings(backend="openai", model="m", api_key_env="OPENAI_API_KEY").resolved_api_key()
        == "from-env"
    )
    with pytest.raises(EvalpipeError, match="judge.max_calls"):
        JudgeSettings(backend="openai", model="m", max_calls=-1)
    with pytest.raises(EvalpipeError, match="judge.backend"):
        JudgeSettings(backend="gemini", model="m")
