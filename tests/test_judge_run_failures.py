"""A judged run as a user runs it (`python -m evalpipe ... judge=...`), against real local servers
that misbehave: figures that do not depend on the cache, a judge checked before the first case, a
key echoed back that is written nowhere, a locked cache and a signal that cost no strict result.

The fixture is test_judge_cli's: d2 is a strict miss whose two unlabelled candidates (ranks 1
and 2, Session.merge and merge_settings) are the only pairs that could change a figure; the
server calls a unit relevant iff its ID contains "Session". Measured times are printed (`-s`).
"""

from __future__ import annotations

import base64
import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_helpers import cli_env, default_signals
from conftest import TINY_UNITS
from judge_server import JudgeServer
from test_judge_cli import FIXTURE
from waiting import wait_until

KEY = "sk-echoed-back-7f3a9c1e"
URL_PASSWORD = "pw-in-url-5b2d"


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS))
    (tmp_path / "fx.yaml").write_text(FIXTURE)
    return tmp_path


def base_args(tmp: Path, out: str, url: str, backend: str = "openai") -> list[str]:
    return [
        f"hydra.run.dir={tmp / out}",
        "progress=false",
        "plots=false",
        "ranker=bm25",
        f"fixture.path={tmp / 'fx.yaml'}",
        "ks=[1,5]",
        f"judge={backend}",
        f"judge.base_url={url}",
        "judge.model=m",
        f"judge.cache_dir={tmp / 'judge-cache'}",
        "judge.max_retries=0",
    ]


def env(**extra: str) -> dict[str, str]:
    return cli_env(OPENAI_API_KEY=KEY, ANTHROPIC_API_KEY=KEY, **extra)


def run(tmp: Path, *args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", *args],
        cwd=tmp,
        capture_output=True,
        text=True,
        env=env(),
        timeout=timeout,
    )
    return proc, time.monotonic() - start


def saved(out: Path) -> tuple[dict, dict, dict]:
    """metrics.json, tags.json and run_info.json of a run's output folder."""
    return tuple(json.loads((out / f).read_text()) for f in ("metrics.json", "tags.json", "run_info.json"))


def judged_figures(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if "judged_" in k or k.startswith("judge/coverage")}


def test_same_budget_same_judged_figures_on_an_empty_and_a_warm_cache(tiny):
    with JudgeServer(marker="Session") as server:
        url = server.url + "/v1"
        offline = ["tracking.offline=true", "objective=judged_recall_at_1"]
        cold, _ = run(tiny, *base_args(tiny, "cold", url), "judge.max_calls=1", *offline)
        assert cold.returncode == 0, cold.stderr
        warmup, _ = run(tiny, *base_args(tiny, "all", url), "judge.max_calls=10", *offline)
        assert warmup.returncode == 0, warmup.stderr
        warm, _ = run(tiny, *base_args(tiny, "warm", url), "judge.max_calls=1", *offline)
        assert warm.returncode == 0, warm.stderr
        assert server.questions() == 2  # cold asked 1, the warm-up the other, warm nothing

    m_cold, tags_cold, _ = saved(tiny / "cold")
    m_all, _, _ = saved(tiny / "all")
    m_warm, tags_warm, _ = saved(tiny / "warm")
    # Budget 1 judges the rank-1 candidate of d2 only (Session.merge: relevant), cold or warm.
    assert judged_figures(m_cold) == judged_figures(m_warm)
    assert m_cold["judge/coverage"] == m_warm["judge/coverage"] == 0.5
    assert m_cold["partial_judged_recall_at_1"] == 1.0 and "judged_recall_at_1" not in m_cold
    assert tags_cold["evalpipe.judged"] == tags_warm["evalpipe.judged"] == "partial"
    assert (m_cold["judge/calls"], m_warm["judge/calls"], m_warm["judge/cache_hits"]) == (1, 0, 1)
    # The full budget: full coverage, judged_* names, nothing partial.
    assert m_all["judge/coverage"] == 1.0 and m_all["judged_recall_at_1"] == 1.0
    assert not any(k.startswith("partial_") or "/partial_" in k for k in m_all)
    # Said up front, labelled in the terminal and the report, refused as an objective.
    assert (
        "judge: 2 questions for openai:m at" in cold.stderr
        and "budget 1 (judge.max_calls): 1 will not" in (cold.stderr)
    )
    assert "strict vs judged (PARTIAL: judge coverage below 100%)" in cold.stdout
    assert "≥100.0%" in cold.stdout and "50.0% (1/2)" in cold.stdout
    assert "≥100.0%" in (tiny / "cold" / "report.md").read_text()
    refusal = "evalpipe: warning: objective=judged_recall_at_1 refused: judge coverage of all cases is 50.0%"
    assert refusal in cold.stderr and refusal not in warmup.stderr
    assert "PARTIAL" not in warmup.stdout


