"""`evalpipe gate` and `evalpipe baseline` as a user runs them: real evalpipe runs (plug-in retrievers
whose answers the test chooses) logged to real SQLite MLflow stores, the commands through the CLI's
own entry in the test's process (tests/cli_in_process.py: the same exit status, stdout and stderr
without a new interpreter per command; tests/test_gate_ci.py runs the gate as a real process).

The fixture is generated: 12 `exact` and 12 `concept` cases over the tiny corpus; each retriever
answers every case right or wrong by a JSON file, so every per-case value, mean and delta below is
known by construction (a right answer scores recall_at_5 = 1 and mrr = 1, a wrong one 0).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cli_helpers import cli_env, client_for, free_port
from cli_in_process import run_cli as cli
from conftest import TINY_UNITS

pytestmark = pytest.mark.slow

IDS = [u["id"] for u in TINY_UNITS]
TIERS = ("exact", "concept")


def make_fixture(tmp: Path, name: str = "synth", corpus: str = "corpus.jsonl") -> tuple[Path, list[dict]]:
    cases = [
        {"id": f"{tier}-{i:02d}", "tier": tier, "query": f"{tier} question {i}", "expected": [IDS[i % 5]]}
        for tier in TIERS
        for i in range(12)
    ]
    (tmp / corpus).write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8")
    lines = [f"name: {name}", f"corpus: {corpus}", "cases:"]
    lines += [f"  - {json.dumps(c)}" for c in cases]
    path = tmp / f"{name}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, cases


def answers(tmp: Path, label: str, cases: list[dict], wrong: set[str] = frozenset()) -> Path:
    """Right answers for every case except those of the tiers (or case IDs) in `wrong`."""
    out = {}
    for c in cases:
        right = c["expected"][0]
        bad = c["tier"] in wrong or c["id"] in wrong
        out[c["query"]] = [next(i for i in IDS if i != right)] if bad else [right]
    path = tmp / f"answers-{label}.json"
    path.write_text(json.dumps(out), encoding="utf-8")
    return path


def evaluate(tmp: Path, uri: str, fixture: Path, answer_file: Path, run_dir: str, *extra: str) -> str:
    proc = cli(
        tmp,
        "~ranker",
        "+ranker._target_=plugins_gate.AnswerFileRetriever",
        f"+ranker.path={answer_file}",
        f"fixture.path={fixture}",
        f"tracking.uri={uri}",
        f"hydra.run.dir={tmp / run_dir}",
        "progress=false",
        "plots=false",
        *extra,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads((tmp / run_dir / "run_info.json").read_text())
    return str(info.get("run_id") or "")


def gate(tmp: Path, *args: str, env: dict[str, str] | None = None):
    proc = cli(tmp, "gate", *args, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


@pytest.fixture
def synth(tmp_path):
    fixture, cases = make_fixture(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    good = answers(tmp_path, "good", cases)
    base = evaluate(tmp_path, uri, fixture, good, "base")
    return {"tmp": tmp_path, "uri": uri, "fixture": fixture, "cases": cases, "base": base, "good": good}


def test_runs_log_their_fixture_and_corpus_as_mlflow_datasets(synth):
    tmp, client = synth["tmp"], client_for(synth["uri"])
    run = client.get_run(synth["base"])
    inputs = {
        next(t.value for t in d.tags if t.key == "mlflow.data.context"): d for d in run.inputs.dataset_inputs
    }
    assert set(inputs) == {"fixture", "corpus"}
    fixture_sha = hashlib.sha256(synth["fixture"].read_bytes()).hexdigest()
    corpus_sha = hashlib.sha256((tmp / "corpus.jsonl").read_bytes()).hexdigest()
    fx, corpus = inputs["fixture"].dataset, inputs["corpus"].dataset
    assert (fx.name, fx.digest, fx.source_type) == ("synth", fixture_sha[:36], "local")
    assert json.loads(fx.source) == {"uri": synth["fixture"].resolve().as_uri()}
    assert json.loads(fx.profile) == {
        "cases": 24,
        "tiers": {"concept": 12, "exact": 12},
        "sha256": fixture_sha,
    }
    assert (corpus.name, corpus.digest) == ("synth-corpus", corpus_sha[:36])
    assert json.loads(corpus.profile) == {"units": 5, "sha256": corpus_sha}
    assert json.loads(corpus.source) == {"uri": (tmp / "corpus.jsonl").resolve().as_uri()}
    # The digests are the ones the run's tags carry (what older runs are compared by).
    assert run.data.tags["evalpipe.fixture_sha256"] == fixture_sha
    assert run.data.tags["evalpipe.corpus_sha256"] == corpus_sha
    # The runs table reads runs through search: the inputs are there too.
    exp = client.get_experiment_by_name("evalpipe/synth")
    found = client.search_runs([exp.experiment_id])[0]
    assert sorted(d.dataset.name for d in found.inputs.dataset_inputs) == ["synth", "synth-corpus"]

    # An offline run synced later logs the same inputs.
    off = evaluate(tmp, synth["uri"], synth["fixture"], synth["good"], "offline", "tracking.offline=true")
    assert off == ""
    proc = cli(tmp, "sync", str(tmp / "offline"), "--tracking-uri", synth["uri"])
    assert proc.returncode == 0, proc.stderr
    synced_id = json.loads((tmp / "offline" / "run_info.json").read_text())["uploads"][synth["uri"]]
    synced = client.get_run(synced_id)

    def shape(r):
        return sorted(
            (
                d.dataset.name,
                d.dataset.digest,
                d.dataset.source,
                d.dataset.profile,
                sorted((t.key, t.value) for t in d.tags),
            )
            for d in r.inputs.dataset_inputs
        )

    assert shape(synced) == shape(run)


def test_named_baseline_gates_a_tier_regression_and_logs_the_gate(synth, tmp_path):
    tmp, uri, base = synth["tmp"], synth["uri"], synth["base"]
    env = cli_env(MLFLOW_TRACKING_URI=uri, GITHUB_STEP_SUMMARY=str(tmp / "summary.md"))
    (tmp / "summary.md").write_text("earlier step\n")
    proc = cli(tmp, "baseline", "set", "main", base[:8], env=env)
    assert proc.returncode == 0, proc.stderr
    assert f"baseline main -> run {base}" in proc.stdout and "synth (24 cases)" in proc.stdout
    listed = cli(tmp, "baseline", "list", env=env)
    assert listed.returncode == 0 and f"| main | {base} |" in listed.stdout

    # The pull request breaks every concept case: recall_at_5 on concept 1.0 -> 0.0, overall 1.0 -> 0.5.
    broken = answers(tmp, "broken", synth["cases"], {"concept"})
    cand = evaluate(tmp, uri, synth["fixture"], broken, "cand")
    proc = gate(tmp, "--baseline", "main", "--candidate", cand, "--json", "gate.json", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert "evalpipe gate: FAIL: 4 regressions" in out
    result = json.loads((tmp / "gate.json").read_text())
    rows = {(r["metric"], r["tier"]): r for r in result["rows"]}
    assert (
        rows[("recall_at_5", "concept")]["delta"] == -1.0
        and rows[("recall_at_5", "concept")]["verdict"] == "regression"
    )
    assert (
        rows[("recall_at_5", "overall")]["delta"] == -0.5
        and rows[("recall_at_5", "exact")]["verdict"] == "unchanged"
    )
    assert rows[("recall_at_5", "concept")]["p"] < 0.001  # exact p = 2 / 2^12
    # Every lost case is listed, with its query; nothing was won.
    for i in range(12):
        assert f"lost [concept] concept-{i:02d}: 'concept question {i}'" in out
    assert "12 lost, 0 won, 12 unchanged" in out and "won  [" not in out
    md = (tmp / "gate.md").read_text()
    assert "| recall_at_5 | overall |" not in md  # the failing rows are bold
    assert "| **recall_at_5** | **concept** | **12** | **1.0000** | **0.0000** | **-1.0000** |" in md
    summary = (tmp / "summary.md").read_text()
    assert summary.startswith("earlier step\n") and md in summary

    # The gate run: in the candidate's experiment, linked to both runs; the candidate points at it.
    client = client_for(uri)
    cand_run = client.get_run(cand)
    gate_id = cand_run.data.tags["evalpipe.gate.run"]
    assert cand_run.data.tags["evalpipe.gate.verdict"] == "fail"
    gate_run = client.get_run(gate_id)
    tags = gate_run.data.tags
    assert tags["evalpipe.role"] == "gate" and tags["evalpipe.gate.verdict"] == "fail"
    assert (tags["evalpipe.gate.candidate"], tags["evalpipe.gate.baseline"]) == (cand, base)
    assert tags["evalpipe.gate.baseline_source"] == "store: main"
    assert gate_run.info.experiment_id == cand_run.info.experiment_id and gate_run.info.status == "FINISHED"
    assert f"runs/{base}" in tags["mlflow.note.content"] and f"runs/{cand}" in tags["mlflow.note.content"]
    assert gate_run.data.metrics["gate/regressions"] == 4.0
    # Holm over the gate's rows, and each row's smallest detectable drop, on the gate run.
    assert gate_run.data.params["correction"] == "holm" and tags["evalpipe.gate.correction"] == "holm"
    concept = rows[("recall_at_5", "concept")]
    assert concept["p_adjusted"] >= concept["p"] and (concept["won"], concept["lost"]) == (0, 12)
    assert gate_run.data.metrics["gate/p_adjusted/recall_at_5/concept"] == pytest.approx(
        concept["p_adjusted"]
    )
    assert gate_run.data.metrics["gate/mde/recall_at_5/concept"] == pytest.approx(concept["mde"])
    assert sorted(d.dataset.digest for d in gate_run.inputs.dataset_inputs) == sorted(
        d.dataset.digest for d in cand_run.inputs.dataset_inputs
    )
    names = {a.path for a in client.list_artifacts(gate_id)}
    assert names == {"gate.md", "gate.json"}
    # `compare --experiment` leaves gate runs out (they are not evaluations).
    assert cli(tmp, "compare", "--experiment", "evalpipe/synth", env=env).returncode == 0

    # Moving the baseline: list shows where it was.
    proc = cli(tmp, "baseline", "set", "main", cand, env=env)
    assert proc.returncode == 0 and f"was {base}" in proc.stdout
    assert f"| main | {cand} |" in cli(tmp, "baseline", "list", env=env).stdout
    assert "evalpipe.baseline.main" not in client.get_run(base).data.tags
    assert client.get_run(cand).data.tags["evalpipe.baseline.main"] == "true"


def test_a_tier_lost_and_another_won_fails_and_an_unchanged_run_passes(synth):
    tmp, uri, base = synth["tmp"], synth["uri"], synth["base"]
    env = cli_env(MLFLOW_TRACKING_URI=uri)
    # Baseline B2: exact right, concept wrong. Candidate: exact wrong, concept right. Overall 0.5 = 0.5.
    b2 = evaluate(tmp, uri, synth["fixture"], answers(tmp, "b2", synth["cases"], {"concept"}), "b2")
    swap = evaluate(tmp, uri, synth["fixture"], answers(tmp, "swap", synth["cases"], {"exact"}), "swap")
    proc = gate(
        tmp, "--baseline", b2, "--candidate", swap, "--metrics", "recall_at_5", "--json", "g.json", env=env
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["tier"]: r for r in json.loads((tmp / "g.json").read_text())["rows"]}
    assert rows["overall"]["delta"] == 0.0 and rows["overall"]["verdict"] == "unchanged"
    assert rows["exact"]["verdict"] == "regression" and rows["concept"]["verdict"] == "improved"
    assert "FAIL: 1 regression (recall_at_5 on synth/exact)" in proc.stdout

    # The same retriever again: every case unchanged, exit 0.
    again = evaluate(tmp, uri, synth["fixture"], synth["good"], "again")
    proc = gate(tmp, "--baseline", base, "--candidate", again, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "evalpipe gate: PASS" in proc.stdout and "0 lost, 0 won, 24 unchanged" in proc.stdout

    # Two concept cases lost (delta -2/12 on concept, -2/24 overall): beyond the allowed drop, within noise.
    two = evaluate(
        tmp, uri, synth["fixture"], answers(tmp, "two", synth["cases"], {"concept-00", "concept-01"}), "two"
    )
    proc = gate(tmp, "--baseline", base, "--candidate", two, "--json", "two.json", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {(r["metric"], r["tier"]): r for r in json.loads((tmp / "two.json").read_text())["rows"]}
    concept = rows[("recall_at_5", "concept")]
    assert concept["delta"] == pytest.approx(-2 / 12) and concept["verdict"] == "noise"
    assert concept["p"] == pytest.approx(0.5, abs=0.02)  # exact: 2 same-sign flips of 4 patterns
    assert f"{concept['p']:.4f}" in proc.stdout and "drop within noise" in proc.stdout


def test_a_baseline_on_another_fixture_or_corpus_exits_2(synth):
    tmp, uri, base = synth["tmp"], synth["uri"], synth["base"]
    env = cli_env(MLFLOW_TRACKING_URI=uri, GITHUB_STEP_SUMMARY=str(tmp / "summary.md"))
    # Another fixture of the same name: one query reworded.
    other = tmp / "other"
    other.mkdir()
    fixture2, cases2 = make_fixture(other)
    text = fixture2.read_text().replace("concept question 3", "concept question three")
    fixture2.write_text(text)
    cand = evaluate(tmp, uri, fixture2, answers(other, "good", [
        {**c, "query": c["query"].replace("concept question 3", "concept question three")} for c in cases2
    ]), "cand-fixture")  # fmt: skip
    proc = gate(tmp, "--baseline", base, "--candidate", cand, env=env)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()[-1]
    assert err.startswith(
        "evalpipe gate: cannot compare: the baseline and candidate were not measured on the same data"
    )
    old_sha = hashlib.sha256(synth["fixture"].read_bytes()).hexdigest()[:12]
    new_sha = hashlib.sha256(fixture2.read_bytes()).hexdigest()[:12]
    assert f"synth: fixture sha256 differs: baseline {old_sha} (read from inputs), candidate {new_sha}" in err
    assert "corpus sha256 differs" not in err and "--allow-different-data" in err
    assert "cannot compare" in (tmp / "summary.md").read_text()

    # The same fixture file, its corpus changed (one unit's text edited) between the runs.
    corpus = tmp / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("module a helpers", "module a helpers and more"))
    cand2 = evaluate(tmp, uri, synth["fixture"], synth["good"], "cand-corpus")
    proc = gate(tmp, "--baseline", base, "--candidate", cand2, env=env)
    assert proc.returncode == 2 and "synth: corpus sha256 differs" in proc.stderr
    assert "fixture sha256 differs" not in proc.stderr
    # `evalpipe compare` reads the same digests and says so.
    proc = cli(tmp, "compare", "--runs", base, cand2, env=env)
    assert proc.returncode == 0 and "the runs were not measured on the same data" in proc.stderr
    new_corpus = hashlib.sha256(corpus.read_bytes()).hexdigest()[:12]
    assert f"/ corpus {new_corpus}: {cand2[:8]}" in " ".join(proc.stderr.split())  # rich wraps it
    # Compared anyway when asked, and flagged.
    proc = gate(tmp, "--baseline", base, "--candidate", cand2, "--allow-different-data", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "compared on DIFFERENT DATA (--allow-different-data)" in proc.stdout
    assert "Warning: compared on different data" in (tmp / "gate.md").read_text()
    gate_run = client_for(uri).get_run(client_for(uri).get_run(cand2).data.tags["evalpipe.gate.run"])
    assert gate_run.data.tags["evalpipe.gate.different_data"] == "true"


def test_the_exported_baseline_gates_with_no_tracking_server(synth):
    tmp, uri, base = synth["tmp"], synth["uri"], synth["base"]
    proc = cli(tmp, "baseline", "export", base, "-o", "eval/baseline.json", "--tracking-uri", uri)
    assert proc.returncode == 0, proc.stderr
    assert "wrote eval/baseline.json" in proc.stdout and "synth (24 cases)" in proc.stdout
    doc = json.loads((tmp / "eval" / "baseline.json").read_text())
    entry = doc["fixtures"][0]
    assert (
        entry["run_id"] == base
        and entry["data"]["fixture_sha256"] == hashlib.sha256(synth["fixture"].read_bytes()).hexdigest()
    )
    assert len(entry["cases"]) == 24 and entry["figures"]["recall_at_5"] == 1.0
    assert {c["recall_at_5"] for c in entry["cases"]} == {1.0}

    # CI: an offline candidate, the tracking URI pointing at a server that is not there.
    dead = f"http://127.0.0.1:{free_port()}"
    broken = answers(tmp, "broken", synth["cases"], {"exact"})
    evaluate(tmp, uri, synth["fixture"], broken, "pr", "tracking.offline=true")
    env = cli_env(MLFLOW_TRACKING_URI=dead)
    proc = gate(tmp, "--baseline", "eval/baseline.json", "--candidate", "pr", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "lost [exact] exact-00: 'exact question 0'" in proc.stdout
    assert "not logged to MLflow: the candidate is in no tracking store" in proc.stdout
    assert "FAIL" in (tmp / "gate.md").read_text()
    unchanged = evaluate(tmp, uri, synth["fixture"], synth["good"], "pr2", "tracking.offline=true")
    assert unchanged == ""
    proc = gate(tmp, "--baseline", "eval/baseline.json", "--candidate", "pr2", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_runs_logged_before_dataset_inputs_are_compared_by_their_tags(synth):
    """A run from an older evalpipe: the sha256 tags and cases.json, no dataset inputs."""
    import mlflow

    tmp, uri, base = synth["tmp"], synth["uri"], synth["base"]
    client = client_for(uri)
    current = client.get_run(base)
    table = json.loads(Path(client.download_artifacts(base, "cases.json", str(tmp))).read_text())
    keep = ("evalpipe.fixture", "evalpipe.fixture_sha256", "evalpipe.corpus_sha256", "evalpipe.objective")
    old = client.create_run(
        current.info.experiment_id, run_name="old", tags={k: current.data.tags[k] for k in keep}
    )
    mlflow.set_tracking_uri(uri)
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    mlflow.log_table(
        {k: [r[k] for r in rows] for k in table["columns"]}, "cases.json", run_id=old.info.run_id
    )
    client.set_terminated(old.info.run_id)
    assert not client.get_run(old.info.run_id).inputs.dataset_inputs
    proc = gate(tmp, "--baseline", old.info.run_id, "--candidate", base, "--tracking-uri", uri, "--no-log")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "24 unchanged" in proc.stdout
    # ...and an old run on other data is still refused, its digest read from its tags.
    other = client.create_run(current.info.experiment_id, run_name="old-other", tags={
        **{k: current.data.tags[k] for k in keep}, "evalpipe.corpus_sha256": "0" * 64})  # fmt: skip
    mlflow.log_table(
        {k: [r[k] for r in rows] for k in table["columns"]}, "cases.json", run_id=other.info.run_id
    )
    client.set_terminated(other.info.run_id)
    proc = gate(tmp, "--baseline", other.info.run_id, "--candidate", base, "--tracking-uri", uri, "--no-log")
    assert proc.returncode == 2
    assert "corpus sha256 differs: baseline 000000000000 (read from tags)" in proc.stderr


def test_a_suite_run_is_gated_fixture_by_fixture(tmp_path):
    """Suite runs built by hand: a parent run and, per fixture, a real evalpipe run as its child."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = cli_env(MLFLOW_TRACKING_URI=uri)
    fx_a, cases_a = make_fixture(tmp_path, "alpha", "alpha.jsonl")
    fx_b, cases_b = make_fixture(tmp_path, "beta", "beta.jsonl")
    client = client_for(uri)

    def suite(label: str, wrong_b: set[str]) -> str:
        a = evaluate(tmp_path, uri, fx_a, answers(tmp_path, f"{label}-a", cases_a), f"{label}-a")
        b = evaluate(tmp_path, uri, fx_b, answers(tmp_path, f"{label}-b", cases_b, wrong_b), f"{label}-b")
        exp = client.get_experiment_by_name("evalpipe/suite") or client.get_experiment(
            client.create_experiment("evalpipe/suite")
        )
        parent = client.create_run(
            exp.experiment_id, run_name=f"suite {label}", tags={"evalpipe.role": "suite"}
        )
        for child in (a, b):
            client.set_tag(child, "mlflow.parentRunId", parent.info.run_id)
        client.set_terminated(parent.info.run_id)
        return parent.info.run_id

    base = suite("base", set())
    cand = suite("cand", {"concept"})
    proc = gate(
        tmp_path,
        "--baseline",
        base,
        "--candidate",
        cand,
        "--metrics",
        "recall_at_5",
        "--json",
        "g.json",
        env=env,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads((tmp_path / "g.json").read_text())
    verdicts = {(r["fixture"], r["tier"]): r["verdict"] for r in result["rows"]}
    assert verdicts == {
        ("alpha", "overall"): "unchanged",
        ("alpha", "exact"): "unchanged",
        ("alpha", "concept"): "unchanged",
        ("beta", "overall"): "regression",
        ("beta", "exact"): "unchanged",
        ("beta", "concept"): "regression",
    }
    assert "| fixture | metric | tier |" in (tmp_path / "gate.md").read_text()
    assert "beta: cases lost and won on recall_at_5: 12 lost, 0 won" in proc.stdout
    # The suite exported and gated from the file: the same verdicts.
    assert cli(tmp_path, "baseline", "export", base, "-o", "suite.json", env=env).returncode == 0
    assert [f["fixture"] for f in json.loads((tmp_path / "suite.json").read_text())["fixtures"]] == [
        "alpha",
        "beta",
    ]
    proc = gate(
        tmp_path,
        "--baseline",
        "suite.json",
        "--candidate",
        cand,
        "--metrics",
        "recall_at_5",
        "--json",
        "f.json",
        env=env,
    )
    assert proc.returncode == 1
    assert [r["verdict"] for r in json.loads((tmp_path / "f.json").read_text())["rows"]] == [
        r["verdict"] for r in result["rows"]
    ]
    # A single fixture run against the suite: the candidate lacks beta -> cannot compare.
    alpha_only = client.search_runs(
        [client.get_experiment_by_name("evalpipe/alpha").experiment_id],
        order_by=["attributes.start_time DESC"],
    )[0]
    proc = gate(tmp_path, "--baseline", base, "--candidate", alpha_only.info.run_id, env=env)
    assert proc.returncode == 2 and "has no run on beta" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "deadbeef00", "--candidate", "cand"], "no run ID starts with 'deadbeef00'"),
        (
            ["--baseline", "nightly", "--candidate", "cand"],
            "no baseline named 'nightly' in this tracking store",
        ),
        (
            ["--baseline", "missing.json", "--candidate", "cand"],
            "--baseline 'missing.json': no such file or directory",
        ),
        (["--baseline", "bad.json", "--candidate", "cand"], "bad.json:1: not valid JSON"),
        (
            ["--baseline", "base", "--candidate", "cand", "--rules", "rules.yaml"],
            r"rules.yaml: unknown rule(s) ['threshold']",
        ),
        (["--baseline", "base", "--candidate", "cand", "--alpha", "2"], "flags: alpha must be between"),
        (["--baseline", "base", "--candidate", "cand", "--metrics", "ndcg_at_7"], "no per-case 'ndcg_at_7'"),
        (["--baseline", "base", "--candidate", "empty"], "no saved run (run_info.json)"),
    ],
)
def test_bad_input_exits_2_with_one_line(synth, args, message):
    tmp, uri = synth["tmp"], synth["uri"]
    (tmp / "bad.json").write_text("{not json")
    (tmp / "rules.yaml").write_text("threshold: 0.1\n")
    (tmp / "empty").mkdir(exist_ok=True)
    args = [synth["base"] if a == "base" else str(tmp / "base") if a == "cand" else a for a in args]
    proc = gate(tmp, *args, "--tracking-uri", uri)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and " INFO mlflow" not in ln]
    assert len(lines) == 1 and lines[0].startswith("evalpipe gate: cannot compare: "), lines
    assert message in lines[0]


