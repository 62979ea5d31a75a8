"""Gold fixtures: loading and validating {query -> expected IDs} cases before any run.

Validation happens up front because a fixture error found mid-run wastes the run,
and an expected ID missing from the corpus silently caps recall below 100%.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from evalpipe.core.files import require_file
from evalpipe.corpus import Corpus, file_sha256, load_jsonl_corpus
from evalpipe.corpus.chunk_cache import DEFAULT_CACHE_DIR
from evalpipe.corpus.chunkers import Chunker
from evalpipe.inputs import documents
from evalpipe.inputs.missing_ids import missing_ids_message
from evalpipe.inputs.strict_yaml import load_file
from evalpipe.paths import resolve_path
from evalpipe.safety.errors import EvalpipeError, FixtureError

STOCK_TIERS = ("exact", "concept", "multi_hop")
CASE_FIELDS = {
    "id",
    "tier",
    "query",
    "expected",
    "winnow_constraints",
    # RAG label fields (rag_quality): scored by evalpipe.scoring.rag when present.
    "expected_documents",
    "expected_sections",
    "citation_required",
    "answerability",
    "section_match",
    "notes",
}
FIXTURE_FIELDS = {"name", "version", "description", "corpus", "documents", "cases", "tier_kinds"}
#: What a tier is, for `check-fixture` (docs/fixtures.md#tier-kinds): a name lookup, a
#: paraphrase (the wording checks apply) or a relational question. Optional per fixture;
#: an undeclared tier's kind is measured from its cases.
TIER_KINDS = ("lookup", "paraphrase", "relational", "multi_section")
ANSWERABILITY = ("answerable", "unanswerable")
#: How a case's expected sections are matched (docs/fixtures.md#rag-label-fields): `any` one of
#: them found is a section hit; `all` of them must be found (a question that needs both parts).
SECTION_MATCH = ("any", "all")
#: A tier becomes part of metric names (`tier/<tier>/recall_at_5`), so it must be a valid MLflow name.
TIER_PATTERN = re.compile(r"\w[\w.\-]*")


@dataclass(frozen=True)
class Case:
    """One gold case. `qrels` maps expected IDs to a relevance grade (1 for a plain list)."""

    id: str
    tier: str
    query: str
    qrels: Mapping[str, int]
    winnow_constraints: Mapping[str, Any] = field(default_factory=dict)
    expected_documents: tuple[str, ...] = ()
    expected_sections: tuple[str, ...] = ()
    citation_required: bool = False
    answerability: str = "answerable"
    line: int = 0
    #: Graded labels when written as a mapping ({document: grade}, {section: grade}); empty for a
    #: plain list (grade 1 each). `expected_documents` / `expected_sections` are the relevant ones.
    document_grades: Mapping[str, int] = field(default_factory=dict)
    section_grades: Mapping[str, int] = field(default_factory=dict)
    section_match: str = "any"

    @property
    def expected(self) -> list[str]:
        return list(self.expected_ids)

    @cached_property
    def expected_ids(self) -> tuple[str, ...]:
        """The expected IDs (positive grades) once per case: every result and miss shares them."""
        return tuple(d for d, g in self.qrels.items() if g > 0)

    @property
    def has_rag_labels(self) -> bool:
        return bool(self.expected_documents) or self.answerability == "unanswerable" or self.citation_required


@dataclass(frozen=True)
class Fixture:
    name: str
    cases: tuple[Case, ...]
    corpus: Corpus
    source: str = ""
    sha256: str = ""
    version: str = ""
    # What loading left out, one line each (e.g. judged queries without text): shown with the run.
    notes: tuple[str, ...] = ()
    #: The part of the cases measured (`evalpipe.inputs.split`): all, dev or test.
    split: str = "all"
    split_label: str = ""
    #: `tier_kinds:` as declared in the YAML ({tier: kind}); undeclared tiers are measured.
    tier_kinds: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """The name as reports print it: `gold`, or `gold [dev split (seed 0, test fraction 0.5)]`."""
        return f"{self.name} [{self.split_label}]" if self.split_label else self.name

    @property
    def tiers(self) -> list[str]:
        """Stock tiers first (when present), then any extra tier in order of appearance."""
        seen = list(dict.fromkeys(c.tier for c in self.cases))
        return [t for t in STOCK_TIERS if t in seen] + [t for t in seen if t not in STOCK_TIERS]

    def tier_counts(self) -> dict[str, int]:
        counts = Counter(c.tier for c in self.cases)
        return {t: counts[t] for t in self.tiers}


def _case_lines(text: str) -> list[int]:
    """1-based line of each item under `cases:`, so errors can point at it."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "cases" and isinstance(value, yaml.SequenceNode):
            return [item.start_mark.line + 1 for item in value.value]
    return []


