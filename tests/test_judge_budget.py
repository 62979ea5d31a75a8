"""The judge's budget, coverage, cache key and circuit breaker, against a real local server.

In-process (the judge's own API), with the deterministic server of tests/judge_server.py:
a unit is relevant iff its ID contains "merge".
"""

from __future__ import annotations

import io
import os
import sqlite3

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.judge.asking import Judge
from evalpipe.judge.backends import make_backend
from evalpipe.judge.cache import CacheError, JudgementCache
from evalpipe.judge.probe import JudgeUnavailable, probe
from evalpipe.judge.progress import JudgeBar, size_line
from evalpipe.judge.prompt import load_prompt
from evalpipe.judge.run import NotJudged, order_pairs, run_judge
from evalpipe.judge.settings import JudgeSettings
from evalpipe.safety.secrets import mask_text
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import score_results
from evalpipe.scoring.tokens import get_token_counter
from judge_server import JudgeServer

COUNT = get_token_counter().count


def hits(ids):
    return tuple(Hit(i) for i in ids)


# Three misses. c1 (exact): expected not found; candidates x.py::merge_a (relevant), o.py::p, o.py::q.
# c2 (concept): expected at rank 3; above it o.py::r, m.py::merge_b (relevant).
# c3 (concept): expected not found; o.py::s, o.py::t. c4 (exact): a hit at rank 1, nothing to judge.
RESULTS = [
    CaseResult("c1", "exact", "q1", {"e.py::1": 1}, hits(["x.py::merge_a", "o.py::p", "o.py::q"]), 1, 1),
    CaseResult("c2", "concept", "q2", {"e.py::2": 1}, hits(["o.py::r", "m.py::merge_b", "e.py::2"]), 1, 1),
    CaseResult("c3", "concept", "q3", {"e.py::3": 1}, hits(["o.py::s", "o.py::t"]), 1, 1),
    CaseResult("c4", "exact", "q4", {"o.py::p": 1}, hits(["o.py::p", "x.py::merge_a"]), 1, 1),
]
UNITS = {
    u: Unit(u, "function", text=f"body of {u}")
    for u in ["x.py::merge_a", "o.py::p", "o.py::q", "o.py::r", "m.py::merge_b", "o.py::s", "o.py::t"]
    + ["e.py::1", "e.py::2", "e.py::3"]
}
TIERS = ["exact", "concept"]
# The fixed order: rank 1 of every miss (c1 merge_a, c2 r, c3 s), then rank 2 (c1 p, c2 merge_b, c3 t),
# then rank 3 (c1 q). Seven figure-changing pairs: 3 in exact (c1), 4 in concept (c2, c3).
ORDER = [
    ("c1", "x.py::merge_a"),
    ("c2", "o.py::r"),
    ("c3", "o.py::s"),
    ("c1", "o.py::p"),
    ("c2", "m.py::merge_b"),
    ("c3", "o.py::t"),
    ("c1", "o.py::q"),
]


@pytest.fixture
def server():
    with JudgeServer() as srv:
        yield srv


def make_judge(url: str, tmp_path, backend: str = "openai", **kw) -> Judge:
    options = {"model": "m", "cache_dir": str(tmp_path / "cache"), "timeout": 10.0, "max_retries": 0}
    settings = JudgeSettings(backend=backend, base_url=url, **{**options, **kw})
    return Judge(settings, make_backend(settings), load_prompt(settings.prompt))


def judged_run(server, tmp_path, **kw):
    scores = score_results(RESULTS, [1, 3], ["recall", "mrr"], tiers=TIERS)
    return run_judge(make_judge(server.url + "/v1", tmp_path, **kw), RESULTS, scores, UNITS, COUNT, TIERS)


def test_the_budget_is_spent_rank_by_rank_in_case_order():
    scores = score_results(RESULTS, [1, 3], ["recall"], tiers=TIERS)
    from evalpipe.judge.pairs import rescue_pairs

    pairs = rescue_pairs(RESULTS, scores.first_rank, 3, pool=False)
    ordered = order_pairs(pairs, {(p.case_id, p.unit_id) for p in pairs}, RESULTS)
    assert [(p.case_id, p.unit_id) for p in ordered] == ORDER