def test_baseline_commands_refuse_bad_input(synth):
    tmp, uri = synth["tmp"], synth["uri"]
    env = cli_env(MLFLOW_TRACKING_URI=uri)
    proc = cli(tmp, "baseline", "set", "bad name!", synth["base"], env=env)
    assert proc.returncode == 2 and "baseline name 'bad name!'" in proc.stderr
    proc = cli(tmp, "baseline", "set", "abcdef12", synth["base"], env=env)
    assert proc.returncode == 2 and "looks like a run ID prefix" in proc.stderr
    proc = cli(tmp, "baseline", "list", env=cli_env(MLFLOW_TRACKING_URI=f"sqlite:///{tmp / 'none.db'}"))
    assert proc.returncode == 2 and "no MLflow store at" in proc.stderr and not (tmp / "none.db").exists()
    assert "no named baselines" in cli(tmp, "baseline", "list", env=env).stdout
    helps = [cli(tmp, *cmd, "--help").stdout for cmd in (["gate"], ["baseline"], ["baseline", "export"])]
    assert "Exit status: 0 no regression, 1 regression, 2 cannot compare" in helps[0]
    assert "--allow-different-data" in helps[0] and "--max-drop-for" in helps[0]
    assert "evalpipe baseline set main" in helps[1] and "--output" in helps[2]


