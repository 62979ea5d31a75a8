"""Names and params as the MLflow UI shows them: run-name rounding, metric grouping, measurement params,
links, and the sweep parent's description. Pure functions; expected values written out by hand."""

from __future__ import annotations

import json

import pytest

from evalpipe.evaluation.naming import point_name, round_floats
from evalpipe.reporting.headline import clip
from evalpipe.reporting.params import measurement_params
from evalpipe.scoring.names import lookup, metric_name
from evalpipe.tracking import links


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("k1=1.5073897086401147", "k1=1.507"),
        ("b=0.00012345678", "b=0.0001235"),
        ("k1=0.9 b=0.75", "k1=0.9 b=0.75"),  # short floats stay as typed
        ("k1=2.0000001", "k1=2"),
        ("weights=[0.333333333,0.666666667]", "weights=[0.3333,0.6667]"),
        ("model=all-MiniLM-L6-v2 seed=12345678", "model=all-MiniLM-L6-v2 seed=12345678"),  # not floats
        ("k1=-1.234567", "k1=-1.235"),
    ],
)
def test_round_floats_to_four_significant_digits(text, expected):
    assert round_floats(text) == expected


def test_point_name_strips_the_ranker_prefix_and_rounds():
    overrides = ["ranker.k1=1.5073897086401147", "ranker.method=atire", "fixture.path=x.yaml"]
    assert point_name("bm25", overrides) == "bm25 k1=1.507 method=atire"


@pytest.mark.parametrize(
    ("bare", "logged"),
    [
        ("recall_at_5", "recall_at_5"),
        ("mrr", "mrr"),
        ("ndcg_at_10", "ndcg_at_10"),
        ("map_at_5", "ir/map_at_5"),
        ("mrr_at_20", "ir/mrr_at_20"),
        ("frac_recall_at_1", "ir/frac_recall_at_1"),
        ("hits_at_5", "ir/hits_at_5"),
        ("precision_at_5", "ir/precision_at_5"),
        ("rag_document_hit_rate", "rag/document_hit_rate"),
        ("latency_p95_us", "cost/latency_p95_us"),
        ("index_build_seconds", "cost/index_build_seconds"),
        ("cases", "count/cases"),
        ("retrieval_errors", "count/retrieval_errors"),
        ("tier/exact/map_at_5", "tier/exact/map_at_5"),
        ("index/vocab_size", "index/vocab_size"),
    ],
)
def test_metric_names_keep_headline_bare_and_group_the_rest(bare, logged):
    assert metric_name(bare) == logged


def test_lookup_accepts_bare_names_of_grouped_figures():
    figures = {"recall_at_5": 0.8, "ir/map_at_5": 0.6}
    assert lookup(figures, "recall_at_5") == 0.8
    assert lookup(figures, "map_at_5") == 0.6  # objective=map_at_5 keeps working
    assert lookup(figures, "ir/map_at_5") == 0.6
    assert lookup(figures, "ndcg_at_5") is None


RESOLVED = {
    "fixture": {
        "_target_": "evalpipe.inputs.fixture.load_fixture",
        "path": "fixtures/gold.yaml",
        "name": None,
    },
    "ranker": {
        "_target_": "evalpipe.rankers.fusion.rrf.RRFRanker",
        "k": 60,
        "weights": [1.0, 0.5],
        "components": {"bm25": {"_target_": "evalpipe.rankers.lexical.bm25.BM25Ranker", "k1": 1.2}},
    },
    "tracking": {"uri": "https://user:s3cret@mlflow.example/", "experiment_prefix": "evalpipe"},
    "ks": [1, 5, 20],
    "metrics": ["recall", "mrr"],
    "objective": "recall_at_5",
    "run_name": None,
    "force": False,
    "progress": True,
    "plots": True,
    "token_encoding": "cl100k_base",
}


def test_measurement_params_are_the_ranker_fixture_and_k_list_only():
    params = measurement_params(RESOLVED, "rrf", "gold")
    assert params == {
        "ranker": "rrf",
        "ranker.k": "60",
        "ranker.weights": "[1.0, 0.5]",
        "ranker.components.bm25.k1": "1.2",
        "fixture": "gold",
        "fixture.path": "fixtures/gold.yaml",
        "fixture.name": "None",
        "ks": "[1, 5, 20]",
        "metrics": '["recall", "mrr"]',
        "token_encoding": "cl100k_base",
    }
    # Nothing about where or how it is logged, no class paths, and the tracking URI (which may
    # carry credentials) is never a param.
    assert not any("_target_" in k or k.startswith("tracking") for k in params)
    assert not any("s3cret" in v for v in params.values())


def test_links_for_a_local_store_and_a_server():
    rid = "a" * 32
    assert links.run_url("sqlite:////tmp/x/mlflow.db", "3", rid) == (
        f"http://127.0.0.1:5000/#/experiments/3/runs/{rid}?workflowType=machine_learning"
    )
    assert links.experiment_url("http://mlflow.internal:5000/", "3") == (
        "http://mlflow.internal:5000/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=evalpipe"
    )
    assert links.run_url("databricks", "3", rid) is None


