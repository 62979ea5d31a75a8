"""Names that tell configurations apart: a nested ranker component chosen on the command line
(`ranker=graph ranker@ranker.base=bm25f`) is part of the run name and the `ranker` param, and
`evalpipe compare --baseline NAME` refuses a name that several runs share, listing them."""

from __future__ import annotations

import re

import pytest

from cli_helpers import write_tiny
from cli_in_process import run_cli as cli
from evalpipe.compare.cli import main as compare_main
from evalpipe.evaluation.naming import component_choices, qualified_choice
from evalpipe.paths import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"


@pytest.mark.parametrize(
    "choices, expected",
    [
        ({"ranker": "graph", "ranker@ranker.base": "bm25"}, "graph"),  # graph.yaml's own default
        ({"ranker": "graph"}, "graph"),
        ({"ranker": "graph", "ranker@ranker.base": "bm25f"}, "graph(base=bm25f)"),
        ({"ranker": "code_search", "ranker@ranker.base": "bm25f"}, "code_search(base=bm25f)"),
        (  # hybrid's components under code_search: only the swapped one is named
            {
                "ranker": "code_search",
                "ranker@ranker.base": "hybrid",
                "ranker@ranker.base.components.bm25f": "bm25f",
                "ranker@ranker.base.components.exact": "exact",
                "ranker@ranker.base.components.semantic": "bm25",
            },
            "code_search(base.components.semantic=bm25)",
        ),
        ({"ranker": "rrf", "ranker@ranker.components.semantic": "exact"}, "rrf(components.semantic=exact)"),
        ({"ranker": "bm25", "ranker@ranker.extra": "exact"}, "bm25(extra=exact)"),  # an added component
        ({"ranker": "bm25"}, "bm25"),
    ],
)
def test_qualified_choice_names_components_that_differ_from_the_default(choices, expected):
    assert qualified_choice(choices, CONF) == expected


def test_every_shipped_ranker_at_its_defaults_is_its_plain_name():
    for path in sorted((CONF / "ranker").glob("*.yaml")):
        assert component_choices({"ranker": path.stem}, CONF) == [], path.name


@pytest.fixture(scope="module")
def named_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("names")
    fx = write_tiny(tmp)
    uri = f"sqlite:///{tmp / 'mlflow.db'}"
    common = [
        f"fixture.path={fx}",
        "fixture.name=tiny",
        f"tracking.uri={uri}",
        "progress=false",
        "plots=false",
    ]
    outs = {}
    for i, extra in enumerate(
        (["ranker=graph"], ["ranker=graph", "ranker@ranker.base=bm25f"], ["ranker=graph"])
    ):
        proc = cli(tmp, *common, *extra, f"hydra.run.dir={tmp / f'out{i}'}")
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs[i] = proc.stdout
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("evalpipe/tiny")
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])
    return uri, runs, outs


def test_run_name_and_ranker_param_carry_the_swapped_component(named_runs):
    _, runs, outs = named_runs
    assert [r.info.run_name for r in runs] == ["graph", "graph(base=bm25f)", "graph"]
    assert [r.data.params["ranker"] for r in runs] == ["graph", "graph(base=bm25f)", "graph"]
    assert runs[1].data.tags["evalpipe.ranker"] == "graph(base=bm25f)"
    assert "(graph(base=bm25f))" in " ".join(outs[1].split())


def test_compare_baseline_by_name_picks_one_or_lists_the_candidates(named_runs, capsys):
    uri, runs, _ = named_runs
    plain, swapped, again = runs
    argv = ["--tracking-uri", uri, "--resamples", "50", "--metrics", "recall_at_5"]
    assert compare_main(["--runs", plain.info.run_id, swapped.info.run_id, *argv, "--baseline", "graph"]) == 0
    assert "baseline graph" in " ".join(capsys.readouterr().out.split())
    assert compare_main(["--experiment", "evalpipe/tiny", *argv, "--baseline", "graph(base=bm25f)"]) == 0
    assert f"baseline graph(base=bm25f) ({swapped.info.run_id[:8]})" in " ".join(
        capsys.readouterr().out.split()
    )
    assert compare_main(["--experiment", "evalpipe/tiny", *argv, "--baseline", "graph"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--baseline 'graph' is ambiguous: it names 2 runs" in err
    assert f"{plain.info.run_id} (graph)" in err and f"{again.info.run_id} (graph)" in err
    assert re.search(r"pass one of these run IDs", err)
