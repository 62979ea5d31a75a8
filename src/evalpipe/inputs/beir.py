"""BEIR-format and TREC-qrels collections as evalpipe fixtures.

A BEIR folder (`corpus.jsonl[.gz]`, `queries.jsonl[.gz]`, `qrels/<split>.tsv`)
becomes the same Fixture + Corpus the gold fixtures use, so every ranker,
metric and report works on it unchanged. Files are streamed once.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evalpipe.core.files import require_file, text_lines
from evalpipe.corpus import Corpus, CorpusError, file_sha256, load_jsonl_corpus
from evalpipe.inputs.fixture import Case, Fixture, check_tier
from evalpipe.inputs.trec import TrecFormatError, read_trec_qrels
from evalpipe.paths import resolve_path
from evalpipe.safety.errors import FixtureError

BEIR_TIER = "all"


def _first_existing(folder: Path, *names: str) -> Path | None:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    return None


def read_queries(path: Path, wanted: set[str] | None = None) -> dict[str, str]:
    """qid -> text from BEIR queries JSONL (`_id`, `text`) or a TSV `qid<TAB>text` file."""
    out: dict[str, str] = {}
    jsonl = path.name.endswith((".jsonl", ".jsonl.gz", ".json"))
    for lineno, line in text_lines(require_file(path, "queries file")):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        if jsonl:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FixtureError(f"{where}: invalid JSON ({exc.msg})") from None
            qid, text = _query_record(rec, where)
        else:
            qid, tab, text = line.partition("\t")
            if not tab:
                raise FixtureError(f"{where}: expected 'query-id<TAB>text', got {line[:80]!r}")
        if wanted is None or qid in wanted:
            out[qid] = text
    return out


def _query_record(rec: object, where: str) -> tuple[str, str]:
    """(qid, text) of a BEIR queries line `{"_id": ..., "text": ...}`."""
    if not isinstance(rec, dict):
        raise FixtureError(f"{where}: each line must be a JSON object with '_id' and 'text'")
    qid = rec.get("_id", rec.get("id"))
    text = rec.get("text", rec.get("query"))
    if isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid).strip():
        raise FixtureError(f"{where}: query '_id' must be a non-empty string, got {qid!r}")
    if text is not None and not isinstance(text, str):
        raise FixtureError(f"{where}: query {qid!r}: 'text' must be a string, got {type(text).__name__}")
    return str(qid), text or ""


def read_tiers(path: str | Path | None) -> dict[str, str]:
    """Optional `qid<TAB>tier` file, so BEIR queries can be sliced like gold tiers."""
    if not path:
        return {}
    p = require_file(resolve_path(path), "tier file", "fixture.tiers=...")
    out: dict[str, str] = {}
    for lineno, line in text_lines(p):
        if not line.strip():
            continue
        qid, tab, tier = line.partition("\t")
        if not tab or not tier.strip():
            raise FixtureError(f"{p}:{lineno}: expected 'query-id<TAB>tier', got {line[:80]!r}")
        out[qid] = check_tier(tier.strip(), f"{p}:{lineno}")
    return out


def build_cases(
    qrels: dict[str, dict[str, int]], queries: dict[str, str], tiers: dict[str, str], where: str
) -> tuple[Case, ...]:
    """One case per judged query with text (BEIR evaluates judged queries only), in qrels order."""
    if not qrels:
        raise FixtureError(f"{where}: no judgements (an empty qrels file)")
    missing = [q for q in qrels if q not in queries]
    if len(missing) == len(qrels):
        raise FixtureError(f"{where}: none of the {len(qrels)} judged query ids has a query text")
    return tuple(
        Case(id=qid, tier=tiers.get(qid, BEIR_TIER), query=queries[qid], qrels=judged)
        for qid, judged in qrels.items()
        if qid in queries and queries[qid].strip()
    )


def dropped_queries_notes(
    qrels: dict[str, dict[str, int]], queries: dict[str, str], where: str
) -> tuple[str, ...]:
    """Judged queries that cannot become cases, counted with examples (never dropped without a word)."""
    notes = []
    absent = [q for q in qrels if q not in queries]
    blank = [q for q in qrels if q in queries and not queries[q].strip()]
    for ids, why in ((absent, "are not in the queries file"), (blank, "have an empty query text")):
        if ids:
            examples = ", ".join(repr(q) for q in ids[:3]) + (", ..." if len(ids) > 3 else "")
            notes.append(
                f"{where}: {len(ids)} of {len(qrels)} judged queries {why} and are left out ({examples})"
            )
    if not any(queries.get(q, "").strip() for q in qrels):
        raise FixtureError(f"{where}: none of the {len(qrels)} judged queries has a query text")
    return tuple(notes)


def check_judged_ids(cases: tuple[Case, ...], corpus: Corpus, where: Path) -> None:
    """Relevant IDs missing from the corpus silently cap recall: refuse them."""
    unknown = sorted({d for c in cases for d, g in c.qrels.items() if g > 0 and d not in corpus})
    if unknown:
        raise FixtureError(f"{where}: {len(unknown)} judged doc id(s) not in the corpus, e.g. {unknown[:3]}")


def combined_sha256(qrels: Path, queries: Path, corpus: Corpus) -> str:
    """Identity of the whole collection: a changed qrels or queries file is a different fixture."""
    parts = [file_sha256(qrels), file_sha256(queries), corpus.sha256]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _check_paths(**values: object) -> None:
    """fixture.<key> paths and names must be text (a list given on the command line is refused here)."""
    for key, value in values.items():
        if value is not None and not isinstance(value, str | Path):
            raise FixtureError(f"fixture.{key} must be text, got {value!r}")


def load_beir(
    path: str | Path,
    qrels_split: str = "test",
    tiers: str | None = None,
    name: str | None = None,
    split: str = "all",
    split_seed: int | str = 0,
    test_fraction: float | None = None,
) -> Fixture:
    """Load a BEIR folder; only queries judged in `qrels/<qrels_split>.tsv` become cases.

    (`split`, dev/test/all, is evalpipe's own hashed split: `evalpipe.inputs.split.loaded`.)"""
    # lazy: evalpipe.inputs, ~3 ms
    from evalpipe.inputs import split as splits

    fixture = _load_beir(path, qrels_split, tiers, name)
    return splits.loaded(fixture, split, split_seed, test_fraction)


def _load_beir(path: str | Path, qrels_split: str, tiers: str | None, name: str | None) -> Fixture:
    split = qrels_split
    _check_paths(path=path, tiers=tiers, qrels_split=split, name=name)
    folder = resolve_path(path)
    if not folder.is_dir():
        raise FixtureError(f"BEIR folder not found: {folder} (set fixture.path=/path/to/dataset)")
    corpus_file = _first_existing(folder, "corpus.jsonl", "corpus.jsonl.gz")
    queries_file = _first_existing(folder, "queries.jsonl", "queries.jsonl.gz")
    qrels_file = folder / "qrels" / f"{split}.tsv"
    for label, f in (("corpus.jsonl[.gz]", corpus_file), ("queries.jsonl[.gz]", queries_file)):
        if f is None:
            raise FixtureError(f"{folder}: no {label} (is this a BEIR dataset folder?)")
    if not qrels_file.is_file():
        splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        raise FixtureError(
            f"{folder}: no qrels/{split}.tsv (fixture.qrels_split=...; available: {splits or 'none'})"
        )
    try:
        qrels = read_trec_qrels(qrels_file)
        corpus = load_jsonl_corpus(corpus_file, name=folder.name)
    except (TrecFormatError, CorpusError) as exc:
        raise FixtureError(str(exc)) from None
    queries = read_queries(queries_file, set(qrels))
    cases = build_cases(qrels, queries, read_tiers(tiers), str(qrels_file))
    notes = dropped_queries_notes(qrels, queries, str(qrels_file))
    unknown = sorted({d for c in cases for d, g in c.qrels.items() if g > 0 and d not in corpus})
    if unknown:
        raise FixtureError(
            f"{qrels_file}: {len(unknown)} judged doc id(s) not in the corpus, e.g. {unknown[:3]}"
        )
    return Fixture(
        name=name or folder.name,
        cases=cases,
        corpus=corpus,
        source=str(folder),
        sha256=corpus.sha256,
        version=split,
        notes=notes,
    )


def load_trec(
    qrels: str | Path,
    queries: str | Path,
    corpus: str | Path,
    name: str | None = None,
    tiers: str | None = None,
    split: str = "all",
    split_seed: int | str = 0,
    test_fraction: float | None = None,
) -> Fixture:
    """A fixture from TREC qrels (`qid 0 docid rel`), a queries file and a JSONL corpus
    (`split`...: `evalpipe.inputs.split.loaded`)."""
    # lazy: evalpipe.inputs, ~3 ms
    from evalpipe.inputs import split as splits

    fixture = _load_trec(qrels, queries, corpus, name, tiers)
    return splits.loaded(fixture, split, split_seed, test_fraction)


def _load_trec(
    qrels: str | Path, queries: str | Path, corpus: str | Path, name: str | None, tiers: str | None
) -> Fixture:
    _check_paths(qrels=qrels, queries=queries, corpus=corpus, tiers=tiers, name=name)
    qpath, cpath, rpath = resolve_path(queries), resolve_path(corpus), resolve_path(qrels)
    for label, p in (("qrels", rpath), ("queries", qpath), ("corpus", cpath)):
        if not p.is_file():
            raise FixtureError(f"{label} file not found: {p} (fixture.{label}=...)")
    try:
        judged = read_trec_qrels(rpath)
        units = load_jsonl_corpus(cpath)
    except (TrecFormatError, CorpusError) as exc:
        raise FixtureError(str(exc)) from None
    texts = read_queries(qpath, set(judged))
    cases = build_cases(judged, texts, read_tiers(tiers), str(rpath))
    notes = dropped_queries_notes(judged, texts, str(rpath))
    check_judged_ids(cases, units, rpath)
    return Fixture(
        name=name or rpath.stem,
        cases=cases,
        corpus=units,
        source=str(rpath),
        sha256=combined_sha256(rpath, qpath, units),
        notes=notes,
    )