def _type_name(value: Any) -> str:
    name = "null" if value is None else type(value).__name__
    return {"ListConfig": "list", "DictConfig": "dict"}.get(name, name)


def _id(raw: Any, where: str, what: str) -> str:
    """An ID as written: a string, or an integer (numeric IDs of BEIR/TREC collections)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise FixtureError(f"{where}: {what} must be a string ID, got {_type_name(raw)} {raw!r}")
    return str(raw)


def _qrels(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        return {}
    if isinstance(raw, str):
        return {raw: 1}
    if isinstance(raw, Mapping):
        out = {}
        for k, v in raw.items():
            if not isinstance(v, int) or isinstance(v, bool):
                raise FixtureError(f"{where}: grade of expected {k!r} must be an integer, got {v!r}")
            out[_id(k, where, "each expected ID")] = v
        return out
    if isinstance(raw, list):
        return {_id(x, where, "each expected ID"): 1 for x in raw}
    raise FixtureError(
        f"{where}: 'expected' must be a list of IDs or a mapping {{id: grade}}, got {_type_name(raw)} {raw!r}"
    )


def _str_tuple(raw: Any, where: str, name: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if not isinstance(raw, list):
        raise FixtureError(f"{where}: {name} must be a list of IDs, got {_type_name(raw)} {raw!r}")
    return tuple(_id(x, where, f"each of {name}") for x in raw)


def _graded_names(raw: Any, where: str, name: str) -> dict[str, int]:
    """A list of names (grade 1 each) or a mapping {name: integer grade}, as `expected` is written."""
    if isinstance(raw, Mapping):
        out: dict[str, int] = {}
        for key, grade in raw.items():
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise FixtureError(
                    f"{where}: {name}: the grade of {key!r} must be an integer (2 main answer, 1 helps, "
                    f"0 judged not relevant), got {grade!r}"
                )
            out[_id(key, where, f"each of {name}")] = grade
        return out
    return dict.fromkeys(_str_tuple(raw, where, name), 1)


def check_tier(raw: Any, where: str) -> str:
    """A tier name; extra tiers are allowed, but one that looks like a misspelt stock tier is not."""
    if raw is None:
        return "exact"
    if not isinstance(raw, str) or not TIER_PATTERN.fullmatch(raw):
        raise FixtureError(
            f"{where}: tier must be a word (letters, digits, _ . -) such as {', '.join(STOCK_TIERS)}, "
            f"got {raw!r}"
        )
    if raw not in STOCK_TIERS:
        close = difflib.get_close_matches(raw.lower(), STOCK_TIERS, n=1, cutoff=0.8)
        if close:
            raise FixtureError(
                f"{where}: unknown tier {raw!r}: did you mean {close[0]!r}? (stock tiers: "
                f"{', '.join(STOCK_TIERS)}; other names make extra tiers)"
            )
    return raw


def _constraints(raw: Any, where: str) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FixtureError(f"{where}: winnow_constraints must be a mapping like {{language: go}}")
    for key, value in raw.items():
        values = value if isinstance(value, list) else [value]
        if not isinstance(key, str) or any(isinstance(v, Mapping | list) or v is None for v in values):
            raise FixtureError(
                f"{where}: winnow_constraints {key!r}: give a value or a list of values, got {value!r}"
            )
    return dict(raw)


def parse_cases(raw_cases: Any, where: str, lines: Sequence[int] = ()) -> list[Case]:
    """Turn raw case mappings into Cases, raising FixtureError on the first bad one."""
    if not isinstance(raw_cases, list) or not raw_cases:
        got = "an empty list" if raw_cases == [] else f"{_type_name(raw_cases)} {raw_cases!r}"[:80]
        raise FixtureError(f"{where}: 'cases' must be a non-empty list of cases, got {got}")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_cases):
        line = lines[i] if i < len(lines) else 0
        loc = f"{where}:{line}" if line else f"{where} (case #{i + 1})"
        if not isinstance(raw, Mapping):
            raise FixtureError(f"{loc}: each case must be a mapping with id, tier, query, expected")
        if raw.get("id") is None or str(raw.get("id")).strip() == "":
            raise FixtureError(f"{loc}: case has no 'id'")
        cid = _id(raw.get("id"), loc, "the case 'id'").strip()
        at = f"{loc}: case {cid!r}"
        unknown = sorted(set(raw) - CASE_FIELDS, key=str)
        if unknown:
            raise FixtureError(f"{at}: unknown field(s) {unknown}; allowed: {sorted(CASE_FIELDS)}")
        if cid in seen:
            raise FixtureError(f"{at}: duplicate case id (first defined at line {seen[cid]})")
        seen[cid] = line
        query = raw.get("query")
        if query is not None and not isinstance(query, str):
            raise FixtureError(
                f'{at}: query must be text, got {_type_name(query)} {query!r} (quote it: query: "...")'
            )
        if not isinstance(query, str) or not query.strip():
            raise FixtureError(f"{at}: empty query")
        answerability = raw.get("answerability") or "answerable"
        if answerability not in ANSWERABILITY:
            raise FixtureError(
                f"{at}: answerability must be one of {list(ANSWERABILITY)}, got {answerability!r}"
            )
        tier = check_tier(raw.get("tier"), at)
        qrels = _qrels(raw.get("expected"), at)
        document_grades = _graded_names(raw.get("expected_documents"), at, "expected_documents")
        section_grades = _graded_names(raw.get("expected_sections"), at, "expected_sections")
        expected_documents = tuple(d for d, g in document_grades.items() if g > 0)
        graded_documents = isinstance(raw.get("expected_documents"), Mapping)
        graded_sections = isinstance(raw.get("expected_sections"), Mapping)
        section_match = raw.get("section_match", "any")
        if section_match not in SECTION_MATCH:
            raise FixtureError(f"{at}: section_match must be 'any' or 'all', got {section_match!r}")
        if section_match == "all" and sum(g > 0 for g in section_grades.values()) < 2:
            raise FixtureError(
                f"{at}: section_match: all needs at least two expected_sections of grade >= 1 "
                "(with one section, 'any' and 'all' are the same question)"
            )
        if (
            answerability == "answerable"
            and not any(g > 0 for g in qrels.values())
            and not expected_documents
        ):
            raise FixtureError(
                f"{at}: empty 'expected' on an answerable case; list the IDs that answer it "
                "or mark it 'answerability: unanswerable'"
            )
        citation = raw.get("citation_required", False)
        if not isinstance(citation, bool):
            raise FixtureError(f"{at}: citation_required must be true or false, got {citation!r}")
        constraints = _constraints(raw.get("winnow_constraints"), at)
        cases.append(
            Case(
                id=cid,
                tier=tier,
                query=query.strip(),
                qrels=qrels,
                winnow_constraints=constraints,
                expected_documents=expected_documents,
                expected_sections=tuple(x for x, g in section_grades.items() if g > 0),
                citation_required=citation,
                answerability=answerability,
                line=line,
                document_grades=document_grades if graded_documents else {},
                section_grades=section_grades if graded_sections else {},
                section_match=section_match,
            )
        )
    return cases


def check_against_corpus(cases: Sequence[Case], corpus: Corpus, where: str) -> None:
    """Every expected ID (and expected document) must exist in the corpus."""
    # A unit without document_id is a whole document (as the RAG measures read it).
    documents = {str(u.get("document_id") or u.id) for u in corpus}
    missing_message = missing_ids_message(cases, corpus, where)  # every affected case at once
    if missing_message:
        raise FixtureError(missing_message)
    for case in cases:
        loc = f"{where}:{case.line}" if case.line else where
        if case.winnow_constraints:
            excluded = [
                d for d, g in case.qrels.items() if g > 0 and not corpus.allows(d, case.winnow_constraints)
            ]
            if excluded:
                raise FixtureError(
                    f"{loc}: case {case.id!r}: expected ID(s) {excluded[:3]} are outside the case's own "
                    f"winnow_constraints {dict(case.winnow_constraints)}, so no ranker can return them "
                    "(a misspelt key or value filters everything out)"
                )
        missing_docs = [d for d in case.document_grades or case.expected_documents if d not in documents]
        if missing_docs:
            raise FixtureError(
                f"{loc}: case {case.id!r}: expected_documents not in corpus: {missing_docs[:3]}"
            )


def load_fixture(
    path: str | Path,
    corpus: str | Path | None = None,
    name: str | None = None,
    split: str = "all",
    split_seed: int | str = 0,
    test_fraction: float | None = None,
    chunker: Chunker | None = None,
    chunk_cache: str | None = DEFAULT_CACHE_DIR,
) -> Fixture:
    """Load and validate a YAML fixture and its corpus (path relative to the fixture file).

    `name` (config) overrides the fixture's own name; it names the MLflow experiment.
    `split`, `split_seed`, `test_fraction`: `evalpipe.inputs.split.loaded`.
    `chunker` and `chunk_cache` apply to a fixture over a documents folder (`documents:`,
    `evalpipe.inputs.documents`): how its documents are cut (the heading chunker when None)
    and where chunked corpora are cached (None: not cached).
    """
    # lazy: evalpipe.inputs, ~3 ms
    from evalpipe.inputs import split as splits

    fixture = _load_fixture(path, corpus, name, chunker, chunk_cache)
    return splits.loaded(fixture, split, split_seed, test_fraction)


def _load_fixture(
    path: str | Path,
    corpus: str | Path | None,
    name: str | None,
    chunker: Chunker | None = None,
    chunk_cache: str | None = DEFAULT_CACHE_DIR,
) -> Fixture:
    if not isinstance(path, str | Path):
        raise FixtureError(f"fixture.path must be the path of a YAML file, got {_type_name(path)} {path!r}")
    if name is not None and not isinstance(name, str):
        raise FixtureError(f"fixture.name must be text, got {_type_name(name)} {name!r}")
    fpath = resolve_path(path)
    try:
        require_file(fpath, "fixture file", "set fixture.path=... to an existing YAML file")
        data, text = load_file(fpath)
    except FixtureError:
        raise
    except EvalpipeError as exc:
        raise FixtureError(str(exc)) from None
    if data is None:
        raise FixtureError(f"{fpath}: the fixture file is empty (a mapping with name, corpus and cases)")
    if not isinstance(data, Mapping):
        raise FixtureError(
            f"{fpath}: a fixture is a mapping with name, corpus and cases, got a {_type_name(data)} "
            "(remove the leading '- ' or wrap the cases under 'cases:')"
        )
    unknown = sorted(set(data) - FIXTURE_FIELDS, key=str)
    if unknown:
        raise FixtureError(
            f"{fpath}: unknown top-level field(s) {unknown}; allowed: {sorted(FIXTURE_FIELDS)}"
        )
    for key in ("name", "version", "description"):
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, str | int | float)):
            raise FixtureError(f"{fpath}: '{key}' must be a single value, got {_type_name(value)} {value!r}")
    tier_kinds = _tier_kinds(data.get("tier_kinds"), str(fpath))
    if data.get("documents") is not None and not corpus:
        lines = _case_lines(text)
        documents.refuse_chunk_ids(data.get("cases"), fpath, lines)
        parsed = parse_cases(data.get("cases"), str(fpath), lines)
        cases, units, notes = documents.chunked_cases(data, fpath, parsed, chunker, chunk_cache)
        return Fixture(
            name=str(name or data.get("name") or fpath.stem),
            cases=tuple(cases),
            corpus=units,
            source=str(fpath),
            # what is measured: the labels and the chunked documents (documents + chunker)
            sha256=hashlib.sha256(f"{file_sha256(fpath)} {units.sha256}".encode()).hexdigest(),
            version=str(data.get("version") or ""),
            tier_kinds=tier_kinds,
            notes=notes,
        )
    if chunker is not None:  # a chunker given (chunker=..., fixture.chunker) must cut something
        raise FixtureError(
            f"{fpath}: chunker {chunker!r} is given but this fixture has a prepared 'corpus', no "
            "'documents:' folder to cut: remove chunker=... (or point fixture.path at a documents fixture)"
        )
    corpus_ref = corpus or data.get("corpus")
    if not corpus_ref:
        raise FixtureError(
            f"{fpath}: no 'corpus' given (a JSONL file of units, relative to the fixture) "
            "and no 'documents' (a folder of .md / .rst / .txt documents)"
        )
    if not isinstance(corpus_ref, str | Path):
        raise FixtureError(
            f"{fpath}: 'corpus' must be the path of a JSONL file, got {_type_name(corpus_ref)} {corpus_ref!r}"
        )
    cases = parse_cases(data.get("cases"), str(fpath), _case_lines(text))
    cpath = resolve_path(corpus_ref, base=fpath.parent)
    try:
        units = load_jsonl_corpus(cpath)
    except EvalpipeError as exc:  # the corpus error names its own file and line first
        raise FixtureError(f"{exc} (the corpus of fixture {fpath})") from None
    check_against_corpus(cases, units, str(fpath))
    return Fixture(
        name=str(name or data.get("name") or fpath.stem),
        cases=tuple(cases),
        corpus=units,
        source=str(fpath),
        sha256=file_sha256(fpath),
        version=str(data.get("version") or ""),
        tier_kinds=tier_kinds,
    )


def _tier_kinds(raw: object, where: str) -> dict[str, str]:
    """`tier_kinds: {paraphrase: paraphrase, hops: relational}`: what each named tier is."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise FixtureError(
            f"{where}: 'tier_kinds' must be a mapping {{tier: kind}} with kind one of {list(TIER_KINDS)}, "
            f"got {_type_name(raw)} {raw!r}"
        )
    out: dict[str, str] = {}
    for tier, kind in raw.items():
        if kind not in TIER_KINDS:
            raise FixtureError(
                f"{where}: tier_kinds: tier {tier!r} has kind {kind!r}; use one of {list(TIER_KINDS)}"
            )
        out[str(tier)] = str(kind)
    return out
