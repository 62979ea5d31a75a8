"""`evalpipe judge-batch`: the judge labels a batch through a real local OpenAI-compatible server
(tests/judge_server.py: a unit is relevant iff its ID contains "hit"), its agreement with the
people's labels and the canaries' fooled rate, all worked out by hand below."""

from __future__ import annotations

import json

import pytest

from evalpipe.corpus import file_sha256
from evalpipe.judge import against_people as ap
from evalpipe.judge.batch import Item, Label, append_label, current, read_batch, read_labels, write_batch
from evalpipe.labelling import judge_batch_cli
from judge_server import JudgeServer

IDS = ["hit1", "hit2", "miss1", "miss2", "hit3", "miss3", "hit4", "miss4", "miss5", "hit5"]
EXTRA = ["zz/hit-a", "zz/hit-b", "zz/plain"]
FIXTURE = """\
name: people
corpus: corpus.jsonl
cases:
  - {id: c1, tier: concept, query: alpha words, expected: ["zz/hit-a", "zz/hit-b"]}
  - {id: c2, tier: concept, query: beta words, expected: ["zz/plain", "zz/hit-b"]}
  - {id: c3, tier: exact, query: gamma words, expected: ["zz/hit-a", "zz/plain"]}
"""
# (case, candidate, people's grades): the judge says yes exactly for the "hit" IDs.
ITEMS = [
    ("c1", "hit1", {"alice": 1}),  # judge yes, people yes: TP
    ("c1", "hit2", {"alice": 0}),  # FP
    ("c1", "miss1", {"alice": 0}),  # TN
    ("c1", "miss2", {"alice": 1, "bob": 2}),  # FN (both people yes)
    ("c2", "hit3", {"alice": 2}),  # TP
    ("c2", "miss3", {"alice": 0}),  # TN
    ("c2", "hit5", {}),  # nobody labelled it: the judge's verdict is written, no agreement item
    ("c3", "hit4", {"alice": 1}),  # TP
    ("c3", "miss4", {"alice": 0, "bob": 0}),  # TN
    ("c3", "miss5", {"alice": 0}),  # TN
]
TIER = {"c1": "concept", "c2": "concept", "c3": "exact"}
QUERY = {"c1": "alpha words", "c2": "beta words", "c3": "gamma words"}


@pytest.fixture
def batch(tmp_path):
    units = [
        {"id": i, "kind": "function", "title": i, "text": f"def {i}(): pass", "path": "m.py"} for i in IDS
    ]
    units += [{"id": i, "kind": "function", "title": i, "text": "unrelated", "path": "z.py"} for i in EXTRA]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units), encoding="utf-8")
    fx = tmp_path / "fx.yaml"
    fx.write_text(FIXTURE, encoding="utf-8")
    sha = file_sha256(fx)
    path = tmp_path / "fx.pool.jsonl"
    items = [Item(c, TIER[c], QUERY[c], u, {"r": 1}, 1.0, "") for c, u, _ in ITEMS]
    write_batch(path, {"fixture": str(fx), "fixture_sha256": sha, "depth": 5, "runs": []}, items)
    for c, u, grades in ITEMS:
        for who, g in grades.items():
            append_label(path.with_name("fx.pool.labels.jsonl"), Label(c, u, g, who, "t", 1.0, "page", sha))
    return path


def _run(batch, server, tmp_path, *extra):
    return judge_batch_cli.main(
        [
            str(batch),
            "--model",
            "m",
            "--base-url",
            f"{server.url}/v1",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--canaries",
            "1",
            *extra,
        ]
    )