def test_view_state_lists_headline_columns_in_order():
    assert links.headline_columns([20, 1, 5]) == [
        "recall_at_1",
        "recall_at_5",
        "recall_at_20",
        "mrr",
        "ndcg_at_1",
        "ndcg_at_5",
        "ndcg_at_20",
    ]
    state = links.view_state(["recall_at_5", "mrr"], ["ranker"], "recall_at_5")
    assert state["selectedColumns"] == [
        "metrics.`recall_at_5`",
        "metrics.`mrr`",
        "params.`ranker`",
        "attributes.`Dataset`",
    ]
    assert state["orderByKey"] == "metrics.`recall_at_5`" and state["orderByAsc"] is False
    # Only measured runs: no reused copies, nothing without the objective (parents, compare, gate).
    assert state["searchFilter"] == "tags.`evalpipe.reused_run_id` IS NULL and metrics.`recall_at_5` >= 0"
    assert state["columnWidths"]["attributes.`Run Name`"] == 260
    json.dumps(state)  # stored as an experiment tag


def test_clip_keeps_whole_lines_under_the_limit():
    text = "\n".join(f"line {i}" for i in range(100))
    out = clip(text, limit=200)
    assert len(out) <= 200 and "cut to fit" in out
    assert all(line.startswith(("line ", "_(cut")) or not line for line in out.splitlines())


def test_sweep_summary_top_points_best_line_and_description():
    from evalpipe.tracking.sweep_summary import SweepRow, best_line, sweep_description, top_points

    def row(job, rid, status, k1, metrics):
        return SweepRow(job, rid * 32, f"bm25 k1={k1}", status, {"ranker.k1": k1}, metrics)

    rows = [
        row(0, "a", "FINISHED", "0.9", {"recall_at_5": 0.80, "mrr": 0.6}),
        row(1, "b", "REUSED", "1.2", {"recall_at_5": 0.85, "mrr": 0.5}),
        row(2, "c", "FAILED", "2.0", {}),
        row(3, "d", "FINISHED", "1.5073897086401147", {"recall_at_5": 0.85, "ir/map_at_5": 0.7}),
    ]
    # Highest objective first; ties keep job order; the failed point has no figures.
    assert [r.job for r in top_points(rows, "recall_at_5")] == [1, 3, 0]
    assert [r.job for r in top_points(rows, "map_at_5")] == [3]  # a bare objective finds ir/map_at_5
    assert (
        best_line(rows, ["ranker.k1"], "recall_at_5")
        == f"best recall_at_5 = 0.8500: job 1 · ranker.k1=1.2 · run {'b' * 32}"
    )
    assert best_line(rows, ["ranker.k1"], "map_at_5").startswith(
        "best map_at_5 = 0.7000: job 3 · ranker.k1=1.507 ·"
    )
    text = sweep_description(rows, ["ranker.k1"], "recall_at_5", "s1", n=2)
    assert text.startswith("**Sweep `s1`** · 4 points · 1 reused · 1 failed · objective `recall_at_5`")
    assert "#### Top 2 points by recall_at_5" in text
    assert "| 1 | 1.2 |" in text and "| 3 | 1.507 |" in text and "| 0 | 0.9 |" not in text


class FakeClient:
    """Just enough of MlflowClient for prepare_experiment: experiment tags in a dict."""

    def __init__(self, tags=None):
        self.tags = dict(tags or {})
        self.writes = 0

    def get_experiment(self, experiment_id):
        return type("Exp", (), {"tags": dict(self.tags)})()

    def set_experiment_tag(self, experiment_id, key, value):
        self.tags[key] = value
        self.writes += 1


def test_prepare_experiment_tags_once_widens_the_view_and_keeps_a_users_description():
    client = FakeClient()
    links.prepare_experiment(client, "7", [1, 5], "recall_at_5")
    assert client.tags["mlflow.experimentKind"] == "custom_model_development"
    view = json.loads(client.tags["mlflow.sharedViewState.evalpipe"])
    assert view["selectedColumns"] == [f"metrics.`{m}`" for m in ("recall_at_1", "recall_at_5", "mrr")] + [
        "metrics.`ndcg_at_1`",
        "metrics.`ndcg_at_5`",
        "params.`ranker`",
        "attributes.`Dataset`",
    ]
    note = client.tags["mlflow.note.content"]
    assert "(#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=evalpipe)" in note
    writes = client.writes
    links.prepare_experiment(client, "7", [1, 5], "recall_at_5")
    assert client.writes == writes  # idempotent: nothing to write the second time
    links.prepare_experiment(client, "7", [10], "ndcg_at_10")  # another run with other K
    view = json.loads(client.tags["mlflow.sharedViewState.evalpipe"])
    assert (
        "metrics.`recall_at_10`" in view["selectedColumns"]
        and "metrics.`recall_at_1`" in view["selectedColumns"]
    )
    assert view["orderByKey"] == "metrics.`recall_at_5`"  # the first objective's sort is kept
    own = FakeClient({"mlflow.note.content": "my notes"})
    links.prepare_experiment(own, "7")
    assert own.tags["mlflow.note.content"] == "my notes"


def test_judge_settings_are_params_only_when_a_judge_ran_and_never_its_key():
    cfg = {**RESOLVED, "judge": {"backend": "none", "prompt": "relevance_v1"}}
    assert not any(k.startswith("judge") for k in measurement_params(cfg, "rrf"))
    judge = {
        "_target_": "evalpipe.judge.settings.JudgeSettings",
        "backend": "openai",
        "model": "gpt-x",
        "prompt": "relevance_v1",
        "api_key": "sk-secret",
        "api_key_env": "OPENAI_API_KEY",
        "concurrency": 4,
    }
    params = measurement_params({**RESOLVED, "judge": judge}, "rrf")
    judged = {k: v for k, v in params.items() if k.startswith("judge")}
    assert judged == {"judge.backend": "openai", "judge.model": "gpt-x", "judge.prompt": "relevance_v1"}
