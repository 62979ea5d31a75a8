"""Gold fixtures: loading and validating {query -> expected IDs} cases before any run.

Validation happens up front because a fixture error found mid-run wastes the run,
and an expected ID missing from the corpus silently caps recall below 100%.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalpipe.corpus import Corpus, CorpusError, file_sha256, load_jsonl_corpus
from evalpipe.errors import FixtureError
from evalpipe.missing_ids import missing_ids_message
from evalpipe.paths import resolve_path

STOCK_TIERS = ("exact", "concept", "multi_hop")
CASE_FIELDS = {
    "id",
    "tier",
    "query",
    "expected",
    "winnow_constraints",
    # RAG label fields (rag_quality): scored by evalpipe.rag when present.
    "expected_documents",
    "expected_sections",
    "citation_required",
    "answerability",
    "notes",
}
FIXTURE_FIELDS = {"name", "version", "description", "corpus", "cases"}
ANSWERABILITY = ("answerable", "unanswerable")


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

    @property
    def expected(self) -> list[str]:
        return [d for d, g in self.qrels.items() if g > 0]

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
            out[str(k)] = v
        return out
    if isinstance(raw, Sequence):
        return {str(x): 1 for x in raw}
    raise FixtureError(f"{where}: 'expected' must be a list of IDs or a mapping {{id: grade}}")


def _str_tuple(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    return tuple(str(x) for x in raw)


def parse_cases(raw_cases: Any, where: str, lines: Sequence[int] = ()) -> list[Case]:
    """Turn raw case mappings into Cases, raising FixtureError on the first bad one."""
    if not isinstance(raw_cases, list) or not raw_cases:
        raise FixtureError(f"{where}: 'cases' must be a non-empty list")
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(raw_cases):
        line = lines[i] if i < len(lines) else 0
        loc = f"{where}:{line}" if line else f"{where} (case #{i + 1})"
        if not isinstance(raw, Mapping):
            raise FixtureError(f"{loc}: each case must be a mapping with id, tier, query, expected")
        cid = str(raw.get("id") or "").strip()
        if not cid:
            raise FixtureError(f"{loc}: case has no 'id'")
        at = f"{loc}: case {cid!r}"
        unknown = sorted(set(raw) - CASE_FIELDS)
        if unknown:
            raise FixtureError(f"{at}: unknown field(s) {unknown}; allowed: {sorted(CASE_FIELDS)}")
        if cid in seen:
            raise FixtureError(f"{at}: duplicate case id (first defined at line {seen[cid]})")
        seen[cid] = line
        query = raw.get("query")
        if not isinstance(query, str) or not query.strip():
            raise FixtureError(f"{at}: empty query")
        answerability = str(raw.get("answerability") or "answerable")
        if answerability not in ANSWERABILITY:
            raise FixtureError(f"{at}: answerability must be one of {list(ANSWERABILITY)}")
        qrels = _qrels(raw.get("expected"), at)
        expected_documents = _str_tuple(raw.get("expected_documents"))
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
        constraints = raw.get("winnow_constraints") or {}
        if not isinstance(constraints, Mapping):
            raise FixtureError(f"{at}: winnow_constraints must be a mapping like {{language: go}}")
        cases.append(
            Case(
                id=cid,
                tier=str(raw.get("tier") or "exact"),
                query=query.strip(),
                qrels=qrels,
                winnow_constraints=dict(constraints),
                expected_documents=expected_documents,
                expected_sections=_str_tuple(raw.get("expected_sections")),
                citation_required=citation,
                answerability=answerability,
                line=line,
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
        missing_docs = [d for d in case.expected_documents if d not in documents]
        if missing_docs:
            raise FixtureError(
                f"{loc}: case {case.id!r}: expected_documents not in corpus: {missing_docs[:3]}"
            )


def load_fixture(path: str | Path, corpus: str | Path | None = None, name: str | None = None) -> Fixture:
    """Load and validate a YAML fixture and its corpus (path relative to the fixture file).

    `name` (config) overrides the fixture's own name; it names the MLflow experiment.
    """
    fpath = resolve_path(path)
    if not fpath.is_file():
        raise FixtureError(f"fixture file not found: {fpath} (set fixture.path=... to an existing YAML file)")
    text = fpath.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        raise FixtureError(f"{fpath}{line}: invalid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, Mapping):
        raise FixtureError(f"{fpath}: a fixture is a mapping with name, corpus and cases")
    unknown = sorted(set(data) - FIXTURE_FIELDS)
    if unknown:
        raise FixtureError(
            f"{fpath}: unknown top-level field(s) {unknown}; allowed: {sorted(FIXTURE_FIELDS)}"
        )
    corpus_ref = corpus or data.get("corpus")
    if not corpus_ref:
        raise FixtureError(f"{fpath}: no 'corpus' given (a JSONL file of units, relative to the fixture)")
    cases = parse_cases(data.get("cases"), str(fpath), _case_lines(text))
    cpath = resolve_path(corpus_ref, base=fpath.parent)
    try:
        units = load_jsonl_corpus(cpath)
    except CorpusError as exc:
        raise FixtureError(f"{fpath}: corpus {corpus_ref!r}: {exc}") from None
    check_against_corpus(cases, units, str(fpath))
    return Fixture(
        name=str(name or data.get("name") or fpath.stem),
        cases=tuple(cases),
        corpus=units,
        source=str(fpath),
        sha256=file_sha256(fpath),
        version=str(data.get("version") or ""),
    )