def test_judge_labels_the_batch_and_is_checked_against_people(batch, tmp_path, capsys, request):
    server = JudgeServer(marker="hit").__enter__()
    request.addfinalizer(server.__exit__)
    assert _run(batch, server, tmp_path) == 0
    asked = server.questions()
    out = capsys.readouterr().out
    # 10 batch items + 3 canaries (every case, --canaries 1), each asked once.
    assert asked == 13
    judge = "judge:openai:m"
    standing = current(read_labels(batch.with_name("fx.pool.labels.jsonl")))
    mine = {(c, u): lab.grade for (c, u, who), lab in standing.items() if who == judge}
    assert mine == {(c, u): int("hit" in u) for c, u, _ in ITEMS}
    assert all(lab.how == judge for (_, _, who), lab in standing.items() if who == judge)

    rep = json.loads(batch.with_name("fx.pool.judge-agreement.json").read_text())
    # Overall: TP 3, FP 1, FN 1, TN 4 (n=9; hit5 has no person). p_o = 7/9, both say yes 4/9:
    # p_e = (4/9)^2 + (5/9)^2 = 41/81, kappa = (63-41)/(81-41) = 22/40 = 0.55 (< 0.6: flagged).
    o = rep["overall"]
    assert o["items"] == 9
    assert o["confusion"] == {
        "judge_yes_people_yes": 3,
        "judge_yes_people_no": 1,
        "judge_no_people_yes": 1,
        "judge_no_people_no": 4,
    }
    assert o["kappa"] == pytest.approx(0.55)
    assert o["kappa_lo"] <= o["kappa"] <= o["kappa_hi"]
    assert o["rescue_precision"] == pytest.approx(3 / 4) and o["rescues"] == 4
    # concept (c1, c2): TP 2, FP 1, FN 1, TN 2; p_o = 4/6, p_e = 1/2, kappa = 1/3; precision 2/3.
    con = rep["tiers"]["concept"]
    assert con["items"] == 6 and con["kappa"] == pytest.approx(1 / 3)
    assert con["rescue_precision"] == pytest.approx(2 / 3)
    # exact (c3): TP 1, TN 2: perfect agreement.
    ex = rep["tiers"]["exact"]
    assert ex["items"] == 3 and ex["kappa"] == pytest.approx(1.0) and ex["rescue_precision"] == 1.0
    # Canaries: the only unpooled units are zz/*; each case's own listed ones are excluded, so c1 gets
    # zz/plain (not fooled), c2 zz/hit-a and c3 zz/hit-b (both "hit": fooled): 2 of 3.
    assert rep["canaries"]["pairs"] == [
        {"case_id": "c1", "unit": "zz/plain"},
        {"case_id": "c2", "unit": "zz/hit-a"},
        {"case_id": "c3", "unit": "zz/hit-b"},
    ]
    assert rep["canaries"]["fooled"] == 2 and rep["canaries"]["fooled_rate"] == pytest.approx(2 / 3)
    assert rep["below_floor"] is True and rep["kappa_floor"] == 0.6
    assert "kappa 0.55" in out and "rescue precision 75% of 4" in out
    assert "canaries: fooled 2 of 3 answered (67%" in out
    assert "BELOW AGREEMENT: kappa 0.55 < 0.6" in out

    # merge-judgements' rules apply unchanged: the judge disagrees with people on hit2 (1 vs 0), miss2
    # (0 vs 1 and 2) and hit3 (its 1 against alice's 2: grades, not relevance, are merged).
    from evalpipe.judge.people import Conflicts, merged_labels

    labels_file = batch.with_name("fx.pool.labels.jsonl")
    sha = read_batch(batch).fixture_sha256
    with pytest.raises(Conflicts) as conflicts:
        merged_labels(labels_file, sha)
    text = "\n".join(conflicts.value.lines)
    assert (
        "'hit2'" in text
        and "judge:openai:m 1" in text
        and "'miss2'" in text
        and "'hit3'" in text
        and "3 conflict(s)" in text
    )
    merged = {(m.case_id, m.unit_id): m for m in merged_labels(labels_file, sha, rule="majority")}
    assert merged[("c2", "hit5")].grade == 1 and merged[("c2", "hit5")].verdicts[0].how == judge

    # A re-run on the same server is answered by the cache and appends no line (same verdicts).
    before = batch.with_name("fx.pool.labels.jsonl").read_text()
    assert _run(batch, server, tmp_path) == 0
    assert server.questions() == asked
    assert batch.with_name("fx.pool.labels.jsonl").read_text() == before
    assert "0 new lines" in capsys.readouterr().out


def test_canary_text_carries_the_query_and_the_sample_is_seeded(batch):
    b = read_batch(batch)
    from evalpipe.core.unit import Unit

    units = {i: Unit.from_record({"id": i, "kind": "function", "text": "t"}) for i in IDS + EXTRA}
    one, made = ap.make_canaries(b, units, {}, 2 / 3, seed=3)
    two, _ = ap.make_canaries(b, units, {}, 2 / 3, seed=3)
    assert one == two and len(one) == 2  # round(2/3 * 3 cases)
    for c in one:
        assert c.source in EXTRA  # never a pooled candidate
        assert made[c.unit_id].text.count(c.query) == 3