def test_same_budget_same_figures_on_an_empty_and_a_warm_cache(server, tmp_path):
    cold = judged_run(server, tmp_path, max_calls=4)
    # The first 4 of ORDER: merge_a (relevant), r, s, p. c1 is rescued at rank 1; c2 and c3 are not.
    assert cold.stats.calls == 4 and server.questions() == 4
    assert cold.coverage.overall.judged == 4 and cold.coverage.overall.pairs == 7
    assert cold.coverage.per_tier["exact"].judged == 2 and cold.coverage.per_tier["concept"].judged == 2
    # Partial: logged under partial_ names, never as judged_. R@1: c1 rescued -> 1/4 (c4 hit) + 1/4.
    m = cold.metrics
    assert "judged_recall_at_1" not in m and m["partial_judged_recall_at_1"] == pytest.approx(2 / 4)
    assert m["judge/coverage"] == pytest.approx(4 / 7)
    assert m["judge/coverage/exact"] == pytest.approx(2 / 3) and m["judge/coverage/concept"] == 0.5
    assert cold.tags["evalpipe.judged"] == "partial"

    full = judged_run(server, tmp_path, max_calls=100)  # warms the cache with every verdict
    assert (full.stats.calls, full.stats.cache_hits) == (3, 4)
    assert full.coverage.overall.full and full.metrics["judged_recall_at_1"] == pytest.approx(2 / 4)
    # c2 is rescued at rank 2 only (MRR 1/3 -> 1/2): full judged MRR (1 + 1/2 + 0 + 1) / 4.
    assert full.metrics["judged_mrr"] == pytest.approx(2.5 / 4)
    assert "partial_judged_mrr" not in full.metrics

    warm = judged_run(server, tmp_path, max_calls=4)  # everything cached: the budget still decides
    assert (warm.stats.calls, warm.stats.cache_hits) == (0, 4)
    assert {k: v for k, v in warm.metrics.items() if not k.startswith("judge/")} == {
        k: v for k, v in cold.metrics.items() if not k.startswith("judge/")
    }
    assert warm.metrics["judge/coverage"] == cold.metrics["judge/coverage"]
    assert warm.coverage == cold.coverage


def test_partial_figures_are_marked_in_the_report_and_refused_as_an_objective(server, tmp_path):
    out = judged_run(server, tmp_path, max_calls=4)
    files = {"report.md": "# report\n"}
    out.add_files(files)
    report = files["report.md"]
    assert "judge/coverage 57.1% (4 of 7 pairs; exact 66.7%, concept 50.0%)" in report
    assert "| all | 4 |  25.0% | ≥50.0% |" in report  # strict R@1 1/4; judged a lower bound
    assert "lower bound" in report and "partial_judged_*" in report
    assert "covers 4 of 7 questions" in report
    value, refused = out.objective("judged_recall_at_1")
    assert value is None and "refused: judge coverage of all cases is 57.1% (4 of 7 pairs)" in refused
    assert "judge.allow_partial=true" in refused
    assert out.objective("recall_at_1") == (None, "")  # not a judged figure: the app's business
    lenient = judged_run(server, tmp_path, max_calls=4, allow_partial=True)
    assert lenient.objective("judged_recall_at_1") == (pytest.approx(0.5), "")
    assert lenient.objective("tier/exact/partial_judged_recall_at_1") == (pytest.approx(1.0), "")
    # Per case, judged figures only where every candidate that could change them was judged (none here).
    table = {"case_id": ["c1", "c2", "c3", "c4"]}
    out.add_columns(table)
    assert table["judged_recall_at_1"] == [None, None, None, 1.0]


def test_a_tier_with_nothing_judged_shows_no_judged_figure(server, tmp_path):
    out = judged_run(server, tmp_path, max_calls=1)  # only c1's merge_a: concept has 0 of 4 judged
    assert out.coverage.per_tier["concept"].none
    assert not any(k.startswith("tier/concept/") and "judged_" in k for k in out.metrics)
    assert "tier/exact/partial_judged_recall_at_1" in out.metrics
    files = {"report.md": ""}
    out.add_files(files)
    row = next(line for line in files["report.md"].splitlines() if line.startswith("| concept"))
    assert row.count("—") == 3 and "0.0% (0/4)" in row


def test_the_cache_key_holds_excerpt_size_server_prompt_and_model(server, tmp_path):
    first = judged_run(server, tmp_path)
    assert first.stats.calls == 7
    assert judged_run(server, tmp_path).stats.calls == 0
    assert judged_run(server, tmp_path, excerpt_tokens=2).stats.calls == 7  # another excerpt shown
    assert judged_run(server, tmp_path, model="other").stats.calls == 7
    other_url = make_judge(server.url.replace("127.0.0.1", "localhost") + "/v1", tmp_path)
    scores = score_results(RESULTS, [1, 3], ["recall", "mrr"], tiers=TIERS)
    again = run_judge(other_url, RESULTS, scores, UNITS, COUNT, TIERS)
    assert again.stats.calls == 7  # another server: not the same judge
    (tmp_path / "p.txt").write_text(load_prompt("relevance_v1").text + "\nBe strict.\n")
    assert judged_run(server, tmp_path, prompt=str(tmp_path / "p.txt")).stats.calls == 7
    rows = sqlite3.connect(tmp_path / "cache" / "judgements.sqlite").execute(
        "SELECT COUNT(*), COUNT(DISTINCT server), COUNT(DISTINCT excerpt_tokens) FROM judgements"
    )
    assert rows.fetchone() == (7 * 5, 2, 2)


