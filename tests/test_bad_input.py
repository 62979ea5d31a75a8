"""Bad input through the real CLI: exit 2, one line naming file/line/case/parameter, no traceback,
and no MLflow run (the store is never even opened: everything is checked before the first case).

Also the outcomes that are not bad input: a skipped ranker (exit 3), a run whose cases mostly
fail (exit 1, FAILED), plug-in results of the wrong shape, IDs outside the corpus, a timeout.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli_in_process import run_cli
from conftest import ROOT, TINY_UNITS

FIXTURE = """\
name: tiny
corpus: corpus.jsonl
cases:
  - id: c1
    tier: exact
    query: merge_settings
    expected: [pkg/a.py::merge_settings]
  - id: c2
    tier: concept
    query: combine another session
    expected: [pkg/a.py::Session.merge]
  - id: c3
    tier: multi_hop
    query: open a file with pip
    expected: [pkg/b.go::Open, docs/guide.md#install]
  - id: c4
    tier: concept
    query: zebra
    expected: [pkg/a.py]
"""
CORPUS = "".join(json.dumps(u) + "\n" for u in TINY_UNITS)
TREC_RUN = "c1 Q0 pkg/a.py::merge_settings 1 2.0 sys\nc2 Q0 pkg/a.py::Session.merge 1 1.5 sys\n"


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m evalpipe` on this worktree's code, in `tmp`, logging to a store under tmp/mlruns:
    the CLI's own entry run in this process (tests/cli_in_process.py; the exit status, stdout and
    stderr a real process gives). `cli_process` is the same command as a real process."""
    return run_cli(tmp, *_run_args(tmp, args), env=_env())


def cli_process(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m evalpipe` as a real process: for what only a process shows (its exit status as
    the interpreter ends, a per-query timeout's alarm)."""
    return subprocess.run(
        [sys.executable, "-m", "evalpipe", *_run_args(tmp, args)],
        cwd=tmp,
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )


def _env() -> dict[str, str]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    for key in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"):
        env.pop(key, None)
    return env


def _run_args(tmp: Path, args: tuple[str, ...]) -> list[str]:
    return [
        f"hydra.run.dir={tmp / 'out'}",
        f"tracking.uri=sqlite:///{tmp / 'mlruns' / 'mlflow.db'}",
        "plots=false",
        *args,
    ]


def setup(tmp: Path, files: dict[str, str | bytes] | None = None) -> Path:
    """tmp with the tiny fixture and corpus, plus/overridden by `files` (name -> text or bytes)."""
    all_files: dict[str, str | bytes] = {"fx.yaml": FIXTURE, "corpus.jsonl": CORPUS, **(files or {})}
    for name, content in all_files.items():
        path = tmp / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return tmp


def assert_bad_input(proc: subprocess.CompletedProcess, tmp: Path, *needles: str) -> str:
    """Exit 2, exactly one line on stderr holding every needle, no traceback, no store created."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("evalpipe: error: ")
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert not (tmp / "mlruns").exists(), "bad input must be refused before MLflow is opened"
    return lines[0]


def evalpipe_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """Our own stderr lines (MLflow logs its store creation there too); never a traceback."""
    assert "Traceback" not in proc.stderr
    return [
        line for line in proc.stderr.splitlines() if line.startswith("evalpipe:") or line.startswith("  ")
    ]


def runs(tmp: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlruns' / 'mlflow.db'}")
    exp_ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exp_ids)


# -- config ------------------------------------------------------------------------------------------

CONFIG_CASES = [
    (["metrics=[not_a_metric]"], ["unknown metric family 'not_a_metric'", "choose from recall, mrr"]),
    (["metrics=[]"], ["metrics is empty"]),
    (["metrics=recall"], ["metrics must be a list", "metrics=[recall]"]),
    (["objective=recall_at_7"], ["objective=recall_at_7", "recall_at_5", "ndcg_at_20"]),
    (["ks=[1,10]", "objective=recall_at_5"], ["objective=recall_at_5", "recall_at_10"]),
    (["ks=5"], ["ks must be a list", "ks=[5]"]),
    (["ks=[0]"], ["ks must hold positive integers, got 0"]),
    (["ks=[-5]"], ["got -5"]),
    (["ks=[a]"], ["ks must hold positive integers, got 'a'"]),
    (["ks=[1.5]"], ["got 1.5"]),
    (["ks=[]"], ["ks is empty"]),
    (["ks=[100000000000]"], ["larger than the maximum"]),
    (["run_name=[a,b]"], ["run_name must be text"]),
    (["timeout_s=0"], ["timeout_s must be a positive number"]),
    (["timeout_s=soon"], ["timeout_s must be a positive number"]),
    (["progress=maybe"], ["progress must be true or false"]),
    (["allow_skipped=2"], ["allow_skipped must be true or false"]),
    (["ranker.k1=abc"], ["ranker", "k1 must be a number, got 'abc'"]),
    (["ranker.min_score=abc"], ["min_score must be a number or null"]),
    (["ranker.b=true"], ["b must be a number"]),
    (["ranker=runfile"], ["missing value for ranker.path"]),
    (
        ["tracking.experiment=${oc.env:EVALPIPE_SURELY_UNSET}"],
        ["cannot resolve the config", "EVALPIPE_SURELY_UNSET"],
    ),
    (["~ranker", "+ranker._target_=plugins_bad_results.Nope"], ["cannot build the ranker"]),
    (["~ranker", "+ranker._target_=plugins_bad_results.ShapeRanker", "+ranker.colour=red"], ["colour"]),
    (["ranker=nope"], ["Could not find 'ranker/nope'", "bm25, bm25_prose", "semantic"]),
    (["+sweep=nope"], ["Could not find 'sweep/nope'", "bm25_grid"]),
    (["foo=1"], ["Could not override 'foo'", "+foo=1", "valid keys: ", "metrics"]),
    (["ranker.nope=1"], ["ranker.nope", "valid keys under 'ranker'", "k1"]),
    (["ks=[1,2"], ["bad override syntax in override 'ks=[1,2'"]),
    (["token_encoding=cl100k"], ["unknown token_encoding 'cl100k'", "cl100k_base"]),
    (["--cfg", "nope"], ["argument --cfg/-c: invalid choice: 'nope'"]),
    (["-m", "ks=[1,2]"], ["unrecognized arguments: ks=[1,2]", "go before the overrides such as ks=[5,10]"]),
]


@pytest.mark.parametrize(("args", "needles"), CONFIG_CASES, ids=[" ".join(a) for a, _ in CONFIG_CASES])
def test_bad_config_is_one_line_exit_2_before_any_run(tmp_path, args, needles):
    setup(tmp_path)
    assert_bad_input(cli(tmp_path, "fixture.path=fx.yaml", *args), tmp_path, *needles)


def test_numeric_run_name_is_a_name(tmp_path):
    setup(tmp_path)
    proc = cli(tmp_path, "fixture.path=fx.yaml", "run_name=2024")
    assert proc.returncode == 0, proc.stderr
    (run,) = runs(tmp_path)
    assert run.info.run_name == "2024" and run.info.status == "FINISHED"


def test_default_objective_is_not_enforced_on_a_single_run_with_other_ks(tmp_path):
    # The documented `fixture=beir ... ks=[10,100]` must keep working without objective=...
    setup(tmp_path)
    proc = cli(tmp_path, "fixture.path=fx.yaml", "ks=[1,10]")
    assert proc.returncode == 0, proc.stderr


# -- fixture and corpus files --------------------------------------------------------------------------

DUP_CASES = FIXTURE + "cases:\n  - id: c9\n    query: q\n    expected: [pkg/a.py]\n"
DUP_QUERY = FIXTURE.replace("    query: zebra\n", "    query: zebra\n    query: zebra stripes\n")
FILE_CASES = [
    (
        "dup cases block",
        {"fx.yaml": DUP_CASES},
        ["fx.yaml:20:", "duplicate key 'cases' (first given at line 3)"],
    ),
    (
        "dup query key",
        {"fx.yaml": DUP_QUERY},
        ["fx.yaml:19:", "duplicate key 'query' (first given at line 18)"],
    ),
    (
        "latin-1 fixture",
        {"fx.yaml": FIXTURE.replace("zebra", "zèbra").encode("latin-1")},
        ["fx.yaml:18:", "UTF-8"],
    ),
    ("fixture is a list", {"fx.yaml": "- id: c1\n  query: q\n"}, ["fx.yaml", "got a list"]),
    ("empty fixture", {"fx.yaml": ""}, ["fx.yaml", "empty"]),
    ("tab indent", {"fx.yaml": FIXTURE.replace("    tier: exact", "\ttier: exact")}, ["fx.yaml:5:", "tabs"]),
    ("yaml syntax", {"fx.yaml": FIXTURE + "  - id: [c5\n"}, ["fx.yaml:", "invalid YAML"]),
    (
        "cases not a list",
        {"fx.yaml": "name: t\ncorpus: corpus.jsonl\ncases: {id: c1}\n"},
        ["'cases' must be"],
    ),
    ("cases empty", {"fx.yaml": "name: t\ncorpus: corpus.jsonl\ncases: []\n"}, ["empty list"]),
    ("no corpus key", {"fx.yaml": FIXTURE.replace("corpus: corpus.jsonl\n", "")}, ["no 'corpus' given"]),
    (
        "corpus is a list",
        {"fx.yaml": FIXTURE.replace("corpus: corpus.jsonl", "corpus: [a]")},
        ["'corpus' must be"],
    ),
    ("unknown top key", {"fx.yaml": FIXTURE + "extra: 1\n"}, ["unknown top-level field(s) ['extra']"]),
    ("dup case id", {"fx.yaml": FIXTURE.replace("id: c2", "id: c1")}, ["fx.yaml:8:", "duplicate case id"]),
    (
        "expected int",
        {"fx.yaml": FIXTURE.replace("[pkg/a.py]", "7")},
        ["fx.yaml:16:", "case 'c4'", "'expected'"],
    ),
    (
        "expected nested",
        {"fx.yaml": FIXTURE.replace("[pkg/a.py]", "[[pkg/a.py]]")},
        ["case 'c4'", "expected ID"],
    ),
    ("grade float", {"fx.yaml": FIXTURE.replace("[pkg/a.py]", "{pkg/a.py: 0.5}")}, ["case 'c4'", "integer"]),
    (
        "expected unknown id",
        {"fx.yaml": FIXTURE.replace("[pkg/a.py]", "[pkg/zz.py]")},
        ["case 'c4'", "not in corpus"],
    ),
    (
        "query int",
        {"fx.yaml": FIXTURE.replace("query: zebra", "query: 404")},
        ["case 'c4'", "query must be text"],
    ),
    ("query empty", {"fx.yaml": FIXTURE.replace("query: zebra", "query: ''")}, ["case 'c4'", "empty query"]),
    (
        "id missing",
        {"fx.yaml": FIXTURE.replace("  - id: c4\n", "  - notes: x\n")},
        ["fx.yaml:16:", "no 'id'"],
    ),
    ("id a list", {"fx.yaml": FIXTURE.replace("id: c4", "id: [c4]")}, ["fx.yaml:16:", "string ID"]),
    (
        "tier misspelt",
        {"fx.yaml": FIXTURE.replace("tier: multi_hop", "tier: multihop")},
        ["did you mean 'multi_hop'"],
    ),
    (
        "tier a list",
        {"fx.yaml": FIXTURE.replace("tier: exact", "tier: [exact]")},
        ["case 'c1'", "tier must be"],
    ),
    (
        "tier with colon",
        {"fx.yaml": FIXTURE.replace("tier: exact", "tier: 'a:b'")},
        ["case 'c1'", "tier must be"],
    ),
    (
        "unknown case field",
        {"fx.yaml": FIXTURE.replace("tier: exact", "tier: exact\n    expect: [x]")},
        ["expect"],
    ),
    (
        "winnow not mapping",
        {"fx.yaml": FIXTURE.replace("tier: exact", "tier: exact\n    winnow_constraints: go")},
        ["case 'c1'", "winnow_constraints must be a mapping"],
    ),
    (
        "citation not bool",
        {"fx.yaml": FIXTURE.replace("tier: exact", "tier: exact\n    citation_required: maybe")},
        ["case 'c1'", "citation_required must be true or false"],
    ),
    ("corpus missing", {"fx.yaml": FIXTURE.replace("corpus.jsonl", "nope.jsonl")}, ["corpus file not found"]),
    ("corpus line not object", {"corpus.jsonl": CORPUS + "[1, 2]\n"}, ["corpus.jsonl:6:", "JSON object"]),
    ("corpus number line", {"corpus.jsonl": "7\n" + CORPUS}, ["corpus.jsonl:1:", "JSON object"]),
    ("corpus bad json", {"corpus.jsonl": CORPUS + '{"id": "x",\n'}, ["corpus.jsonl:6:", "invalid JSON"]),
    ("corpus no id", {"corpus.jsonl": CORPUS + '{"text": "x"}\n'}, ["corpus.jsonl:6:", "no 'id'"]),
    ("corpus null id", {"corpus.jsonl": CORPUS + '{"id": null}\n'}, ["corpus.jsonl:6:", "'id' must be"]),
    (
        "corpus dup id",
        {"corpus.jsonl": CORPUS + CORPUS.splitlines()[0] + "\n"},
        ["corpus.jsonl:6:", "duplicate unit id"],
    ),
    (
        "relations a list",
        {"corpus.jsonl": CORPUS + '{"id": "x", "relations": ["calls"]}\n'},
        ["corpus.jsonl:6:", "'relations' must map"],
    ),
    (
        "relations a string",
        {"corpus.jsonl": CORPUS + '{"id": "x", "relations": {"calls": "pkg/a.py"}}\n'},
        ["corpus.jsonl:6:", "'relations' must map"],
    ),
    (
        "text a dict",
        {"corpus.jsonl": CORPUS + '{"id": "x", "text": {"a": 1}}\n'},
        ["corpus.jsonl:6:", "'text'"],
    ),
    ("corpus empty", {"corpus.jsonl": "\n\n"}, ["corpus.jsonl", "corpus is empty"]),
    (
        "corpus latin-1",
        {"corpus.jsonl": (CORPUS + '{"id": "caf\xe9"}\n').encode("latin-1")},
        ["corpus.jsonl:6:", "UTF-8"],
    ),
]


@pytest.mark.parametrize(("files", "needles"), [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_bad_fixture_or_corpus_names_file_and_line(tmp_path, files, needles):
    setup(tmp_path, files)
    assert_bad_input(cli(tmp_path, "fixture.path=fx.yaml"), tmp_path, *needles)


@pytest.mark.parametrize(
    ("path", "needle"), [("absent.yaml", "fixture file not found"), (".", "is a directory, not a file")]
)
def test_fixture_path_missing_or_a_directory(tmp_path, path, needle):
    setup(tmp_path)
    assert_bad_input(cli(tmp_path, f"fixture.path={path}"), tmp_path, needle)


def test_bom_and_crlf_are_read_as_the_same_fixture(tmp_path):
    setup(tmp_path, {"fx.yaml": ("\ufeff" + FIXTURE).replace("\n", "\r\n").encode("utf-8")})
    (tmp_path / "corpus.jsonl").write_bytes(("\ufeff" + CORPUS).replace("\n", "\r\n").encode("utf-8"))
    proc = cli(tmp_path, "fixture.path=fx.yaml")
    assert proc.returncode == 0, proc.stderr
    (run,) = runs(tmp_path)
    assert run.data.metrics["count/cases"] == 4.0 and run.data.metrics["count/corpus_units"] == 5.0


def test_broken_gzip_corpus(tmp_path):
    setup(tmp_path, {"corpus.jsonl.gz": gzip.compress(CORPUS.encode())[:40]})
    (tmp_path / "fx.yaml").write_text(FIXTURE.replace("corpus.jsonl", "corpus.jsonl.gz"))
    assert_bad_input(cli(tmp_path, "fixture.path=fx.yaml"), tmp_path, "corpus.jsonl.gz", "gzip")


# -- BEIR and TREC collections ---------------------------------------------------------------------------


def beir(tmp: Path, **over: str | bytes) -> Path:
    files: dict[str, str | bytes] = {
        "ds/corpus.jsonl": '{"_id": "d1", "title": "t", "text": "alpha"}\n{"_id": "d2", "text": "beta"}\n',
        "ds/queries.jsonl": '{"_id": "q1", "text": "alpha"}\n{"_id": "q2", "text": "beta"}\n',
        "ds/qrels/test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n",
    }
    files.update({f"ds/{k.replace('__', '/')}": v for k, v in over.items()})
    return setup(tmp, files)


BEIR_CASES = [
    ("queries line not object", {"queries.jsonl": '["q1", "alpha"]\n'}, ["queries.jsonl:1:", "JSON object"]),
    (
        "queries bad json",
        {"queries.jsonl": '{"_id": "q1", "text": "alpha"}\n{"_id": \n'},
        ["queries.jsonl:2:"],
    ),
    ("queries no id", {"queries.jsonl": '{"text": "alpha"}\n'}, ["queries.jsonl:1:", "'_id'"]),
    (
        "qrels bad line",
        {"qrels__test.tsv": "query-id\tcorpus-id\tscore\nq1\td1\n"},
        ["test.tsv:2:", "columns"],
    ),
    ("qrels bad grade", {"qrels__test.tsv": "q1\td1\thigh\n"}, ["test.tsv:1:", "relevance 'high'"]),
    ("qrels latin-1", {"qrels__test.tsv": "q1\td\xe9\t1\n".encode("latin-1")}, ["test.tsv:1:", "UTF-8"]),
    ("qrels empty", {"qrels__test.tsv": "query-id\tcorpus-id\tscore\n"}, ["test.tsv", "no judgements"]),
    ("qrels unknown doc", {"qrels__test.tsv": "q1\tdz\t1\n"}, ["test.tsv", "not in the corpus"]),
    ("corpus line not object", {"corpus.jsonl": '"d1"\n'}, ["corpus.jsonl:1:", "JSON object"]),
]


@pytest.mark.parametrize(("files", "needles"), [c[1:] for c in BEIR_CASES], ids=[c[0] for c in BEIR_CASES])
def test_bad_beir_collection_names_file_and_line(tmp_path, files, needles):
    beir(tmp_path, **files)
    proc = cli(tmp_path, "fixture=beir", f"fixture.path={tmp_path / 'ds'}", "ks=[1,2]")
    assert_bad_input(proc, tmp_path, *needles)


def test_beir_missing_split_lists_the_available_ones(tmp_path):
    beir(tmp_path)
    proc = cli(tmp_path, "fixture=beir", f"fixture.path={tmp_path / 'ds'}", "fixture.qrels_split=dev")
    assert_bad_input(proc, tmp_path, "no qrels/dev.tsv", "available: ['test']")


def test_bad_trec_qrels_fixture(tmp_path):
    setup(tmp_path, {"q.tsv": "q1\talpha\n", "qrels.txt": "q1 0 pkg/a.py 1\nq1 pkg/a.py\n"})
    proc = cli(
        tmp_path,
        "fixture=trec",
        "fixture.qrels=qrels.txt",
        "fixture.queries=q.tsv",
        "fixture.corpus=corpus.jsonl",
    )
    assert_bad_input(proc, tmp_path, "qrels.txt:2:", "expected 'qid 0 docid rel'")


# -- run files (ranker=runfile) ----------------------------------------------------------------------------

RUN_CASES = [
    (
        "trec 5 columns",
        "run.trec",
        TREC_RUN + "c3 Q0 pkg/b.go::Open 1 1.0\n",
        ["run.trec:3:", "got 5 columns"],
    ),
    ("trec bad score", "run.trec", TREC_RUN + "c3 Q0 pkg/b.go::Open 1 high sys\n", ["run.trec:3:", "'high'"]),
    (
        "trec latin-1",
        "run.trec",
        (TREC_RUN + "c3 Q0 caf\xe9 1 1 s\n").encode("latin-1"),
        ["run.trec:3:", "UTF-8"],
    ),
    (
        "jsonl bad json",
        "run.jsonl",
        '{"qid": "c1", "hits": []}\n{"qid": \n',
        ["run.jsonl:2:", "invalid JSON"],
    ),
    (
        "jsonl hits not list",
        "run.jsonl",
        '{"qid": "c1", "hits": "pkg/a.py"}\n',
        ["run.jsonl:1:", "'hits' must be"],
    ),
    (
        "jsonl bad rank",
        "run.jsonl",
        '{"qid": "c1", "docid": "pkg/a.py", "rank": "first"}\n',
        ["run.jsonl:1:", "rank"],
    ),
    ("jsonl id a list", "run.jsonl", '{"qid": "c1", "hits": [{"id": ["a"]}]}\n', ["run.jsonl:1:", "hit id"]),
    (
        "no matching qids",
        "run.trec",
        "q1 Q0 pkg/a.py 1 1.0 s\nq2 Q0 pkg/a.py 1 1.0 s\n",
        ["none of its 2 query IDs"],
    ),
    ("empty run", "run.trec", "\n", ["run.trec", "no lines"]),
]


@pytest.mark.parametrize(
    ("name", "content", "needles"), [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES]
)
def test_bad_run_file_is_refused_before_the_first_case(tmp_path, name, content, needles):
    setup(tmp_path, {name: content})
    proc = cli(tmp_path, "fixture.path=fx.yaml", "ranker=runfile", f"ranker.path={name}")
    assert_bad_input(proc, tmp_path, *needles)


def test_run_file_path_is_a_directory(tmp_path):
    setup(tmp_path, {"runs/x.trec": TREC_RUN})
    proc = cli(tmp_path, "fixture.path=fx.yaml", "ranker=runfile", "ranker.path=runs")
    assert_bad_input(proc, tmp_path, "runs is a directory")


def test_run_file_with_missing_and_unknown_qids_warns_with_counts_and_ids(tmp_path):
    setup(tmp_path, {"run.trec": TREC_RUN + "zz9 Q0 pkg/a.py 1 1.0 sys\n"})
    proc = cli(tmp_path, "fixture.path=fx.yaml", "ranker=runfile", "ranker.path=run.trec")
    assert proc.returncode == 0, proc.stderr
    assert "2 of 4 cases are not in run file" in proc.stderr and "'c3', 'c4'" in proc.stderr
    assert "1 query IDs of run file" in proc.stderr and "'zz9'" in proc.stderr
    report = (tmp_path / "out" / "report.md").read_text()
    assert "2 of 4 cases are not in run file" in report


# -- outcomes: skipped, failed, wrong shapes, unknown IDs, timeout ------------------------------------------

PLUGIN = ["fixture.path=fx.yaml", "~ranker"]


def test_skipped_ranker_exits_3_and_is_marked(tmp_path):
    setup(tmp_path)
    proc = cli(tmp_path, *PLUGIN, "+ranker._target_=plugins_bad_results.UnavailableRanker")
    assert proc.returncode == 3, proc.stderr
    (line,) = evalpipe_lines(proc)
    assert line.startswith("evalpipe: error: ranker UnavailableRanker skipped")
    assert "backend 'vecdb' not installed" in line and "allow_skipped=true" in line
    (run,) = runs(tmp_path)
    assert run.info.status == "FAILED"
    assert "vecdb" in run.data.tags["evalpipe.skipped"]
    assert "skipped" in (tmp_path / "out" / "report.md").read_text()  # the report keeps its shape


def test_skipped_ranker_with_allow_skipped_exits_0(tmp_path):
    setup(tmp_path)
    proc = cli(
        tmp_path, *PLUGIN, "+ranker._target_=plugins_bad_results.UnavailableRanker", "allow_skipped=true"
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = runs(tmp_path)
    assert run.info.status == "FINISHED" and "evalpipe.skipped" in run.data.tags


def test_wrong_result_shapes_fail_the_run_with_the_first_distinct_errors(tmp_path):
    setup(tmp_path)
    proc = cli(tmp_path, *PLUGIN, "+ranker._target_=plugins_bad_results.ShapeRanker")
    assert proc.returncode == 1, proc.stderr
    lines = evalpipe_lines(proc)
    assert lines[0] == "evalpipe: error: run failed: 4 of 4 cases raised a retrieval error; first errors:"
    assert "case c1:" in lines[1] and "returned a single str 'pkg/a.py::merge_settings'" in lines[1]
    assert "case c2:" in lines[2] and "returned a single dict" in lines[2]
    assert "case c3:" in lines[3] and "returned None (a missing return?)" in lines[3]
    assert "1 more distinct" in lines[4]
    (run,) = runs(tmp_path)
    assert run.info.status == "FAILED"
    assert run.data.metrics["count/retrieval_errors"] == 4.0
    cases = [json.loads(x) for x in (tmp_path / "out" / "cases.jsonl").read_text().splitlines()]
    assert "hit whose id is 7" in cases[3]["error"]  # (7, 1.0): an integer ID


def test_a_minority_of_bad_results_is_a_case_error_not_a_failed_run(tmp_path):
    setup(tmp_path)
    proc = cli(
        tmp_path, *PLUGIN, "+ranker._target_=plugins_bad_results.ShapeRanker", "+ranker.bad=[merge_settings]"
    )
    assert proc.returncode == 0, proc.stderr
    (run,) = runs(tmp_path)
    assert run.info.status == "FINISHED" and run.data.metrics["count/retrieval_errors"] == 1.0


def test_non_numeric_score_is_a_case_error(tmp_path):
    setup(tmp_path)
    proc = cli(tmp_path, *PLUGIN, "+ranker._target_=plugins_bad_results.WrongScoreRanker")
    assert proc.returncode == 1
    assert "score 'high'" in proc.stderr and "scores must be numbers" in proc.stderr


def test_ids_outside_the_corpus_are_counted_and_shown(tmp_path):
    setup(tmp_path)
    proc = cli(tmp_path, *PLUGIN, "+ranker._target_=plugins_bad_results.StrangerRanker")
    assert proc.returncode == 0, proc.stderr
    (run,) = runs(tmp_path)
    # Every case returns 2 strangers: 'src/pkg/a.py:merge_settings' and 'other/<first word>'.
    assert run.data.metrics["count/unknown_ids"] == 8.0
    note = "8 returned IDs in 4 cases are not in the corpus"
    assert note in proc.stdout.replace("\n", " ") or note in " ".join(proc.stdout.split())
    report = (tmp_path / "out" / "report.md").read_text()
    assert note in report and "c1: 'src/pkg/a.py:merge_settings'" in report


def test_a_hanging_case_times_out_and_the_run_goes_on(tmp_path):
    setup(tmp_path)
    # a real process: the timed-out search thread is abandoned, and only a process's exit ends it
    proc = cli_process(tmp_path, *PLUGIN, "+ranker._target_=plugins_bad_results.SlowRanker", "timeout_s=1")
    assert proc.returncode == 0, proc.stderr
    (run,) = runs(tmp_path)
    assert run.info.status == "FINISHED" and run.data.metrics["count/retrieval_errors"] == 1.0
    cases = {
        c["case_id"]: c for c in map(json.loads, (tmp_path / "out" / "cases.jsonl").read_text().splitlines())
    }
    assert cases["c4"]["error"] == "timeout after 1s"
    assert "1 of 4 cases raised a retrieval error (scored as misses), e.g. c4: timeout after 1s" in " ".join(
        proc.stdout.split()
    )
    assert cases["c1"]["error"] == "" and cases["c1"]["top"] == '["pkg/a.py::merge_settings"]'