def test_people_majority_a_tie_is_not_relevant_and_judges_do_not_count():
    labs = [
        Label("c", "u", 1, "alice", "t"),
        Label("c", "u", 0, "bob", "t"),
        Label("c", "v", 2, "alice", "t"),
        Label("c", "v", 0, "judge:openai:m", "t"),
        Label("c", "w", 0, "alice", "t"),
        Label("c", "w", 2, "alice", "t"),  # the last verdict stands
    ]
    assert ap.people_relevance(labs) == {("c", "u"): False, ("c", "v"): True, ("c", "w"): True}


def test_bad_input_is_one_line_and_exit_2(batch, tmp_path, capsys):
    assert judge_batch_cli.main([str(tmp_path / "nope.jsonl"), "--model", "m", "--base-url", "http://x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such batch file" in err[0]
    assert judge_batch_cli.main([str(batch), "--model", "m", "--canaries", "2"]) == 2
    assert "--canaries 2.0: give a share between 0 and 1" in capsys.readouterr().err
    # A server that is not there: refused before anything is written.
    before = batch.with_name("fx.pool.labels.jsonl").read_text()
    code = judge_batch_cli.main(
        [
            str(batch),
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--cache-dir",
            str(tmp_path / "c"),
        ]
    )
    assert code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
    assert batch.with_name("fx.pool.labels.jsonl").read_text() == before


RUN_FIXTURE = """\
name: tinyjudge
corpus: corpus.jsonl
cases:
  - {id: d1, tier: exact, query: merge_settings, expected: [pkg/a.py::merge_settings]}
  - {id: d2, tier: concept, query: merge, expected: [pkg/b.go::Open]}
"""


def _agreement_file(path, judge, kappa):
    block = {"items": 9, "kappa": kappa, "kappa_lo": kappa - 0.2, "kappa_hi": kappa + 0.1}
    path.write_text(json.dumps({"judge": judge, "overall": block}), encoding="utf-8")
    return path


def test_a_run_marks_judged_figures_of_a_judge_below_agreement(tmp_path, tracking_uri):
    from mlflow.tracking import MlflowClient

    from cli_in_process import run_cli
    from conftest import TINY_UNITS

    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS))
    (tmp_path / "fx.yaml").write_text(RUN_FIXTURE)
    low = _agreement_file(tmp_path / "low.json", "judge:openai:m", 0.55)
    high = _agreement_file(tmp_path / "high.json", "judge:openai:m", 0.8)
    other = _agreement_file(tmp_path / "other.json", "judge:openai:gpt-x", 0.9)
    with JudgeServer(marker="Session") as server:
        base = [
            f"hydra.run.dir={tmp_path / 'out'}",
            "progress=false",
            "plots=false",
            "ranker=bm25",
            f"fixture.path={tmp_path / 'fx.yaml'}",
            "ks=[1,5]",
            "judge=openai",
            f"judge.base_url={server.url}/v1",
            "judge.model=m",
            f"judge.cache_dir={tmp_path / 'judge-cache'}",
            f"tracking.uri={tracking_uri}",
        ]
        bad = run_cli(tmp_path, *base, f"judge.agreement_file={other}")
        assert bad.returncode == 2, bad.stderr
        err = [ln for ln in bad.stderr.splitlines() if "error" in ln]
        assert (
            len(err) == 1 and "measures judge:openai:gpt-x, but this run's judge is judge:openai:m" in err[0]
        )
        first = run_cli(tmp_path, *base, f"judge.agreement_file={low}")
        assert first.returncode == 0, first.stderr
        second = run_cli(
            tmp_path, *base, f"hydra.run.dir={tmp_path / 'out2'}", f"judge.agreement_file={high}"
        )
        assert second.returncode == 0, second.stderr
    assert "Cohen's kappa 0.55 [0.35, 0.65] on 9 items: BELOW AGREEMENT (kappa < 0.6)" in first.stdout
    report_md = (tmp_path / "out" / "report.md").read_text()
    assert "BELOW AGREEMENT (kappa < 0.6)" in report_md
    assert "kappa 0.80 [0.60, 0.90] on 9 items: at or above the stated floor" in second.stdout
    client = MlflowClient(tracking_uri=tracking_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], order_by=["start_time"])
    tags = [
        (r.data.tags.get("evalpipe.judge_agreement"), r.data.tags.get("evalpipe.judge_kappa")) for r in runs
    ]
    assert tags == [("below", "0.5500"), ("ok", "0.8000")]
