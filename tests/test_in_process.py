"""evaluation.in_process.score_config: the scripts' one shared build -> run -> score step."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from evalpipe.evaluation.in_process import score_config
from evalpipe.inputs.fixture import load_fixture

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def cfgs():
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        yield {
            name: compose(config_name="config", overrides=["fixture=gold", f"ranker={name}", *extra])
            for name, extra in {"bm25": [], "exact": [], "semantic": ["ranker.model=/no/such/model"]}.items()
        }


def test_scores_equal_a_hand_run_of_the_same_cases(cfgs):
    fixture = load_fixture(ROOT / "fixtures" / "gold.yaml")
    scored = score_config(cfgs["exact"], fixture, families=["recall", "mrr"], ks=[1, 5])
    # by hand: the exact ranker's own hits (winnow constraints applied), first expected rank per case
    from hydra.utils import instantiate

    ranker = instantiate(cfgs["exact"].ranker)
    ranker.prepare(fixture.corpus)
    firsts = []
    for case in fixture.cases:
        constraints = case.winnow_constraints or None
        hits = ranker.search(case.query, max(cfgs["exact"].ks), constraints)
        allowed = [h.id for h in hits if constraints is None or fixture.corpus.allows(h.id, constraints)]
        ids = list(dict.fromkeys(allowed))
        firsts.append(next((i + 1 for i, d in enumerate(ids) if d in case.expected), 0))
    n = len(fixture.cases)
    assert scored.scores is not None and scored.scores.cases == n
    assert scored.scores.metric("recall_at_5") == pytest.approx(sum(0 < f <= 5 for f in firsts) / n)
    assert scored.scores.metric("recall_at_1") == pytest.approx(sum(f == 1 for f in firsts) / n)
    assert "ndcg_at_5" not in scored.scores.overall  # only the families asked for
    assert scored.search_seconds > 0


def test_config_defaults_and_a_skipped_ranker(cfgs):
    fixture = load_fixture(ROOT / "fixtures" / "gold.yaml")
    scored = score_config(cfgs["bm25"], fixture)
    assert scored.scores is not None
    assert set(scored.scores.ks) == set(cfgs["bm25"].ks)
    assert "ndcg_at_5" in scored.scores.overall or "ndcg" not in cfgs["bm25"].metrics
    skipped = score_config(cfgs["semantic"], fixture)
    assert skipped.scores is None and skipped.skipped and skipped.search_seconds == 0.0
