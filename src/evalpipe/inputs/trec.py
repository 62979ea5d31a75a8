"""TREC and BEIR run/qrels files: read them, and write runs that trec_eval scores as intended.

Runs exchanged with other tools (trec_eval, ranx, a production system's logs) are
the bridge between evalpipe and the outside world, so the readers follow
trec_eval's own conventions (a run is ordered by score, not by the rank column)
and every error names the file and line. Paths ending in `.gz` are read gzipped.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from evalpipe.core import Hit
from evalpipe.core.files import require_file, text_lines
from evalpipe.safety.errors import EvalpipeError

Run = dict[str, list[tuple[str, float | None]]]
Qrels = dict[str, dict[str, int]]

BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")


class TrecFormatError(EvalpipeError, ValueError):
    """A run or qrels file that cannot be parsed; the message names file:line and the expected layout."""


def _open(path: Path, mode: str = "rt") -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode, encoding="utf-8")  # type: ignore[return-value]
    return path.open(mode[0], encoding="utf-8")


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their numbers; a missing file is a FileNotFoundError, bad bytes name the line."""
    path = require_file(Path(path), "file")
    for lineno, line in text_lines(path):
        if line.strip():
            yield lineno, line


def _trec_order(hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """trec_eval's order: score descending, ties by docid descending (string comparison)."""
    return sorted(hits, key=lambda h: (h[1], h[0]), reverse=True)


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """Read `qid Q0 docid rank score tag` lines into qid -> [(docid, score)] in trec_eval's order.

    The rank column is ignored, exactly as trec_eval ignores it. A docid repeated
    within a query is an error (trec_eval refuses such runs too).
    """
    run: dict[str, list[tuple[str, float]]] = {}
    seen: dict[str, set[str]] = {}
    for lineno, line in _lines(path):
        cols = line.split()
        if len(cols) != 6:
            raise TrecFormatError(
                f"{path}:{lineno}: expected 'qid Q0 docid rank score tag', got {len(cols)} columns: {line!r}"
            )
        qid, _, docid, _, raw_score, _ = cols
        try:
            score = float(raw_score)
        except ValueError:
            raise TrecFormatError(f"{path}:{lineno}: score {raw_score!r} is not a number") from None
        if not math.isfinite(score):
            raise TrecFormatError(f"{path}:{lineno}: score {raw_score!r} is not finite")
        if docid in seen.setdefault(qid, set()):
            raise TrecFormatError(f"{path}:{lineno}: docid {docid!r} listed twice for query {qid!r}")
        seen[qid].add(docid)
        run.setdefault(qid, []).append((docid, score))
    return {qid: _trec_order(hits) for qid, hits in run.items()}


def _trec_scores(hits: Sequence[Hit]) -> list[float]:
    """Scores to write so trec_eval's re-sort reproduces the list order.

    The hits' own scores are kept when they strictly decrease; otherwise (ties, a
    missing score) the query gets rank-derived scores n, n-1, ..., 1 because trec_eval
    would otherwise reorder tied units by docid and score a different ranking.
    """
    scores = [h.score for h in hits]
    if (
        all(s is not None and math.isfinite(s) for s in scores)
        and all(
            a > b  # type: ignore[operator]
            for a, b in zip(scores, scores[1:], strict=False)
        )
    ):
        return [float(s) for s in scores]  # type: ignore[arg-type]
    return [float(len(hits) - i) for i in range(len(hits))]


def write_trec_run(path: str | Path, results: Mapping[str, Sequence[Hit]], tag: str = "evalpipe") -> int:
    """Write a TREC run (`qid Q0 docid rank score tag`), queries in the given order; returns lines written."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"TREC run tag must be non-empty without whitespace, got {tag!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with _open(path, "wt") as fh:
        for qid, hits in results.items():
            qid = str(qid)
            if not qid or any(c.isspace() for c in qid):
                raise ValueError(f"{path}: query id {qid!r} cannot be written to a TREC run (whitespace)")
            seen: set[str] = set()
            for rank, (hit, score) in enumerate(zip(hits, _trec_scores(hits), strict=True), start=1):
                if not hit.id or any(c.isspace() for c in hit.id):
                    raise ValueError(f"{path}: query {qid!r}: unit id {hit.id!r} contains whitespace")
                if hit.id in seen:
                    raise ValueError(f"{path}: query {qid!r}: unit id {hit.id!r} appears twice")
                seen.add(hit.id)
                fh.write(f"{qid} Q0 {hit.id} {rank} {score!r} {tag}\n")
                n += 1
    return n


def read_trec_qrels(path: str | Path) -> Qrels:
    """Read qrels as qid -> {docid: relevance}.

    Accepts TREC `qid 0 docid rel` (whitespace separated) and BEIR's tab-separated
    `query-id corpus-id score` with its header line. A pair judged twice with
    different grades is an error.
    """
    qrels: Qrels = {}
    for lineno, line in _lines(path):
        cols = line.split("\t") if "\t" in line else line.split()
        cols = [c.strip() for c in cols]
        if lineno == 1 and tuple(c.lower() for c in cols) == BEIR_QRELS_HEADER:
            continue
        if len(cols) == 4:
            qid, _, docid, raw = cols
        elif len(cols) == 3:
            qid, docid, raw = cols
        else:
            raise TrecFormatError(
                f"{path}:{lineno}: expected 'qid 0 docid rel' (TREC) or 'query-id<TAB>corpus-id<TAB>score' "
                f"(BEIR), got {len(cols)} columns: {line!r}"
            )
        rel = _grade(raw, f"{path}:{lineno}")
        judged = qrels.setdefault(qid, {})
        if docid in judged and judged[docid] != rel:
            raise TrecFormatError(
                f"{path}:{lineno}: {qid!r}/{docid!r} judged {judged[docid]} earlier and {rel} here"
            )
        judged[docid] = rel
    return qrels


def _grade(raw: str, where: str) -> int:
    """An integer grade; "1.0" is accepted (some tools write floats), "0.5" is not."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value.is_integer():
        raise TrecFormatError(f"{where}: relevance {raw!r} is not an integer")
    return int(value)


def _hit_of(record: Mapping[str, Any], where: str) -> tuple[str, float | None]:
    uid = record.get("id", record.get("docid"))
    if uid is None:
        raise TrecFormatError(f"{where}: hit has no 'id' (or 'docid'): {dict(record)!r}")
    if isinstance(uid, bool) or not isinstance(uid, str | int) or not str(uid).strip():
        raise TrecFormatError(f"{where}: hit id must be a non-empty string, got {uid!r}")
    score = record.get("score")
    if score is not None:
        try:
            if isinstance(score, bool):
                raise TypeError
            score = float(score)
        except (TypeError, ValueError):
            raise TrecFormatError(f"{where}: score {score!r} is not a number") from None
        if not math.isfinite(score):
            raise TrecFormatError(f"{where}: score {score!r} is not finite")
    return str(uid), score


def read_jsonl_run(path: str | Path) -> Run:
    """Read a JSONL run into qid -> [(docid, score or None)] in ranking order.

    Two layouts: one line per query `{"qid": ..., "hits": [{"id": ..., "score": ...}, ...]}`
    (the list order is the ranking; a query spread over several lines is concatenated),
    or one line per hit `{"qid": ..., "docid": ..., "score": ...[, "rank": ...]}`, ordered
    by `rank` when every line of the query has one, else by score descending (file order
    on ties). See `read_jsonl_queries` for the optional "query" text field.
    """
    listed: Run = {}
    flat: dict[str, list[tuple[int, str, float | None, int | None]]] = {}
    for lineno, line in _lines(path):
        where = f"{path}:{lineno}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrecFormatError(f"{where}: invalid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or "qid" not in record:
            raise TrecFormatError(f"{where}: expected an object with a 'qid' field")
        if isinstance(record["qid"], bool) or not isinstance(record["qid"], str | int):
            raise TrecFormatError(f"{where}: 'qid' must be a string, got {record['qid']!r}")
        qid = str(record["qid"])
        if "hits" in record:
            if not isinstance(record["hits"], list):
                raise TrecFormatError(f"{where}: 'hits' must be a list of {{'id', 'score'}} objects")
            for h in record["hits"]:
                if not isinstance(h, dict):
                    raise TrecFormatError(f"{where}: each hit must be an object, got {h!r}")
            listed.setdefault(qid, []).extend(_hit_of(h, where) for h in record["hits"])
        elif "docid" in record or "id" in record:
            uid, score = _hit_of(record, where)
            rank = record.get("rank")
            if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
                raise TrecFormatError(f"{where}: 'rank' must be an integer, got {rank!r}")
            flat.setdefault(qid, []).append((lineno, uid, score, rank))
        else:
            raise TrecFormatError(f"{where}: expected 'hits' (one line per query) or 'docid' (one per hit)")
    for qid, rows in flat.items():
        if all(r[3] is not None for r in rows):
            rows.sort(key=lambda r: (r[3], r[0]))
        else:
            rows.sort(key=lambda r: (-(r[2] if r[2] is not None else -math.inf), r[0]))
        listed.setdefault(qid, []).extend((uid, score) for _, uid, score, _ in rows)
    return listed


def read_jsonl_queries(path: str | Path) -> dict[str, str]:
    """qid -> query text for JSONL runs whose lines carry a "query" field (others are skipped)."""
    out: dict[str, str] = {}
    for lineno, line in _lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TrecFormatError(f"{path}:{lineno}: invalid JSON ({exc.msg})") from None
        if isinstance(record, dict) and "qid" in record and isinstance(record.get("query"), str):
            out.setdefault(str(record["qid"]), record["query"])
    return out