def test_a_run_that_did_not_finish_is_not_gated(synth):
    tmp, uri = synth["tmp"], synth["uri"]
    client = client_for(uri)
    exp = client.get_experiment_by_name("evalpipe/synth")
    failed = client.create_run(exp.experiment_id, run_name="crashed")
    client.set_terminated(failed.info.run_id, status="FAILED")
    proc = gate(
        tmp, "--baseline", synth["base"], "--candidate", failed.info.run_id[:10], "--tracking-uri", uri
    )
    assert proc.returncode == 2
    assert f"run crashed ({failed.info.run_id}) is FAILED, not FINISHED" in proc.stderr
    # A sweep parent: its points all measured the same fixture, so there is no one run to gate.
    paths = f"{synth['good']},{answers(tmp, 'b', synth['cases'], {'exact'})}"
    sweep = ["-m", "~ranker", "+ranker._target_=plugins_gate.AnswerFileRetriever", f"+ranker.path={paths}"]
    sweep += [f"fixture.path={synth['fixture']}", f"tracking.uri={uri}", "progress=false", "plots=false"]
    for n in (1, 2):  # the second sweep reuses both points
        proc = cli(tmp, *sweep, f"hydra.sweep.dir={tmp / f'sweep{n}'}")
        assert proc.returncode == 0, proc.stderr[-2000:]
    runs = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"])
    parent = next(r for r in runs if r.data.tags.get("evalpipe.role") == "parent")
    reused = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(reused) == 2 and all("evalpipe.reused_run_id" in r.data.tags for r in reused)
    for r in reused:  # a reused point shows the data of the run it reuses
        names = sorted(d.dataset.name for d in r.inputs.dataset_inputs)
        assert names == ["synth", "synth-corpus"], r.info.run_name
    proc = gate(tmp, "--baseline", synth["base"], "--candidate", parent.info.run_id, "--tracking-uri", uri)
    assert proc.returncode == 2 and "has two runs on fixture synth" in proc.stderr
    assert "gate one of them by its run ID" in proc.stderr
