"""The fixture checker: hand-worked overlap, phrase, leakage and name-match values on small
fixtures written here, the v1 gold fixture's known problems, and the CLI's exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from evalpipe.fixture_check.ambiguity import AmbiguityFinder
from evalpipe.fixture_check.check import check_fixture
from evalpipe.fixture_check.leakage import query_identifiers, spellings
from evalpipe.fixture_check.summary import difficulty_metrics
from evalpipe.fixture_check.thresholds import apply_overrides, thresholds_for
from evalpipe.fixture_check.words import content_words, longest_shared_run
from evalpipe.inputs.fixture import load_fixture
from evalpipe.rankers.lexical.bm25 import BM25Ranker


def unit(uid: str, title: str, text: str, name: str | None = None, **extra) -> dict:
    return {"id": uid, "kind": "function", "title": title, "text": text, "name": name or title, **extra}


UNITS = [
    unit("app/cli.py::fail", "fail", "Prints one clear line on stderr (no traceback)."),
    unit("app/fmt.py::format_arguments", "format_arguments", "PEP 8 rendering of a parameter list."),
    unit("app/io.py::parseJSONLines", "parseJSONLines", "Read records from a file."),
    unit("app/rank.py::top_k", "top_k", "Best k rows by score."),
    unit("app/search.py::search", "search", "hits = top_k(score_all(query), 10)"),
    unit("app/report.py::best_rows", "best_rows", "return top_k(table, 3)"),
    unit("app/report.py::summary", "summary", "rows = best_rows(table)"),
    unit(
        "app/model.py::Corpus.allowed_mask",
        "Corpus.allowed_mask",
        "Boolean mask of units a filter allows.",
        name="allowed_mask",
    ),
    unit("app/run.py::run", "run", "mask = corpus.allowed_mask(constraints)"),
    unit("app/a.py::lookup", "lookup", "def lookup(query): rank documents for the query"),
    unit(
        "app/b.py::lookup", "lookup", "def lookup(query, filters): rank documents for the query with filters"
    ),
]

CASES = [
    # concept, hand-worked below: overlap 4/6, stemmed 5/6, phrase "printing one"
    {
        "id": "c-copy",
        "tier": "concept",
        "query": "printing one line messages on stderr, no traceback",
        "expected": ["app/cli.py::fail"],
    },
    {
        "id": "c-leak-full",
        "tier": "concept",
        "query": "format the arguments of a call",
        "expected": ["app/fmt.py::format_arguments"],
    },
    {
        "id": "c-leak-part",
        "tier": "concept",
        "query": "render arguments PEP 8 style",
        "expected": ["app/fmt.py::format_arguments"],
    },
    {
        "id": "c-camel",
        "tier": "concept",
        "query": "parse json lines",
        "expected": ["app/io.py::parseJSONLines"],
    },
    {
        "id": "c-clean",
        "tier": "concept",
        "query": "pretty-print a signature",
        "expected": ["app/fmt.py::format_arguments"],
    },
    {
        "id": "c-big",
        "tier": "concept",
        "query": "anything whatsoever",
        "expected": [
            "app/rank.py::top_k",
            "app/search.py::search",
            "app/report.py::best_rows",
            "app/report.py::summary",
        ],
    },
    {
        "id": "m-name",
        "tier": "multi_hop",
        "query": "what calls top_k",
        "expected": ["app/search.py::search", "app/report.py::best_rows"],
    },
    {
        "id": "m-relation",
        "tier": "multi_hop",
        "query": "what reaches the row selector through another function",
        "expected": ["app/report.py::summary"],
    },
    {
        "id": "m-split",
        "tier": "multi_hop",
        "query": "who calls best_rows or top_k",
        "expected": ["app/report.py::summary", "app/search.py::search"],
    },
    {
        "id": "m-dotted",
        "tier": "multi_hop",
        "query": "callers of Corpus.allowed_mask",
        "expected": ["app/run.py::run"],
    },
]


def write_fixture(tmp: Path, cases: list[dict], units: list[dict] = UNITS, name: str = "fx.yaml") -> Path:
    (tmp / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units), encoding="utf-8")
    path = tmp / name
    path.write_text(yaml.safe_dump({"name": "t", "corpus": "corpus.jsonl", "cases": cases}, sort_keys=False))
    return path


@pytest.fixture
def report(tmp_path):
    fixture = load_fixture(write_fixture(tmp_path, CASES))
    checks = check_fixture(fixture)
    return {c.case_id: c for c in checks.cases}, checks


# --- content words and phrases ------------------------------------------------------------


def test_content_words_split_identifiers_drop_stopwords_and_stem():
    words = content_words("parseJSONLines a top_k of Corpus.allowed_mask, x")
    # camelCase and snake_case split; 'a', 'of' are stopwords; 'k' and 'x' are too short.
    assert words.surface == ("parse", "json", "lines", "top", "corpus", "allowed", "mask")
    assert words.stems == ("pars", "json", "line", "top", "corpus", "allow", "mask")
    # the comma before 'x' ends a phrase, but 'x' is dropped, so no word carries the break
    assert words.breaks == (False,) * 7


def test_phrase_never_crosses_punctuation():
    query = content_words("language name, or none")
    target = content_words("the language name none")
    # 'name none' are adjacent in the target but a comma separates them in the query.
    assert longest_shared_run(query, target) == (0, 2)  # 'language name'
    assert longest_shared_run(content_words("name none"), target) == (0, 2)


def test_phrase_length_counts_written_words():
    query = content_words("keep trec_eval order")  # keep | trec eval | order
    target = content_words("trec_eval keeps its order")
    # 'trec eval' is the longest shared run (2 content words) but one written word
    assert longest_shared_run(query, target) == (1, 2)
    assert query.span_size(1, 2) == 1


# --- per-case figures, worked by hand -----------------------------------------------------


def test_overlap_and_phrase_hand_worked(report):
    checks, _ = report
    c = checks["c-copy"]
    # query content words: printing one line messages stderr traceback ('on', 'no' are stopwords)
    assert c.query_words == ("printing", "one", "line", "messages", "stderr", "traceback")
    # target title+text words: fail prints one clear line stderr traceback.
    # verbatim: one, line, stderr, traceback = 4/6; stemmed adds printing~prints = 5/6
    assert c.overlap == pytest.approx(4 / 6)
    assert c.overlap_stemmed == pytest.approx(5 / 6)
    # 'printing one' = 'prints one' after stemming; 'stderr, no traceback' is split by the comma
    assert c.phrase == ("printing", "one")
    assert c.leak_level == "none"
    assert c.flags == ("overlap 0.83 >= 0.5", "phrase 'printing one'")


def test_name_leak_full_partial_none(report):
    checks, _ = report
    # name format_arguments -> {format, argument}; both in "format the arguments of a call"
    full = checks["c-leak-full"]
    assert full.leak_level == "full" and full.leak.words == ("format", "arguments")
    assert "name leak 'format_arguments'" in full.flags
    # "render arguments PEP 8 style": only 'arguments'. Overlap: verbatim arguments, pep = 2/4,
    # stemmed adds render~rendering = 3/4. No two consecutive words shared -> phrase of 1.
    part = checks["c-leak-part"]
    assert part.leak_level == "partial" and part.leak.words == ("arguments",)
    assert part.overlap == pytest.approx(2 / 4) and part.overlap_stemmed == pytest.approx(3 / 4)
    assert len(part.phrase) == 1
    assert part.flags == ("overlap 0.75 >= 0.5",)  # a partial leak alone is not a flag
    # camelCase name parseJSONLines -> parse json lines: all in the query
    assert checks["c-camel"].leak_level == "full"
    # 'pretty-print a signature' shares no word with format_arguments / its docstring
    clean = checks["c-clean"]
    assert clean.leak_level == "none" and clean.overlap == 0.0 and clean.flags == ()


def test_one_word_name_leak_is_reported_not_flagged(tmp_path):
    case = {
        "id": "c1",
        "tier": "concept",
        "query": "fail loudly on bad input",
        "expected": ["app/cli.py::fail"],
    }
    (check,) = check_fixture(load_fixture(write_fixture(tmp_path, [case]))).cases
    # the whole name 'fail' is in the query, but one everyday word is not a leak worth a flag;
    # overlap: fail of {fail, loudly, bad, input} = 1/4
    assert check.leak_level == "full" and check.overlap_stemmed == pytest.approx(1 / 4)
    assert check.flags == ()


def test_expected_set_size_flag(report):
    checks, _ = report
    assert checks["c-big"].n_expected == 4
    assert checks["c-big"].flags == ("4 expected > 3",)


def test_multi_hop_name_match_hand_worked(report):
    checks, _ = report
    # 'top_k' occurs in both callers' text (search, best_rows): answerable by name match
    assert checks["m-name"].identifiers == ("top_k",)
    assert checks["m-name"].name_matched == "top_k" and not checks["m-name"].needs_relation
    # no identifier at all: needs the relation summary -> best_rows -> top_k
    assert checks["m-relation"].identifiers == ()
    assert checks["m-relation"].needs_relation
    # best_rows is only in summary's text, top_k only in search's: neither is in every unit
    assert checks["m-split"].identifiers == ("best_rows", "top_k")
    assert checks["m-split"].needs_relation
    # 'Corpus.allowed_mask' is called as corpus.allowed_mask(...): matched by its last part
    assert checks["m-dotted"].name_matched == "Corpus.allowed_mask"


def test_tier_summary_hand_worked(report):
    _, checks = report
    tiers = {t.tier: t for t in checks.tiers}
    mh = tiers["multi_hop"]
    assert mh.cases == 4
    assert mh.needs_relation_share == pytest.approx(2 / 4)  # m-relation, m-split
    assert mh.tier_flags == ()  # 50% is not below the 50% threshold
    concept = tiers["concept"]
    # flagged: c-copy, c-leak-full? (its overlap: format, arguments of {format, arguments, call}
    # = 2/3 > 0.5), c-leak-part, c-camel (3/3), c-big; not c-clean
    assert concept.flagged == 5 and concept.cases == 6
    assert concept.full_leak_share == pytest.approx(2 / 6)
    assert concept.max_expected == 4


def test_unanswerable_cases_do_not_dilute_the_tier_means(tmp_path):
    unanswerable = {
        "id": "u1",
        "tier": "concept",
        "query": "what is the SLA",
        "answerability": "unanswerable",
    }
    fixture = load_fixture(write_fixture(tmp_path, [CASES[0], unanswerable]))
    (concept,) = check_fixture(fixture).tiers
    assert concept.cases == 2 and concept.flagged == 1
    assert concept.mean_overlap_stemmed == pytest.approx(5 / 6)  # c-copy alone
    assert concept.mean_expected == 1.0 and concept.phrase_share == 1.0


def test_tier_flag_when_too_few_multi_hop_cases_need_a_relation(tmp_path):
    fixture = load_fixture(write_fixture(tmp_path, CASES))
    checks = check_fixture(fixture, apply_overrides(["multi_hop.min_needs_relation=0.75"]))
    assert len(checks.tier_flags) == 1 and checks.tier_flags[0].startswith("multi_hop: only 50%")


def test_threshold_overrides():
    table = apply_overrides(
        ["*.max_expected=none", "concept.max_phrase=3", "exact.flag_strong_candidate=true"]
    )
    concept = thresholds_for("concept", "paraphrase", table)
    assert concept.max_phrase == 3 and concept.max_overlap_stemmed == 0.5 and concept.max_expected == 3
    # '*' is every tier not listed, on top of its kind's thresholds
    assert thresholds_for("docs", "paraphrase", table).max_expected is None
    assert thresholds_for("docs", "paraphrase", table).max_overlap_stemmed == 0.5
    exact = thresholds_for("exact", "lookup", table)
    assert exact.flag_strong_candidate is True and exact.max_expected == 2
    # by name alone, a tier gets its stock kind: table["exact"] is a lookup tier's, "docs" a paraphrase's
    assert table["exact"] == exact and table["concept"] == concept
    assert thresholds_for("docs", table) == thresholds_for("docs", "paraphrase", table)
    assert thresholds_for("multi_hop").min_needs_relation == 0.5
    with pytest.raises(ValueError, match="flag_strong_candidate must be true or false"):
        apply_overrides(["concept.flag_strong_candidate=1"])


def test_query_identifiers_and_spellings():
    names = {"prepare", "search"}
    assert query_identifiers("who calls a ranker's prepare before search", names) == ("prepare", "search")
    assert query_identifiers("what does clearBuiltCache do in trec.py", ()) == ("clearBuiltCache", "trec.py")
    assert query_identifiers("plain words only", names) == ()
    assert spellings("trec.py") == ("trec.py", "trec")
    assert spellings("RRFRanker._fuse") == ("RRFRanker._fuse", "_fuse")


# --- ambiguity candidates -----------------------------------------------------------------


def finder_for(fixture):
    bm25 = BM25Ranker()
    bm25.prepare(fixture.corpus)
    return AmbiguityFinder(fixture, {"bm25": bm25})


def test_strong_candidate_flags_until_judged(tmp_path):
    # tier 'docs' (not a stock tier): checked as a paraphrase tier, like any tier that is not a lookup
    case = {
        "id": "c1",
        "tier": "docs",
        "query": "rank documents with filters",
        "expected": ["app/a.py::lookup"],
    }
    fixture = load_fixture(write_fixture(tmp_path, [case]))
    (check,) = check_fixture(fixture, finder=finder_for(fixture)).cases
    # b.py::lookup has 'filters' as well: BM25 ranks it first; same name as the expected unit
    (cand,) = check.candidates
    assert cand.unit_id == "app/b.py::lookup" and cand.rank == 1
    assert cand.reasons == ("same_name", "bm25_above") and cand.strong
    assert "ambiguous: app/b.py::lookup" in check.flags
    # judged non-relevant (grade 0): reviewed, no longer a candidate
    case["expected"] = {"app/a.py::lookup": 1, "app/b.py::lookup": 0}
    fixture = load_fixture(write_fixture(tmp_path, [case]))
    (check,) = check_fixture(fixture, finder=finder_for(fixture)).cases
    assert check.candidates == ()
    # the wording flags remain: 'rank documents' is copied from the target (2 of 3 words)
    assert check.flags == ("overlap 0.67 >= 0.5", "phrase 'rank documents'")


class FixedRanker:
    """A plug-in ranker (the `search` protocol only) returning the same list for every query."""

    def __init__(self, ids):
        self.ids = ids

    def search(self, query, k, constraints=None):
        from evalpipe.core import Hit

        return [Hit(i) for i in self.ids[:k]]


def test_two_rankers_above_the_expected_unit_are_two_reasons(tmp_path):
    case = {"id": "c1", "tier": "docs", "query": "zulu", "expected": ["app/a.py::lookup"]}
    fixture = load_fixture(write_fixture(tmp_path, [case]))
    rankers = {
        "one": FixedRanker(["app/run.py::run", "app/a.py::lookup"]),
        "two": FixedRanker(["app/rank.py::top_k", "app/run.py::run", "app/a.py::lookup"]),
    }
    (check,) = check_fixture(fixture, finder=AmbiguityFinder(fixture, rankers)).cases
    by_id = {c.unit_id: c for c in check.candidates}
    # run: first for 'one', second for 'two' -> rank 1, two reasons -> strong
    assert by_id["app/run.py::run"].reasons == ("one_above", "two_above")
    assert by_id["app/run.py::run"].rank == 1 and by_id["app/run.py::run"].strong
    # top_k: first for 'two' only; b.py::lookup: same name, never ranked -> not strong
    assert by_id["app/rank.py::top_k"].reasons == ("two_above",) and not by_id["app/rank.py::top_k"].strong
    assert by_id["app/b.py::lookup"].reasons == ("same_name",) and by_id["app/b.py::lookup"].rank is None
    assert check.flags == ("ambiguous: app/run.py::run",)


def test_subject_of_a_multi_hop_question_is_not_a_strong_candidate(tmp_path):
    case = {
        "id": "m1",
        "tier": "multi_hop",
        "query": "what calls top_k",
        "expected": ["app/search.py::search", "app/report.py::best_rows"],
    }
    fixture = load_fixture(write_fixture(tmp_path, [case]))
    (check,) = check_fixture(fixture, finder=finder_for(fixture)).cases
    named = [c for c in check.candidates if c.unit_id == "app/rank.py::top_k"]
    assert named and "named_in_query" in named[0].reasons and not named[0].strong


def test_near_duplicates(tmp_path):
    words = "alpha bravo charlie delta echo foxtrot golf hotel india"
    units = [
        unit("d/1", "phonetic", words),
        unit("d/2", "phonetic", words + " juliet"),  # Jaccard 10/11 with d/1
        unit("d/3", "phonetic", "alpha bravo charlie delta kilo lima mike november oscar"),  # 5/15
    ]
    case = {"id": "c1", "tier": "concept", "query": "zulu", "expected": ["d/1"]}
    fixture = load_fixture(write_fixture(tmp_path, [case], units))
    assert AmbiguityFinder(fixture).near_duplicates("d/1") == ["d/2"]


# --- the per-run summary ------------------------------------------------------------------


def test_difficulty_metrics(tmp_path):
    fixture = load_fixture(write_fixture(tmp_path, CASES))
    m = difficulty_metrics(fixture)
    # concept stemmed overlaps: c-copy 5/6, c-leak-full 2/3, c-leak-part 3/4, c-camel 1,
    # c-clean 0, c-big 0 (neither 'anything' nor 'whatsoever' occurs)
    assert m["fixture/concept/overlap_stemmed"] == pytest.approx((5 / 6 + 2 / 3 + 3 / 4 + 1) / 6)
    assert m["fixture/concept/flagged_share"] == pytest.approx(5 / 6)
    assert m["fixture/multi_hop/needs_relation_share"] == pytest.approx(0.5)
    assert m["fixture/flagged_share"] == pytest.approx(5 / 10)
    assert m["fixture/concept/cases"] == 6


@pytest.mark.slow
def test_every_run_logs_the_difficulty_summary(tmp_path, tracking_uri):
    fx = write_fixture(tmp_path, CASES)
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalpipe",
            f"fixture.path={fx}",
            f"tracking.uri={tracking_uri}",
            f"hydra.run.dir={tmp_path / 'out'}",
            "plots=false",
            "progress=false",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    run_id = re.search(r"run ([0-9a-f]{32})", proc.stdout).group(1)
    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=tracking_uri).get_run(run_id)
    assert run.info.status == "FINISHED"
    m = run.data.metrics
    # the same hand-worked figures as test_difficulty_metrics
    assert m["fixture/concept/overlap_stemmed"] == pytest.approx((5 / 6 + 2 / 3 + 3 / 4 + 1) / 6)
    assert m["fixture/multi_hop/needs_relation_share"] == pytest.approx(0.5)
    assert m["fixture/flagged_share"] == pytest.approx(0.5)
    assert m["recall_at_5"] >= 0  # logged in the same batch as the run's own metrics


# --- gold fixtures ------------------------------------------------------------------------


def gold_v1() -> Path:
    for name in ("gold_v1.yaml", "gold.yaml"):
        path = ROOT / "fixtures" / name
        if path.is_file() and fixture_version(path) == 1:
            return path
    pytest.skip("no version-1 gold fixture (fixtures/gold_v1.yaml or gold.yaml with version: 1)")


def test_v1_is_flagged_on_the_cases_the_audit_quotes():
    fixture = load_fixture(gold_v1())
    report = check_fixture(fixture, finder=finder_for(fixture))

    def find(*needles: str):
        found = [c for c in report.cases if all(n in c.query for n in needles)]
        assert found, needles
        return found

    (pep8,) = find("render a parameter list PEP 8 style")
    assert pep8.flags and pep8.phrase == ("render", "parameter", "list")
    (stderr,) = find("print a one-line message on stderr", "no traceback")
    assert any(f.startswith("overlap") for f in stderr.flags)
    # trec_eval's tie-breaking: the README section that answers it is not listed, BM25 ranks
    # it first, and another concept case lists it -> a strong candidate flags the case.
    ties = [c for c in report.cases if c.tier == "concept" and re.search(r"\bti(?:ed|es)\b", c.query)]
    assert ties
    for case in ties:
        assert "ambiguous: README.md#metrics~2" in case.flags, case.case_id
    assert any(flag.startswith("multi_hop: only") for flag in report.tier_flags)


def fixture_version(path: Path) -> int:
    version = str(yaml.safe_load(path.read_text(encoding="utf-8")).get("version") or "0")
    return int(version) if version.isdigit() else 0


GOLD = ROOT / "fixtures" / "gold.yaml"


@pytest.mark.skipif(fixture_version(GOLD) < 2, reason="fixtures/gold.yaml is not version 2 yet")
def test_shipped_gold_passes_strict():
    proc = run_checker(GOLD, "--strict")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr


# --- the command line ---------------------------------------------------------------------


def run_checker(*args, module: tuple[str, ...] = ("evalpipe", "check-fixture")):
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", *module, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_strict_exit_codes_and_json(tmp_path):
    flagged = write_fixture(tmp_path, CASES[:1], name="flagged.yaml")
    proc = run_checker(flagged, "--no-ambiguity")
    assert proc.returncode == 0, proc.stderr  # flags are reported, not fatal
    assert "c-copy" in proc.stdout
    out = tmp_path / "out.json"
    proc = run_checker(flagged, "--strict", "--json", out, module=("evalpipe.fixture_check",))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "1 flagged case(s) and 0 tier flag(s)" in lines[0] and str(out) in lines[0]
    data = json.loads(out.read_text())
    assert data["flagged_cases"] == ["c-copy"]
    (case,) = data["cases"]
    assert case["overlap_stemmed"] == pytest.approx(5 / 6) and case["phrase"] == ["printing", "one"]
    assert data["thresholds"]["concept"]["max_overlap_stemmed"] == 0.5
    clean = write_fixture(tmp_path, [CASES[4]], name="clean.yaml")
    proc = run_checker(clean, "--strict")
    assert proc.returncode == 0, proc.stderr
    assert "no flags" in proc.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (("missing.yaml",), "fixture not found: missing.yaml"),
        (("{clean}", "--threshold", "concept.max_overlap=1"), "bad threshold 'concept.max_overlap=1'"),
        (("{clean}", "--threshold", "concept.max_phrase=lots"), "max_phrase must be a number"),
        (("{clean}", "--json", "{tmp}/no/such/dir/x.json"), "cannot write --json"),
        (("{bad}",), "expected ID(s) not in corpus"),
        ((), "the following arguments are required"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, needle):
    clean = write_fixture(tmp_path, [CASES[4]], name="clean.yaml")
    bad = write_fixture(tmp_path, [{**CASES[4], "expected": ["app/nope.py::x"]}], name="bad.yaml")
    args = [a.format(clean=clean, bad=bad, tmp=tmp_path) for a in args]
    proc = run_checker(*args, "--no-ambiguity")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


# --- tier kinds: the wording checks reach every tier whatever its name ---------------------

LEAKY = [  # each one flagged as a paraphrase (hand-worked in the concept tests above)
    ("printing one line messages on stderr, no traceback", ["app/cli.py::fail"]),
    ("format the arguments of a call", ["app/fmt.py::format_arguments"]),
    ("parse json lines", ["app/io.py::parseJSONLines"]),
]
LOOKUPS = [  # names as typed: snake_case, camelCase lowercased, spaced, Class.method
    ("top_k", ["app/rank.py::top_k"]),
    ("parsejsonlines", ["app/io.py::parseJSONLines"]),
    ("format arguments", ["app/fmt.py::format_arguments"]),
    ("Corpus.allowed_mask", ["app/model.py::Corpus.allowed_mask"]),
]


def cases_in(tier: str, rows) -> list[dict]:
    return [{"id": f"{tier}-{i}", "tier": tier, "query": q, "expected": e} for i, (q, e) in enumerate(rows)]


@pytest.mark.parametrize("tier", ["paraphrase", "semantic", "nl-queries", "docs"])
def test_custom_named_paraphrase_tiers_get_the_wording_checks(tmp_path, tier):
    fixture = load_fixture(write_fixture(tmp_path, cases_in(tier, LEAKY)))
    report = check_fixture(fixture)
    assert report.kinds == {tier: "paraphrase"}
    flags = [c.flags for c in report.cases]
    assert flags[0] == ("overlap 0.83 >= 0.5", "phrase 'printing one'")
    assert "name leak 'format_arguments'" in flags[1]
    assert "name leak 'parseJSONLines'" in flags[2] and "phrase 'parse json lines'" in flags[2]
    (summary,) = report.tiers
    assert summary.kind == "paraphrase" and summary.flagged == 3
    # the per-run summary counts them too
    assert difficulty_metrics(fixture)[f"fixture/{tier}/flagged_share"] == 1.0


def test_lookup_tier_is_measured_not_named(tmp_path):
    # a custom-named tier of name lookups is a lookup tier: its leaks are its point
    fixture = load_fixture(write_fixture(tmp_path, cases_in("symbols", LOOKUPS)))
    report = check_fixture(fixture)
    assert report.kinds == {"symbols": "lookup"} and report.flagged_cases == []
    # a tier named `exact` whose queries are sentences is checked as a paraphrase tier
    fixture = load_fixture(write_fixture(tmp_path, cases_in("exact", LEAKY)))
    report = check_fixture(fixture)
    assert report.kinds == {"exact": "paraphrase"} and len(report.flagged_cases) == 3


def test_lookup_share_threshold(tmp_path):
    from evalpipe.fixture_check.tier_kind import LOOKUP_SHARE

    assert LOOKUP_SHARE == 0.75
    # 3 lookups + 1 sentence = 3/4 = 0.75: a lookup tier (at the threshold)
    fixture = load_fixture(write_fixture(tmp_path, cases_in("names", LOOKUPS[:3] + LEAKY[:1])))
    assert check_fixture(fixture).kinds == {"names": "lookup"}
    # 2 lookups + 1 sentence = 2/3 < 0.75: a paraphrase tier, and the sentence is flagged
    fixture = load_fixture(write_fixture(tmp_path, cases_in("names", LOOKUPS[:2] + LEAKY[:1])))
    report = check_fixture(fixture)
    assert report.kinds == {"names": "paraphrase"}
    # all flagged: 'top_k' (overlap 1/1), 'parsejsonlines' (parseJSONLines run together: a full
    # leak, overlap 1/1) and the sentence
    assert [c.case_id for c in report.flagged_cases] == ["names-0", "names-1", "names-2"]
    assert "name leak 'parseJSONLines'" in report.cases[1].flags


def test_is_name_lookup_words_and_letters(tmp_path):
    from evalpipe.fixture_check.tier_kind import is_name_lookup

    fixture = load_fixture(write_fixture(tmp_path, CASES[:1]))
    units = {
        u: [fixture.corpus.get(u)] for u in ("app/fmt.py::format_arguments", "app/io.py::parseJSONLines")
    }
    assert is_name_lookup("format_arguments", units["app/fmt.py::format_arguments"])
    assert is_name_lookup("fmt format arguments", units["app/fmt.py::format_arguments"])  # path words count
    assert is_name_lookup("parsejsonlines", units["app/io.py::parseJSONLines"])  # letters of the ID
    # one word that is not the name's: not a lookup
    assert not is_name_lookup("format the arguments of a call", units["app/fmt.py::format_arguments"])
    assert not is_name_lookup("parse json rows", units["app/io.py::parseJSONLines"])


def test_declared_tier_kinds_win_and_relational_tiers_need_relations(tmp_path):
    hops = [{**c, "id": c["id"] + "-h", "tier": "hops"} for c in CASES if c["tier"] == "multi_hop"]
    path = write_fixture(tmp_path, hops)
    # undeclared, a custom relational tier fails closed: checked as a paraphrase tier
    report = check_fixture(load_fixture(path))
    assert report.kinds == {"hops": "paraphrase"}
    assert report.tiers[0].needs_relation_share is None
    # declared relational in the fixture: the multi_hop rules, by kind (2 of 4 need a relation)
    data = yaml.safe_load(path.read_text())
    data["tier_kinds"] = {"hops": "relational"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    fixture = load_fixture(path)
    assert fixture.tier_kinds == {"hops": "relational"}
    report = check_fixture(fixture)
    assert report.kinds == {"hops": "relational"}
    (summary,) = report.tiers
    assert summary.needs_relation_share == 0.5 and summary.tier_flags == ()
    assert {c.case_id: c.name_matched for c in report.cases}["m-name-h"] == "top_k"
    report = check_fixture(fixture, apply_overrides(["hops.min_needs_relation=0.75"]))
    assert report.tier_flags == [
        "hops: only 50% of hops cases need a relation (< 75%); the rest are answerable by name match"
    ]
    # a declared kind overrides the measure: a lookup tier declared paraphrase gets flagged
    data = {"name": "t", "corpus": "corpus.jsonl", "tier_kinds": {"names": "paraphrase"}}
    data["cases"] = cases_in("names", LOOKUPS)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    report = check_fixture(load_fixture(path))
    assert report.kinds == {"names": "paraphrase"} and report.flagged_cases


@pytest.mark.parametrize(
    "value, needle",
    [
        ("[concept]", "'tier_kinds' must be a mapping {tier: kind}"),
        (
            "{concept: fuzzy}",
            "tier_kinds: tier 'concept' has kind 'fuzzy'; use one of "
            "['lookup', 'paraphrase', 'relational', 'multi_section']",
        ),
    ],
)
def test_bad_tier_kinds_exit_2_with_one_line(tmp_path, value, needle):
    path = write_fixture(tmp_path, [CASES[4]])
    path.write_text(path.read_text() + f"tier_kinds: {value}\n")
    proc = run_checker(path, "--no-ambiguity")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(path) in lines[0], proc.stderr


# --- the overlap threshold: exactly half is a copy ----------------------------------------

PHONETIC = [
    unit("w/a.py::quux", "quux", "alpha bravo charlie delta echo"),
]


@pytest.mark.parametrize(
    "query, overlap, flagged",
    [
        # content words (hand-counted) / shared with 'quux alpha bravo charlie delta echo'
        ("alpha xray bravo yankee", 2 / 4, True),  # exactly half: flagged (was let through by '>')
        ("alpha xray bravo yankee zulu kilo", 2 / 6, False),
        ("alpha xray bravo yankee charlie kilo", 3 / 6, True),  # half again, at 6 words
        ("alpha xray bravo yankee zulu", 2 / 5, False),  # just under
        ("alpha xray bravo yankee charlie", 3 / 5, True),  # just over
        ("alphas xray bravos yankee", 2 / 4, True),  # stems: alphas -> alpha, bravos -> bravo
        ("alpha alpha xray", 1 / 2, True),  # a repeated word counts once: 1 of 2 distinct words
        ("the alpha of a xray", 1 / 2, True),  # stopwords are not words: 1 of 2
        ("alpha x xray", 1 / 2, True),  # one-letter pieces are not words either
        ("alpha xray yankee", 1 / 3, False),
    ],
)
def test_half_copied_query_is_flagged(tmp_path, query, overlap, flagged):
    case = {"id": "c1", "tier": "paraphrase", "query": query, "expected": ["w/a.py::quux"]}
    (check,) = check_fixture(load_fixture(write_fixture(tmp_path, [case], PHONETIC))).cases
    assert check.overlap_stemmed == overlap
    assert check.phrase_words == 1  # no shared phrase: only the overlap rule can flag
    assert check.flags == ((f"overlap {overlap:.2f} >= 0.5",) if flagged else ())


def test_overlap_threshold_override_is_inclusive_too(tmp_path):
    case = {
        "id": "c1",
        "tier": "concept",
        "query": "alpha xray bravo yankee zulu",
        "expected": ["w/a.py::quux"],
    }
    fixture = load_fixture(write_fixture(tmp_path, [case], PHONETIC))
    (check,) = check_fixture(fixture, apply_overrides(["concept.max_overlap_stemmed=0.4"])).cases
    assert check.flags == ("overlap 0.40 >= 0.4",)  # 2/5 is exactly 0.4
    (check,) = check_fixture(fixture, apply_overrides(["concept.max_overlap_stemmed=0.41"])).cases
    assert check.flags == ()


# --- the checker's own ambiguity ranker ---------------------------------------------------


def test_checker_bm25_is_pinned_with_every_parameter():
    import inspect

    from evalpipe.fixture_check.ranker import CHECKER_BM25, checker_bm25
    from evalpipe.rankers.lexical.bm25 import BM25Ranker

    params = set(inspect.signature(BM25Ranker.__init__).parameters) - {"self"}
    # a new BM25 parameter must be pinned here deliberately, not inherited from its default
    assert set(CHECKER_BM25) - {"_target_"} == params
    assert CHECKER_BM25["k1"] == 1.5 and CHECKER_BM25["b"] == 0.75 and CHECKER_BM25["method"] == "lucene"
    ranker = checker_bm25()
    assert isinstance(ranker, BM25Ranker) and ranker.k1 == 1.5 and ranker.b == 0.75
    assert ranker.fields == ("title", "text", "identifiers")


def test_checker_ambiguity_never_reads_the_shipped_bm25_conf(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from evalpipe.fixture_check import cli

    def refuse(path, *a, **k):
        raise AssertionError(f"the checker read {path}")

    monkeypatch.setattr(OmegaConf, "load", refuse)
    fixture = load_fixture(write_fixture(tmp_path, [CASES[4]]))
    rankers = cli.ambiguity_rankers(fixture, False, err=None)
    assert list(rankers) == ["bm25"] and rankers["bm25"].k1 == 1.5
    out = tmp_path / "check.json"
    assert cli.main([str(tmp_path / "fx.yaml"), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["ambiguity_ranker_config"]["bm25"]["k1"] == 1.5
    assert data["ambiguity_ranker_config"]["bm25"]["_target_"] == "evalpipe.rankers.lexical.bm25.BM25Ranker"
    assert data["tier_kinds"] == {"concept": "paraphrase"}


RUN_TOGETHER = [
    unit("w/b.py::merge_settings", "merge_settings", "def merge_settings(): fileops layer"),
]


@pytest.mark.parametrize(
    "query, overlap, leak",
    [
        # target content words: merge settings (title and code), fileops, layer; joined forms
        # of its compounds: mergesettings.  Query words hand-counted below.
        ("mergesettings xray yankee zulu", 1 / 4, "full"),  # the name run-together: a full leak
        ("file ops xray yankee", 2 / 4, "none"),  # 'file ops' is the target's 'fileops'
        ("file, ops xray yankee", 0 / 4, "none"),  # a comma breaks the pair
        ("fileops xray yankee", 1 / 3, "none"),
        ("merge xray settings yankee", 2 / 4, "full"),  # plain words, as before
    ],
)
def test_run_together_spellings_count_as_copied(tmp_path, query, overlap, leak):
    case = {"id": "c1", "tier": "concept", "query": query, "expected": ["w/b.py::merge_settings"]}
    (check,) = check_fixture(load_fixture(write_fixture(tmp_path, [case], RUN_TOGETHER))).cases
    assert check.overlap_stemmed == overlap
    assert check.leak_level == leak
    assert ("name leak 'merge_settings'" in check.flags) == (leak == "full")
    assert any(f.startswith("overlap") for f in check.flags) == (overlap >= 0.5)


def test_difficulty_summary_follows_the_split_not_just_the_file(tmp_path, monkeypatch):
    # a dev and a test split share the file's sha256; their summaries must not be shared
    from dataclasses import replace

    from evalpipe.fixture_check import summary

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(summary, "_MEMO", {})
    fixture = load_fixture(write_fixture(tmp_path, CASES))
    concept = [c for c in fixture.cases if c.tier == "concept"]
    part = replace(fixture, cases=tuple(c for c in fixture.cases if c.tier != "concept" or c is concept[0]))
    assert difficulty_metrics(fixture)["fixture/concept/cases"] == 6
    assert difficulty_metrics(part)["fixture/concept/cases"] == 1
    assert difficulty_metrics(fixture)["fixture/concept/cases"] == 6


def test_difficulty_summary_is_kept_on_disk_and_a_bad_file_is_recomputed(tmp_path, monkeypatch):
    from evalpipe.fixture_check import summary

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(summary, "_MEMO", {})
    fixture = load_fixture(write_fixture(tmp_path, CASES))
    first = difficulty_metrics(fixture)
    (kept,) = (tmp_path / "cache" / "evalpipe" / "difficulty").glob("*.json")
    assert json.loads(kept.read_text()) == first
    # a new process (empty memo) reads the file: a planted value proves it is read, not recomputed
    kept.write_text(json.dumps({**first, "fixture/flagged_share": 0.25}))
    monkeypatch.setattr(summary, "_MEMO", {})
    assert difficulty_metrics(fixture)["fixture/flagged_share"] == 0.25
    # an unreadable file is a miss: recomputed (the hand-worked 5/10) and rewritten
    kept.write_text("{not json")
    monkeypatch.setattr(summary, "_MEMO", {})
    assert difficulty_metrics(fixture)["fixture/flagged_share"] == pytest.approx(5 / 10)
    assert json.loads(kept.read_text()) == first
    assert not list(kept.parent.glob(".*.tmp"))
