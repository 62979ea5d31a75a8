"""The judge against a real HTTP server on 127.0.0.1 speaking each protocol, through the official clients.

The server (tests/judge_server.py) answers relevant iff the unit ID contains
"merge", and misbehaves on request for IDs containing flaky (429, then 500),
slow (past the timeout), garbage (prose) or denied (401).
"""

from __future__ import annotations

import pytest

from evalpipe.core import Hit, Unit
from evalpipe.judge.asking import Judge
from evalpipe.judge.backends import make_backend
from evalpipe.judge.pairs import Pair
from evalpipe.judge.prompt import load_prompt
from evalpipe.judge.run import run_judge
from evalpipe.judge.settings import JudgeSettings
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import score_results
from evalpipe.scoring.tokens import get_token_counter
from judge_server import JudgeServer

COUNT = get_token_counter().count
IDS = ["a.py::merge_settings", "b.py::open_file", "c.py::flaky_merge", "d.py::slow_merge", "e.py::garbage"]
UNITS = {
    u: Unit(u, "function", title=u.split("::")[1], text=f"def {u.split('::')[1]}(): ...", path=u[:4])
    for u in IDS
}


@pytest.fixture
def server():
    with JudgeServer(slow_seconds=1.5) as srv:
        yield srv


def make_judge(server: JudgeServer, backend: str, tmp_path, **kw) -> Judge:
    url = server.url + "/v1" if backend == "openai" else server.url
    options = {
        "model": "judge-model",
        "cache_dir": str(tmp_path / "cache"),
        "timeout": 10.0,
        "max_retries": 2,
    }
    settings = JudgeSettings(backend=backend, base_url=url, **{**options, "concurrency": 2, **kw})
    return Judge(settings, make_backend(settings), load_prompt("relevance_v1"))


def pairs(ids=IDS):
    return [Pair("c1", "merge two settings", uid, i + 1) for i, uid in enumerate(ids)]


@pytest.mark.parametrize(
    ("backend", "path"), [("openai", "/v1/chat/completions"), ("anthropic", "/v1/messages")]
)
def test_requests_parsing_retries_and_malformed_answers(server, tmp_path, backend, path):
    ids = [u for u in IDS if "slow" not in u]
    judge = make_judge(server, backend, tmp_path)
    verdicts, stats = judge.ask_all(pairs(ids), UNITS, COUNT)

    # Correct requests: the endpoint, the model, max_tokens, a user message holding the prompt.
    assert {r["path"] for r in server.requests} == {path}
    body = server.requests[0]["body"]
    assert body["model"] == "judge-model" and body["max_tokens"] == 200
    prompt = JudgeServer.prompt_of(body)
    assert "merge two settings" in prompt and "ID: " in prompt
    headers = server.requests[0]["headers"]
    assert "no-key" in (headers.get("x-api-key") or headers.get("authorization") or "")  # local: placeholder
    assert ("anthropic-version" in headers) == (backend == "anthropic")

    v = {uid: verdicts[("c1", uid)] for uid in ids}
    assert v["a.py::merge_settings"].relevant and v["a.py::merge_settings"].verdict.reason
    assert not v["b.py::open_file"].relevant and v["b.py::open_file"].error is None
    # 429, then 500, then an answer: retried by the client with backoff, one call for us.
    assert v["c.py::flaky_merge"].relevant
    assert sum("flaky" in JudgeServer.prompt_of(r["body"]) for r in server.requests) == 3
    # Prose instead of JSON: a clear per-pair error.
    assert v["e.py::garbage"].verdict is None and v["e.py::garbage"].error.startswith("malformed answer")

    assert (stats.questions, stats.calls, stats.cache_hits, stats.errors, stats.unjudged) == (4, 4, 0, 1, 1)
    assert stats.tokens_in > 0 and stats.tokens_out > 0 and not stats.budget_reached


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_timeouts_are_retried_then_an_error_for_that_pair_only(server, tmp_path, backend):
    ids = ["d.py::slow_merge", "a.py::merge_settings"]
    judge = make_judge(server, backend, tmp_path, timeout=0.5, max_retries=1)
    verdicts, stats = judge.ask_all(pairs(ids), UNITS, COUNT)
    # The server sleeps 1.5 s: past the 0.5 s timeout on both tries (1 + max_retries).
    slow = verdicts[("c1", "d.py::slow_merge")]
    assert slow.verdict is None and "Timeout" in slow.error
    assert sum("slow_merge" in JudgeServer.prompt_of(r["body"]) for r in server.requests) == 2
    assert verdicts[("c1", "a.py::merge_settings")].relevant
    assert (stats.calls, stats.errors) == (2, 1)


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
def test_second_run_is_served_from_the_cache(server, tmp_path, backend):
    ids = IDS[:2]
    judge = make_judge(server, backend, tmp_path)
    first, s1 = judge.ask_all(pairs(ids), UNITS, COUNT)
    n = len(server.requests)
    again, s2 = make_judge(server, backend, tmp_path).ask_all(pairs(ids), UNITS, COUNT)
    assert len(server.requests) == n == 2
    assert (s1.calls, s1.cache_hits, s2.calls, s2.cache_hits) == (2, 0, 0, 2)
    assert {k: j.verdict for k, j in again.items()} == {k: j.verdict for k, j in first.items()}
    assert all(j.cached for j in again.values())
    # Another model, or changed unit text, is another question.
    make_judge(server, backend, tmp_path, model="other").ask_all(pairs(ids), UNITS, COUNT)
    assert len(server.requests) == 4
    changed = {**UNITS, ids[0]: Unit(ids[0], "function", text="def merge_settings(a, b): new body")}
    _, s3 = judge.ask_all(pairs(ids), changed, COUNT)
    assert (s3.calls, s3.cache_hits) == (1, 1)