def test_the_circuit_breaker_stops_after_failures_in_a_row(server, tmp_path):
    ids = [f"b{i}.py::broken" for i in range(8)]
    results = [CaseResult("c1", "exact", "q", {"e.py::1": 1}, hits(["x.py::merge_a", *ids]), 1, 1)]
    units = {u: Unit(u, "function", text=u) for u in ["x.py::merge_a", "e.py::1", *ids]}
    scores = score_results(results, [10], ["recall", "mrr"], tiers=["exact"])
    judge = make_judge(server.url + "/v1", tmp_path, concurrency=1, max_failures=3)
    out = run_judge(judge, results, scores, units, COUNT, ["exact"])
    # merge_a succeeds, then three 500s in a row: stop. Five questions never sent.
    assert (out.stats.calls, out.stats.errors, out.stats.not_asked) == (4, 3, 5)
    assert server.questions() == 4
    assert out.stats.stopped.startswith("judging stopped after 3 failures in a row (judge.max_failures=3;")
    assert out.stats.stopped.endswith("1 of 9 questions judged, 3 errors, 5 not asked")
    assert "budget" not in " ".join(out.stats.stopped.split()[:6])
    assert out.coverage.overall.judged == 1 and out.tags["evalpipe.judged"] == "partial"


def test_a_rejected_key_stops_without_claiming_the_budget_was_reached(tmp_path):
    with JudgeServer(deny_all=True) as srv:
        scores = score_results(RESULTS, [1, 3], ["recall", "mrr"], tiers=TIERS)
        judge = make_judge(srv.url + "/v1", tmp_path, concurrency=1)
        out = run_judge(judge, RESULTS, scores, UNITS, COUNT, TIERS)
    assert out.stats.stopped.startswith("judging stopped after AuthenticationError (HTTP 401)")
    files = {"report.md": ""}
    out.add_files(files)
    assert "The budget judge.max_calls" not in files["report.md"]  # stopped, not out of budget
    assert "Judging stopped after AuthenticationError (HTTP 401)" in files["report.md"]


def test_the_probe_names_the_server_and_the_fix(tmp_path):
    def settings(url, model="m", **kw):
        return JudgeSettings(backend="openai", model=model, base_url=url, max_retries=3, **kw)

    with pytest.raises(JudgeUnavailable, match=r"judge server http://127.0.0.1:9/v1 \(openai:m\) cannot be"):
        probe(settings("http://127.0.0.1:9/v1"))
    hung = r"did not answer within 1 s \(judge.probe_timeout\)"
    with JudgeServer(hang="all") as srv, pytest.raises(JudgeUnavailable, match=hung):
        probe(settings(srv.url + "/v1", probe_timeout=1.0))
    denied = r"rejected the key \(HTTP 401\): export OPENAI_API_KEY"
    with JudgeServer(deny_all=True) as srv, pytest.raises(JudgeUnavailable, match=denied):
        probe(settings(srv.url + "/v1", api_key_env="OPENAI_API_KEY"))
    with JudgeServer() as srv:
        with pytest.raises(JudgeUnavailable, match=r"has no model 'missing' .*HTTP 404.*check judge.model"):
            probe(settings(srv.url + "/v1", model="missing"))
        probe(settings(srv.url + "/v1"))  # answers: no error
        assert srv.calls() == 2 and srv.questions() == 0
        probe(JudgeSettings(backend="anthropic", model="m", base_url=srv.url))
    # Credentials in the URL are masked in the line.
    with pytest.raises(JudgeUnavailable) as err:
        probe(settings("http://bob:hunter22@127.0.0.1:9/v1"))
    assert "hunter22" not in str(err.value) and "http://***@127.0.0.1:9/v1" in str(err.value)


def test_keys_from_the_environment_are_registered_before_the_first_request(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret-1")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-env-secret-2")
    monkeypatch.setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Api-Key: hdr-secret-3\nX-Team: search")
    s = JudgeSettings(
        backend="openai",
        model="m",
        base_url="http://svc:pw-secret-4@127.0.0.1:9/v1",
        api_key_env="OPENAI_API_KEY",
        headers={"Authorization": "Bearer bearer-secret-5", "X-Trace": "visible"},
    )
    s.register_secrets()
    text = "sk-env-secret-1 tok-env-secret-2 hdr-secret-3 pw-secret-4 bearer-secret-5 search visible"
    assert mask_text(text) == "*** *** *** *** *** search visible"


