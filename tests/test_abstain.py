"""Answering nothing: the threshold is chosen on dev only, its figures are what a run would give.

The counts are worked out by hand on small examples; the AUC is checked against scipy's
Mann-Whitney U; the command runs on two real BM25 runs of fixture=flask (dev and test splits).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from evalpipe.abstain import cli
from evalpipe.stats import abstention as ab

ROOT = Path(__file__).resolve().parents[1]

# 6 cases: 4 answerable (scores 9, 7, 5, 2; hits on the first three and the last), 2 unanswerable (3, 1).
EXAMPLE = ab.cases([9, 7, 5, 2, 3, 1], [1, 1, 1, 1, 0, 0], [1, 1, 0, 1, 0, 0])


def test_outcome_counts_by_hand():
    o = ab.outcome(EXAMPLE, 4.0)  # abstain on 2, 3, 1
    assert (o.hits_kept, o.hits_before, o.correctly_empty, o.abstained) == (2, 3, 2, 3)
    assert math.isclose(o.citation_validity, 4 / 6) and math.isclose(o.hit_loss, 1 / 4)
    never = ab.outcome(EXAMPLE, ab.NEVER)
    assert (never.hits_kept, never.correctly_empty, never.abstained) == (3, 0, 0)


def test_choose_citation_takes_the_lowest_best_threshold():
    chosen = ab.choose(EXAMPLE, "citation")
    # candidates: never, 1.5, 2.5, 4, 6, 8, above 9 -> validity 3/6, 4/6, 4/6, 4/6, 3/6, 2/6, 1/6 (by hand)
    assert chosen.threshold == 1.5 and math.isclose(chosen.citation_validity, 4 / 6)


def test_choose_bounded_respects_the_loss():
    # no loss allowed: 2.5 would cost the hit at score 2, so 1.5 (one unanswerable empty) is the best
    assert ab.choose(EXAMPLE, "bounded", max_loss=0.0).threshold == 1.5
    # a quarter of the hits may go: 4.0 empties both unanswerable cases (3 and 1) at the cost of the
    # one hit at 2 (the case at 5 had no hit to lose); 2.5 costs the same hit and empties only one
    assert ab.choose(EXAMPLE, "bounded", max_loss=0.25).threshold == 4.0


def test_auc_equals_mann_whitney():
    rng = np.random.default_rng(3)
    sig = np.round(rng.normal(size=60), 1)  # rounded: ties happen
    ans = rng.random(60) < 0.7
    c = ab.cases(sig, ans, np.ones(60))
    u = mannwhitneyu(sig[ans], sig[~ans]).statistic
    assert math.isclose(ab.auc(c), u / (ans.sum() * (~ans).sum()))


def test_empty_results_count_as_correctly_empty_and_rank_lowest():
    c = ab.cases([float("nan"), 2.0, 1.0], [0, 1, 0], [0, 1, 0])
    assert ab.outcome(c, ab.NEVER).correctly_empty == 1
    assert ab.auc(c) == 1.0


def test_paired_delta_is_the_difference_of_validities():
    delta, lo, hi = ab.paired_delta_ci(EXAMPLE, 4.0, n_resamples=2000)
    assert math.isclose(delta, 4 / 6 - 3 / 6) and lo <= delta <= hi


# --- the command on real runs ----------------------------------------------------------------------


def _run(out: Path, *overrides: str) -> None:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    cmd = [sys.executable, "-m", "evalpipe", "ranker=bm25", "fixture=flask", "tracking.offline=true"]
    proc = subprocess.run(
        [*cmd, f"hydra.run.dir={out}", *overrides], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def flask_runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("abstain")
    runs = {s: base / s for s in ("dev", "test")}
    for split, path in runs.items():
        _run(path, f"fixture.split={split}")
    return runs


def test_choice_on_dev_reported_on_test(flask_runs, tmp_path, capsys):
    out = tmp_path / "a.json"
    assert (
        cli.main(["--dev", str(flask_runs["dev"]), "--test", str(flask_runs["test"]), "--json", str(out)])
        == 0
    )
    got = json.loads(out.read_text())
    dev = cli.read_run(flask_runs["dev"], "top")
    test = cli.read_run(flask_runs["test"], "top")
    # recount from the runs' own rows: the threshold is the dev optimum and the test figures are the
    # test cases' counts at it
    expected = ab.choose(dev.cases, "citation")
    assert got["threshold"] == expected.threshold
    rows = [json.loads(line) for line in (flask_runs["test"] / "cases.jsonl").read_text().splitlines()]
    kept = correct = 0
    for r in rows:
        top = json.loads(r["scores"])[0] if json.loads(r["scores"]) else None
        abstain = top is None or top < expected.threshold
        if r["answerability"] == "unanswerable":
            correct += abstain
        else:
            kept += (not abstain) and r["rag_document_hit"] == 1.0
    assert math.isclose(got["test"]["citation_validity"], (kept + correct) / len(rows))
    # without abstention the figure is the run's own logged citation validity
    logged = json.loads((flask_runs["test"] / "metrics.json").read_text())
    name = next(k for k in logged if k.endswith("citation_validity_rate"))
    assert math.isclose(got["test_no_abstention"]["citation_validity"], logged[name])
    assert 0.5 < got["auc_dev"] <= 1.0 and test.cases.answerable.sum() > 0


def test_choice_uses_dev_only(flask_runs, tmp_path):
    """Changing every test score changes nothing about the threshold."""
    changed = tmp_path / "test"
    shutil.copytree(flask_runs["test"], changed)
    rows = [json.loads(line) for line in (changed / "cases.jsonl").read_text().splitlines()]
    for r in rows:
        r["scores"] = json.dumps([s * -3.0 + 100 for s in json.loads(r["scores"])])
    (changed / "cases.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert (
        cli.main(["--dev", str(flask_runs["dev"]), "--test", str(flask_runs["test"]), "--json", str(a)]) == 0
    )
    assert cli.main(["--dev", str(flask_runs["dev"]), "--test", str(changed), "--json", str(b)]) == 0
    first, second = json.loads(a.read_text()), json.loads(b.read_text())
    assert first["threshold"] == second["threshold"] and first["dev"] == second["dev"]
    assert first["test"] != second["test"]


def test_dev_must_be_the_dev_split(flask_runs, capsys):
    rc = cli.main(["--dev", str(flask_runs["test"]), "--test", str(flask_runs["dev"])])
    err = capsys.readouterr().err
    assert rc == 2 and "the run is on split 'test'; choose on a run with fixture.split=dev" in err
    assert len(err.strip().splitlines()) == 1


def test_bad_folders_are_one_line(tmp_path, capsys, flask_runs):
    assert cli.main(["--dev", str(tmp_path / "nope"), "--test", str(flask_runs["test"])]) == 2
    err = capsys.readouterr().err
    assert "not a folder" in err and len(err.strip().splitlines()) == 1
    old = tmp_path / "old"
    shutil.copytree(flask_runs["dev"], old)
    rows = [json.loads(line) for line in (old / "cases.jsonl").read_text().splitlines()]
    (old / "cases.jsonl").write_text(
        "".join(json.dumps({k: v for k, v in r.items() if k != "scores"}) + "\n" for r in rows)
    )
    assert cli.main(["--dev", str(old), "--test", str(flask_runs["test"])]) == 2
    assert "no 'scores' column" in capsys.readouterr().err