def test_budget_stops_cleanly_and_a_bigger_budget_asks_only_for_the_rest(server, tmp_path):
    ids = ["a.py::merge_settings", "b.py::open_file"] + [f"m{i}.py::merge_{i}" for i in range(4)]
    units = {u: Unit(u, "function", text=u) for u in ids}
    verdicts, stats = make_judge(server, "openai", tmp_path, max_calls=3).ask_all(pairs(ids), units, COUNT)
    assert (stats.calls, stats.unjudged, stats.budget_reached) == (3, 3, True)
    assert len(server.requests) == 3
    # The first three pairs in order were asked; the rest say why they have no verdict.
    assert [verdicts[("c1", u)].verdict is not None for u in ids] == [True] * 3 + [False] * 3
    assert "max_calls" in verdicts[("c1", ids[5])].error
    _, again = make_judge(server, "openai", tmp_path, max_calls=10).ask_all(pairs(ids), units, COUNT)
    assert (again.calls, again.cache_hits, again.unjudged) == (3, 3, 0)


def test_a_rejected_key_stops_judging_instead_of_failing_every_pair(server, tmp_path):
    ids = ["x.py::denied"] + [f"m{i}.py::merge_{i}" for i in range(6)]
    units = {u: Unit(u, "function", text=u) for u in ids}
    judge = make_judge(server, "openai", tmp_path, concurrency=1, max_retries=0)
    verdicts, stats = judge.ask_all(pairs(ids), units, COUNT)
    assert stats.stopped.startswith("judging stopped after AuthenticationError")
    assert (stats.calls, stats.errors, stats.not_asked, stats.unjudged) == (1, 1, 6, 7)
    assert verdicts[("c1", ids[1])].error.startswith("not judged: judging stopped after AuthenticationError")
    assert len(server.requests) == 1


def test_run_judge_marks_misses_and_scores_both_ways(server, tmp_path):
    hits = lambda ids: tuple(Hit(i) for i in ids)  # noqa: E731
    results = [
        # Expected at rank 3; the judge accepts merge_a (rank 1): rescued at R@1.
        CaseResult(
            "c1", "exact", "merge", {"exp.py::x": 1}, hits(["m.py::merge_a", "o.py::y", "exp.py::x"]), 1, 1
        ),
        # Not found; nothing the judge accepts: judged_hit False.
        CaseResult("c2", "concept", "open", {"exp.py::z": 1}, hits(["o.py::y", "o.py::w"]), 1, 1),
        # Hit at rank 1: not a miss, nothing asked.
        CaseResult("c3", "concept", "open", {"o.py::y": 1}, hits(["o.py::y", "m.py::merge_a"]), 1, 1),
    ]
    units = {
        u: Unit(u, "function", text=u)
        for u in ["m.py::merge_a", "o.py::y", "o.py::w", "exp.py::x", "exp.py::z"]
    }
    scores = score_results(results, [1, 3], ["recall", "mrr"], tiers=["exact", "concept"])
    judge = make_judge(server, "openai", tmp_path, calibrate=True, calibration_pairs=4)
    out = run_judge(judge, results, scores, units, COUNT, tiers=["exact", "concept"])

    assert {m.case_id: m.judged_hit for m in out.scores.misses} == {"c1": True, "c2": False}
    assert [(p.case_id, p.unit_id, p.rank) for p in out.positives] == [("c1", "m.py::merge_a", 1)]
    # Strict: R@1 1/3, MRR (1/3 + 0 + 1)/3; judged: R@1 2/3, MRR (1 + 0 + 1)/3.
    assert out.metrics["judged_recall_at_1"] == pytest.approx(2 / 3)
    assert out.metrics["judged_mrr"] == pytest.approx(2 / 3)
    assert out.scores.overall["mrr"] == pytest.approx(4 / 9)
    assert out.metrics["tier/exact/judged_recall_at_1"] == 1.0
    # Calibration: positives exp.py::x, exp.py::z, o.py::y (no "merge": judged not relevant); negatives
    # are each case's top non-expected candidate: m.py::merge_a (c1, judged relevant), o.py::y (c2),
    # m.py::merge_a (c3). A sample of 4 has no true positive.
    cal = out.calibration
    assert cal is not None and cal.n == 4 and cal.tp == 0
    assert out.metrics["judge/calls"] == len(server.requests)
    assert out.tags == {
        "evalpipe.judge": "openai:judge-model",
        "evalpipe.judge_prompt": judge.prompt.version,
        "evalpipe.judge_server": server.url + "/v1",
        "evalpipe.judge_coverage": "1.0000",
        "evalpipe.judged": "full",
    }
    # c1: merge_a and o.py::y above the expected ID; c2: o.py::y and o.py::w (not found): 4 pairs, all judged.
    assert (out.metrics["judge/coverage"], out.metrics["judge/pairs"]) == (1.0, 4.0)
    table = {"case_id": ["c1", "c2", "c3"]}
    out.add_columns(table)
    assert table["judged_hit"] == [True, False, None]
    assert table["judged_recall_at_1"] == [1.0, 0.0, 1.0]
    files = {"report.md": "# report\n"}
    out.add_files(files)
    assert files["judged.tsv"].splitlines()[-1] == "c1\tm.py::merge_a\t1\t1\tthe unit does contain merge"
    assert "## Judged figures" in files["report.md"] and "openai:judge-model" in files["report.md"]
    assert "Cohen's kappa" in files["report.md"]