def test_an_unusable_cache_says_which_and_how_to_fix_it(server, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "judgements.sqlite").write_bytes(b"this is not a database, just text" * 100)
    with pytest.raises(CacheError, match=r"not a readable SQLite database .* delete it to start afresh"):
        JudgementCache(bad / "judgements.sqlite")
    foreign = tmp_path / "foreign" / "judgements.sqlite"
    foreign.parent.mkdir()
    sqlite3.connect(foreign).execute("CREATE TABLE judgements (id INTEGER, verdict TEXT)").connection.commit()
    with pytest.raises(CacheError, match=r"another layout \(columns id, verdict\): it is not an evalpipe"):
        JudgementCache(foreign)
    # After the cases ran, a cache that fails is "not judged", with the strict scores kept as they are.
    scores = score_results(RESULTS, [1, 3], ["recall", "mrr"], tiers=TIERS)
    judge = make_judge(server.url + "/v1", tmp_path, cache_dir=str(foreign.parent))
    out = run_judge(judge, RESULTS, scores, UNITS, COUNT, TIERS)
    assert isinstance(out, NotJudged) and out.scores is scores and "another layout" in out.reason
    assert out.metrics == {"judge/coverage": 0.0, "judge/not_judged": 1.0}
    assert out.objective("judged_mrr")[1].startswith("objective=judged_mrr has no value: not judged")
    files = {"report.md": "# r\n"}
    out.add_files(files)
    assert "Not judged: the judge cache" in files["report.md"]


def test_evalpipes_first_cache_layout_is_set_aside(server, tmp_path):
    path = tmp_path / "cache" / "judgements.sqlite"
    path.parent.mkdir()
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE judgements (key TEXT PRIMARY KEY, backend TEXT, model TEXT, prompt_version TEXT, "
        "query TEXT, unit_id TEXT, text_sha256 TEXT, relevant INTEGER NOT NULL, reason TEXT, "
        "tokens_in INTEGER, tokens_out INTEGER, created REAL)"
    )
    db.execute("INSERT INTO judgements VALUES ('k', 'openai', 'm', 'p', 'q', 'u', 's', 1, 'r', 1, 1, 0)")
    db.commit()
    db.close()
    assert judged_run(server, tmp_path).coverage.overall.full
    tables = {
        r[0] for r in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    assert tables == {"judgements", "judgements_v1"}


def test_size_line_and_progress_bar():
    assert size_line("openai:m", "http://h/v1", 1646, 500) == (
        "judge: 1,646 questions for openai:m at http://h/v1, budget 500 (judge.max_calls): 1,146 will not "
        "be judged and the judged figures will be partial (raise judge.max_calls to cover them)"
    )
    assert size_line("openai:m", "http://h/v1", 12, 500).endswith("budget 500 (judge.max_calls)")
    from rich.console import Console

    bar = JudgeBar("judging")
    sink = io.StringIO()
    bar.console = Console(file=sink, force_terminal=True, width=120)
    bar.start(10)
    bar.update(3, 4, 1)
    bar.bar.refresh()
    bar.stop()
    shown = sink.getvalue()
    assert "7/10" in shown and "3 cached · 4 calls · 1 errors" in shown
    quiet = JudgeBar()
    quiet.console = Console(file=io.StringIO(), force_terminal=False)
    quiet.start(10)  # not a terminal: no bar at all
    assert quiet.bar is None


@pytest.mark.skipif(os.name != "posix", reason="POSIX file locks")
def test_a_locked_cache_is_not_judged_and_keeps_the_strict_scores(server, tmp_path):
    path = tmp_path / "cache" / "judgements.sqlite"
    JudgementCache(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer holding the lock
    try:
        scores = score_results(RESULTS, [1, 3], ["recall", "mrr"], tiers=TIERS)
        judge = make_judge(server.url + "/v1", tmp_path, cache_timeout=0.5)
        out = run_judge(judge, RESULTS, scores, UNITS, COUNT, TIERS)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert isinstance(out, NotJudged) and out.scores is scores
    assert "is locked by another writer (waited 0.5 s)" in out.reason and "judge.cache_dir" in out.reason
    assert server.questions() == 0  # found before a call was paid for


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_extra_headers_are_sent_and_their_secrets_masked(server, tmp_path, backend):
    url = server.url + ("/v1" if backend == "openai" else "")
    judge = make_judge(
        url, tmp_path, backend, headers={"X-Gateway-Key": "gw-secret-9981", "X-Team": "search"}
    )
    judge.settings.register_secrets()
    probe(judge.settings)
    sent = server.requests[-1]["headers"]
    assert sent["x-gateway-key"] == "gw-secret-9981" and sent["x-team"] == "search"
    assert mask_text("echo gw-secret-9981 for search") == "echo *** for search"