def test_an_unreachable_or_hung_judge_is_found_before_the_first_case(tiny):
    refused, took = run(tiny, *base_args(tiny, "o1", "http://127.0.0.1:9/v1"), "tracking.offline=true")
    print(f"\nunreachable judge (port 9): exit {refused.returncode} after {took:.1f} s")
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith("evalpipe: error: judge server http://127.0.0.1:9/v1 (openai:m) cannot be reached")
    assert line.endswith("(or judge.required=false to run with strict figures only)")
    assert not (tiny / "o1" / "run_info.json").exists()  # no run was started

    with JudgeServer(hang="all") as server:
        args = [*base_args(tiny, "o2", server.url + "/v1"), "tracking.offline=true"]
        hung, took = run(tiny, *args)  # the default judge.probe_timeout
        print(f"hung judge (default probe_timeout): exit {hung.returncode} after {took:.1f} s")
        assert hung.returncode == 2
        [line] = hung.stderr.strip().splitlines()
        assert "did not answer within 5 s (judge.probe_timeout)" in line and server.url in line

        # judge.required=false: the run goes on, strict-only, and says so once up front and in the report.
        lenient, took = run(tiny, *args, "judge.required=false", "judge.probe_timeout=1")
        print(f"hung judge, judge.required=false: exit {lenient.returncode} after {took:.1f} s")
    assert lenient.returncode == 0, lenient.stderr
    warnings = [x for x in lenient.stderr.splitlines() if x.startswith("evalpipe: warning:")]
    assert len(warnings) == 1 and "judge.required=false: strict figures only" in warnings[0]
    metrics, tags, info = saved(tiny / "o2")
    assert info["status"] == "FINISHED" and metrics["recall_at_1"] == pytest.approx(2 / 3)
    assert metrics["judge/not_judged"] == 1.0 and tags["evalpipe.judged"] == "none"
    assert "Not judged: judge server" in (tiny / "o2" / "report.md").read_text()
    assert "Not judged: judge server" in lenient.stdout


def _hits(root: Path, secrets: list[str]) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {s}" for s in secrets if s.encode() in data]
    return found


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_a_key_the_server_echoes_is_written_nowhere(tiny, tracking_uri, backend):
    basic = base64.b64encode(f"svc:{URL_PASSWORD}".encode()).decode()  # HTTP Basic, from the URL
    secrets = [KEY, URL_PASSWORD, basic]
    outputs = []
    suffix = "/v1" if backend == "openai" else ""
    with JudgeServer(marker="Session", echo_key=True) as server:
        # Answers whose reasons carry the key, into the MLflow store and the cache.
        ok, _ = run(
            tiny, *base_args(tiny, "ok", server.url + suffix, backend), f"tracking.uri={tracking_uri}"
        )
        outputs.append(ok.stdout + ok.stderr)
        assert ok.returncode == 0, ok.stderr
        assert all(KEY in json.dumps(r["headers"]) for r in server.requests)  # it was sent, and echoed
    with JudgeServer(marker="Session", echo_key=True, question_status=400) as server:
        url = server.url.replace("http://", f"http://svc:{URL_PASSWORD}@") + suffix
        failed, _ = run(tiny, *base_args(tiny, "err", url, backend), f"tracking.uri={tracking_uri}")
        outputs.append(failed.stdout + failed.stderr)
        assert failed.returncode == 0, failed.stderr
        assert all(basic in json.dumps(r["headers"]) for r in server.requests)
        errors = [
            json.loads(x)["error"] for x in (tiny / "err" / "judgements.jsonl").read_text().splitlines()
        ]
        assert errors and all("(HTTP 400)" in e and "you sent" in e for e in errors)
    with JudgeServer(echo_key=True, deny_all=True) as server:
        denied, _ = run(
            tiny, *base_args(tiny, "denied", server.url + suffix, backend), "tracking.offline=true"
        )
        outputs.append(denied.stdout + denied.stderr)
        assert denied.returncode == 2 and "rejected the key (HTTP 401)" in denied.stderr
    assert "***" in (tiny / "ok" / "judgements.jsonl").read_text()  # the echo, masked
    assert _hits(tiny, secrets) == []  # outputs, MLflow store (SQLite + artifacts), judge cache
    assert [s for s in secrets for text in outputs if s in text] == []  # the terminal
    db = sqlite3.connect(tiny / "judge-cache" / "judgements.sqlite")
    assert db.execute("SELECT COUNT(*) FROM judgements WHERE reason LIKE '%***%'").fetchone()[0] == 2


