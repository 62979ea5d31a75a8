"""The pieces behind the bad-input checks, in process: strict YAML, input files, config checks,
plug-in result shapes, the per-query timeout, the slow-case progress line and run verdicts."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest

from evalpipe.core import Hit
from evalpipe.core.files import InputFileError, MissingInputError, decode_text, text_lines
from evalpipe.evaluation import preflight
from evalpipe.evaluation.runner import BadResult, as_hits
from evalpipe.inputs.fixture import load_fixture
from evalpipe.inputs.strict_yaml import YAMLFileError, parse
from evalpipe.safety.errors import EvalpipeError, FixtureError
from evalpipe.safety.timeouts import SearchTimeout, call_with_timeout
from evalpipe.scoring.outcome import EXIT_FAILED, EXIT_SKIPPED, verdict
from evalpipe.scoring.results import CaseResult
from waiting import wait_until

# -- strict YAML -------------------------------------------------------------------------------------------


def test_duplicate_keys_are_refused_with_both_lines():
    with pytest.raises(YAMLFileError, match=r"^f\.yaml:3: duplicate key 'a' \(first given at line 1\)"):
        parse("a: 1\nb: 2\na: 3\n", "f.yaml")
    with pytest.raises(YAMLFileError, match=r"^f\.yaml:4: duplicate key 'query' \(first given at line 3\)"):
        parse("cases:\n  - id: x\n    query: a\n    query: b\n", "f.yaml")


def test_merge_keys_still_override_and_plain_yaml_loads():
    assert parse("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n", "f")["d"] == {"x": 3, "y": 2}
    assert parse("- a\n- b\n", "f") == ["a", "b"]
    assert parse("", "f") is None


def test_tabs_and_syntax_errors_name_the_line():
    with pytest.raises(YAMLFileError, match=r"^f:2: invalid YAML: .*tabs"):
        parse("a:\n\tb: 1\n", "f")
    with pytest.raises(YAMLFileError, match=r"^f:2: invalid YAML"):
        parse("a: [\n", "f")


# -- input files -------------------------------------------------------------------------------------------


def test_decode_text_names_line_and_column_and_drops_a_bom(tmp_path):
    assert decode_text("\ufeffa: 1\n".encode(), tmp_path / "x") == "a: 1\n"
    with pytest.raises(InputFileError, match=r"x:2: not UTF-8 text \(byte 0xe9 at column 4\)"):
        decode_text(b"ok\ncaf\xe9\n", tmp_path / "x")


def test_text_lines_numbers_blank_lines_and_strips_crlf(tmp_path):
    path = tmp_path / "r.txt"
    path.write_bytes(b"\xef\xbb\xbfa\r\n\r\nb\r\n")
    assert list(text_lines(path)) == [(1, "a"), (2, ""), (3, "b")]


def test_missing_input_is_also_a_file_not_found_error():
    assert issubclass(MissingInputError, FileNotFoundError) and issubclass(MissingInputError, EvalpipeError)


def test_fixture_loader_accepts_numeric_ids_and_custom_tiers(tmp_path, tiny_corpus_path):
    (tmp_path / "fx.yaml").write_text(
        "name: t\ncorpus: corpus.jsonl\ncases:\n"
        "  - {id: 1, tier: lookup, query: merge, expected: [pkg/a.py]}\n"
        "  - {id: c2, tier: multihop, query: merge, expected: [pkg/a.py]}\n"
    )
    with pytest.raises(FixtureError, match=r"fx\.yaml:5: case 'c2': unknown tier 'multihop': did you mean"):
        load_fixture(tmp_path / "fx.yaml")
    (tmp_path / "fx.yaml").write_text(
        "name: t\ncorpus: corpus.jsonl\ncases:\n"
        "  - {id: 1, tier: lookup, query: merge, expected: [pkg/a.py]}\n"
    )
    fx = load_fixture(tmp_path / "fx.yaml")
    assert fx.cases[0].id == "1" and fx.tiers == ["lookup"]


# -- config checks -----------------------------------------------------------------------------------------


def test_ks_checks():
    assert preflight.check_ks([20, 1, 5]) == [1, 5, 20]
    for bad, needle in [
        ([20, 1, 5, 5], r"ks lists 5 more than once.*ks=\[1,5,20\]"),
        (5, r"ks=\[5\]"),
        ([], "empty"),
        ([0], "got 0"),
        ([True], "got True"),
        (["a"], "'a'"),
    ]:
        with pytest.raises(preflight.ConfigError, match=needle):
            preflight.check_ks(bad)


def test_metric_family_checks():
    assert preflight.check_metrics(["ndcg", "recall", "ndcg"]) == ["ndcg", "recall"]
    for bad, needle in [([], "empty"), (["nope"], "'nope'"), ("recall", r"metrics=\[recall\]")]:
        with pytest.raises(preflight.ConfigError, match=needle):
            preflight.check_metrics(bad)


def test_run_name_and_timeout():
    assert preflight.check_run_name(2024) == "2024" and preflight.check_run_name(None) is None
    with pytest.raises(preflight.ConfigError):
        preflight.check_run_name({"a": 1})
    assert preflight.check_timeout(None) is None and preflight.check_timeout(2) == 2.0
    for bad in (0, -1, "x", True, float("inf")):
        with pytest.raises(preflight.ConfigError):
            preflight.check_timeout(bad)


def test_objective_names_come_from_the_scoring_code(tmp_path, tiny_corpus_path):
    (tmp_path / "fx.yaml").write_text(
        "name: t\ncorpus: corpus.jsonl\ncases:\n"
        "  - {id: c1, tier: exact, query: merge, expected: [pkg/a.py]}\n"
    )
    names = preflight.produced_metric_names(load_fixture(tmp_path / "fx.yaml"), [1, 10], ["recall", "mrr"])
    assert {
        "recall_at_1",
        "recall_at_10",
        "ir/hits_at_10",
        "mrr",
        "ir/mrr_at_10",
        "count/unknown_ids",
        "tier/exact/recall_at_10",
    } <= names
    assert "ndcg_at_10" not in names and "recall_at_5" not in names
    for bare_or_logged in ("mrr_at_10", "ir/mrr_at_10", "cost/latency_p95_us", "latency_p95_us"):
        assert preflight.check_objective(bare_or_logged, names, strict=True) == bare_or_logged
    assert preflight.check_objective("recall_at_5", names, strict=False) == "recall_at_5"
    with pytest.raises(preflight.ConfigError, match="objective=recall_at_5 is not a figure"):
        preflight.check_objective("recall_at_5", names, strict=True)
    assert preflight.check_objective("tier/exact/mrr", names, strict=True) == "tier/exact/mrr"


# -- plug-in result shapes ---------------------------------------------------------------------------------


def test_as_hits_accepts_the_natural_shapes():
    got = as_hits(["a", ("b", 2), {"id": "c", "score": np.float32(0.5)}, Hit("d", 1.0), ["e", None]])
    assert got == [Hit("a"), Hit("b", 2.0), Hit("c", 0.5), Hit("d", 1.0), Hit("e")]
    assert as_hits(iter([])) == [] and as_hits(x for x in ["a"]) == [Hit("a")]


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("pkg/a.py", "returned a single str 'pkg/a.py'"),
        ({"id": "a", "score": 1}, "returned a single dict"),
        (None, "returned None (a missing return?)"),
        (7, "returned a single int"),
        ([7], "item 7 (int)"),
        ([(7, 1.0)], "hit whose id is 7"),
        ([{"score": 1.0}], "dict without 'id'"),
        ([("a", "high")], "score 'high'"),
        ([("a", float("nan"))], "score nan"),
        ([Hit(3, 1.0)], "hit whose id is 3"),  # type: ignore[arg-type]
    ],
)
def test_as_hits_names_what_was_returned(raw, needle):
    with pytest.raises(BadResult) as info:
        as_hits(raw)
    assert needle in str(info.value)


# -- timeout, progress, verdicts ----------------------------------------------------------------------------


def test_timeout_abandons_a_hung_call_and_passes_results_and_errors_through():
    release = threading.Event()
    with pytest.raises(SearchTimeout, match=r"^timeout after 0\.2s$"):
        call_with_timeout(lambda: release.wait(30), 0.2)
    release.set()
    assert call_with_timeout(lambda: 42, 5) == 42 and call_with_timeout(lambda: 43, None) == 43
    with pytest.raises(KeyError):
        call_with_timeout(lambda: {}["x"], 5)


def test_progress_names_the_slow_case(tmp_path, tiny_corpus_path):
    from rich.console import Console

    from evalpipe.evaluation.progress import case_progress

    (tmp_path / "fx.yaml").write_text(
        "name: t\ncorpus: corpus.jsonl\ncases:\n  - {id: slowpoke, query: merge, expected: [pkg/a.py]}\n"
    )
    cases = load_fixture(tmp_path / "fx.yaml").cases
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    for _ in case_progress(cases, "bm25 on t", console, timeout_s=9, slow_after=0.0):
        # wait (without a timing assertion) until the watchdog has named the case
        wait_until("the watchdog to name the case", lambda: "case slowpoke running" in out.getvalue())
    assert "case slowpoke running" in out.getvalue() and "of 9s" in out.getvalue()


def result(case_id: str, error: str | None = None) -> CaseResult:
    return CaseResult(case_id, "exact", "q", {"a": 1}, (), 1, 0, error)


def test_verdicts():
    ok = [result("c1"), result("c2", "E: x"), result("c3")]
    assert verdict("", ok, False, "bm25") is None
    half = [result("c1"), result("c2", "E: x")]
    assert verdict("", half, False, "bm25") is None  # exactly half is not "more than half"
    bad = [result("c1", "E: x"), result("c2", "E:  x"), result("c3", "F: y"), result("c4")]
    v = verdict("", bad, False, "bm25")
    assert v is not None and v.code == EXIT_FAILED
    assert v.lines == (
        "run failed: 3 of 4 cases raised a retrieval error; first errors:",
        "  case c1: E: x",
        "  case c3: F: y",
    )
    skipped = verdict("no model\n  here", [], False, "semantic")
    assert skipped is not None and skipped.code == EXIT_SKIPPED
    assert skipped.lines == (
        "ranker semantic skipped, nothing was measured: no model here (allow_skipped=true accepts this)",
    )
    assert verdict("no model", [], True, "semantic") is None


def test_sweep_summary_shows_a_skipped_point_as_skipped():
    from types import SimpleNamespace

    from evalpipe.tracking.sweep_summary import SKIPPED, row_from_run

    def run(status: str, tags: dict) -> SimpleNamespace:
        info = SimpleNamespace(run_id="r1", run_name="x", status=status)
        return SimpleNamespace(info=info, data=SimpleNamespace(tags=tags, params={}, metrics={}))

    assert row_from_run(run("FAILED", {"evalpipe.skipped": "no model"}), []).status == SKIPPED
    assert row_from_run(run("FINISHED", {"evalpipe.skipped": "no model"}), []).status == SKIPPED
    assert row_from_run(run("FAILED", {}), []).status == "FAILED"
    assert not row_from_run(run("FINISHED", {"evalpipe.skipped": "x"}), []).measured


def test_judged_figures_are_valid_objectives_when_a_judge_is_configured(tmp_path, tiny_corpus_path):
    (tmp_path / "fx.yaml").write_text(
        "name: t\ncorpus: corpus.jsonl\ncases:\n"
        "  - {id: c1, tier: exact, query: merge, expected: [pkg/a.py]}\n"
    )
    fx = load_fixture(tmp_path / "fx.yaml")
    assert "judged_recall_at_5" not in preflight.produced_metric_names(fx, [1, 5], ["recall"])
    names = preflight.produced_metric_names(fx, [1, 5], ["recall"], judged=True)
    assert {"judged_recall_at_5", "judged_mrr", "tier/exact/judged_recall_at_1"} <= names
    assert preflight.check_objective("judge/relevant", names, strict=True) == "judge/relevant"