def _hold_lock(path: Path) -> subprocess.Popen:
    """Another process holding the cache's write lock until killed."""
    code = (
        "import sqlite3, sys, time\n"
        "db = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "db.execute('BEGIN EXCLUSIVE')\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_locked_cache_leaves_the_strict_results_saved_and_the_run_finished(tiny, tracking_uri):
    from mlflow.tracking import MlflowClient

    from evalpipe.judge.cache import JudgementCache

    path = tiny / "judge-cache" / "judgements.sqlite"
    JudgementCache(path).close()
    holder = _hold_lock(path)
    try:
        with JudgeServer(marker="Session") as server:
            args = [*base_args(tiny, "out", server.url + "/v1"), f"tracking.uri={tracking_uri}"]
            proc, took = run(tiny, *args, "judge.cache_timeout=2")
            asked = server.questions()
    finally:
        holder.kill()
        holder.wait()
    print(f"\nlocked cache (cache_timeout=2): exit {proc.returncode} after {took:.1f} s")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and asked == 0
    warnings = [x for x in proc.stderr.splitlines() if x.startswith("evalpipe: warning:")]
    assert len(warnings) == 1 and "is locked by another writer (waited 2 s)" in warnings[0]
    assert "let the other run finish, or give this one its own judge.cache_dir" in warnings[0]
    metrics, tags, info = saved(tiny / "out")
    assert info["status"] == "FINISHED" and info["cases_completed"] == 3
    assert metrics["recall_at_1"] == pytest.approx(2 / 3) and tags["evalpipe.judged"] == "none"
    run_ = MlflowClient(tracking_uri=tracking_uri).get_run(info["run_id"])
    assert run_.info.status == "FINISHED" and run_.data.metrics["recall_at_1"] == pytest.approx(2 / 3)


def test_a_corrupt_cache_exits_2_before_the_first_case_with_the_right_hint(tiny):
    (tiny / "judge-cache").mkdir()
    (tiny / "judge-cache" / "judgements.sqlite").write_bytes(b"garbage, not SQLite " * 200)
    with JudgeServer(marker="Session") as server:
        proc, _ = run(tiny, *base_args(tiny, "out", server.url + "/v1"), "tracking.offline=true")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "is not a readable SQLite database" in line and "delete it to start afresh" in line
    assert "writable folder" not in line and not (tiny / "out" / "run_info.json").exists()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_judging_a_hung_server_ends_the_run_at_once(tiny, tracking_uri, sig, code):
    """The server answers the probe, then never a question (the client would wait 120 s x 5 tries)."""
    from mlflow.tracking import MlflowClient

    with JudgeServer(marker="Session", hang="questions") as server:
        args = [
            *base_args(tiny, "out", server.url + "/v1"),
            "judge.timeout=120",
            "judge.max_retries=4",
            f"tracking.uri={tracking_uri}",
        ]
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalpipe", *args],
            cwd=tiny,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env(),
            preexec_fn=default_signals,
        )
        wait_until(
            "the run's second question to the judge", lambda: server.questions() >= 2, proc, poll_s=0.05
        )
        assert server.questions() == 2, "the run never reached the judge"
        sent = time.monotonic()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=30)  # far below one request's 120 s timeout
        took = time.monotonic() - sent
    print(f"\n{signal.Signals(sig).name} while judging: exit {proc.returncode} {took:.2f} s after the signal")
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    info = json.loads((tiny / "out" / "run_info.json").read_text())
    assert info["status"] == "KILLED" and info["cases_completed"] == 3
    metrics = json.loads((tiny / "out" / "metrics.json").read_text())
    assert metrics["recall_at_1"] == pytest.approx(2 / 3)  # the strict results of every case
    assert not any(k.startswith(("judged_", "partial_judged_", "judge/")) for k in metrics)
    run_ = MlflowClient(tracking_uri=tracking_uri).get_run(info["run_id"])
    assert run_.info.status == "KILLED"


def test_a_fully_cached_rerun_contacts_no_judge_and_works_with_the_server_gone(tiny):
    """Issue 32, category 9: the judge is contacted only when a needed judgement is missing."""
    offline = ["tracking.offline=true", "judge.max_calls=10"]
    with JudgeServer(marker="Session") as server:
        url = server.url + "/v1"
        cold, _ = run(tiny, *base_args(tiny, "cold", url), *offline)
        assert cold.returncode == 0, cold.stderr
        assert server.questions() == 2
        before = len(server.requests)
        warm, _ = run(tiny, *base_args(tiny, "warm", url), *offline)
        assert warm.returncode == 0, warm.stderr
        assert len(server.requests) == before  # not even the probe: every judgement was cached
    m_cold, _, _ = saved(tiny / "cold")
    m_warm, _, _ = saved(tiny / "warm")
    assert judged_figures(m_warm) == judged_figures(m_cold) and m_warm["judge/cache_hits"] == 2
    # The server is gone (same URL, nothing listens): the cached judgements still make the figures,
    # with judge.required=true (the default) and false alike.
    for required in ("true", "false"):
        gone, _ = run(tiny, *base_args(tiny, f"gone-{required}", url), *offline, f"judge.required={required}")
        assert gone.returncode == 0, gone.stderr
        assert "evalpipe: warning" not in gone.stderr, gone.stderr
        m_gone, _, _ = saved(tiny / f"gone-{required}")
        assert judged_figures(m_gone) == judged_figures(m_cold), required
