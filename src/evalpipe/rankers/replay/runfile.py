"""Replay a precomputed run (TREC or JSONL) as if it were a ranker.

This is how results produced elsewhere (a production system's logs, a GPU box, a
published run) get the same metrics, reports and MLflow logging as a live ranker.
Results are looked up by case id (the run's qid), so the runner calls
`search_case`; plain `search` works only for JSONL runs that also record the query
text.

A replay cannot search again, so winnow constraints can only *filter* the recorded
list (when a corpus was given to `prepare`): units outside the constraint are
dropped and nothing replaces them, so a constrained case may get fewer than k hits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from evalpipe.core import Hit
from evalpipe.core.files import require_file, text_lines
from evalpipe.corpus import Corpus
from evalpipe.inputs.trec import read_jsonl_queries, read_jsonl_run, read_trec_run
from evalpipe.safety.errors import EvalpipeError


def _sniff(path: Path) -> Literal["trec", "jsonl"]:
    """JSONL for a .jsonl/.json name or when the first non-blank line is JSON, else TREC."""
    if path.name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        return "jsonl"
    for _, line in text_lines(path):
        if line.strip():
            return "jsonl" if line.lstrip().startswith(("{", "[")) else "trec"
    return "trec"


def _sample(ids: Sequence[str], n: int = 5) -> str:
    return ", ".join(repr(i) for i in ids[:n]) + (", ..." if len(ids) > n else "")


class RunFileRanker:
    """Replays `path` (config `ranker.path`); `format` is "auto", "trec" or "jsonl".

    Hits whose score is below `min_score` are dropped (hits recorded without a score
    are kept: there is nothing to compare). `stats()` reports how many looked-up
    cases were missing from the run (each answered with an empty result) and how
    many replayed ids are not in the corpus.
    """

    name = "runfile"

    def __init__(
        self, path: str, format: Literal["auto", "trec", "jsonl"] = "auto", min_score: float | None = None
    ):
        if format not in ("auto", "trec", "jsonl"):
            raise ValueError(f"runfile ranker: format must be auto, trec or jsonl (got {format!r})")
        if min_score is not None and (isinstance(min_score, bool) or not isinstance(min_score, int | float)):
            raise ValueError(f"runfile ranker: min_score must be a number or null, got {min_score!r}")
        if not isinstance(path, str):
            raise ValueError(f"runfile ranker: path must be a file path, got {path!r}")
        self.path = Path(path).expanduser()
        self.format = format
        self.min_score = min_score
        self.corpus: Corpus | None = None
        self._run: dict[str, list[tuple[str, float | None]]] | None = None
        self._by_query: dict[str, str | None] = {}
        self.resolved_format = ""
        self._missing: set[str] = set()
        self._lookups = 0
        self._unknown_ids = 0

    def _load(self) -> dict[str, list[tuple[str, float | None]]]:
        if self._run is not None:
            return self._run
        require_file(self.path, "runfile ranker: run file", "set the config key ranker.path")
        fmt = _sniff(self.path) if self.format == "auto" else self.format
        self.resolved_format = fmt
        if fmt == "trec":
            self._run = dict(read_trec_run(self.path))  # type: ignore[arg-type]
        else:
            self._run = read_jsonl_run(self.path)
            # Query text -> qid; a text shared by two qids is ambiguous (None) and refused on lookup.
            for qid, text in read_jsonl_queries(self.path).items():
                self._by_query[text] = qid if text not in self._by_query else None
        return self._run

    def prepare(self, corpus: Corpus | None = None) -> None:
        """Read the run; with a corpus, constraints can be applied and unknown ids counted."""
        self.corpus = corpus
        run = self._load()
        if corpus is not None:
            self._unknown_ids = sum(1 for hits in run.values() for uid, _ in hits if uid not in corpus)

    def check_cases(self, case_ids: Sequence[str]) -> list[str]:
        """Parse the whole run now and match its query IDs to the fixture's case IDs (before any case runs).

        None matching is an error (every case would score 0); cases without a line and query IDs
        that are no case come back as warnings, with counts and the first few IDs.
        """
        run = self._load()
        wanted = set(case_ids)
        if not run:
            raise EvalpipeError(f"{self.path}: the run file has no lines (ranker.path=...)")
        if not wanted & run.keys():
            raise EvalpipeError(
                f"{self.path}: none of its {len(run)} query IDs is a case ID of the fixture (run has "
                f"{_sample(list(run))}; fixture has {_sample(list(case_ids))}): qids must be case IDs"
            )
        warnings = []
        missing = [c for c in case_ids if c not in run]
        if missing:
            warnings.append(
                f"{len(missing)} of {len(case_ids)} cases are not in run file {self.path} "
                f"(scored as empty results), e.g. {_sample(missing)}"
            )
        unknown = [q for q in run if q not in wanted]
        if unknown:
            warnings.append(
                f"{len(unknown)} query IDs of run file {self.path} are not cases of the fixture "
                f"(ignored), e.g. {_sample(unknown)}"
            )
        return warnings

    def search_case(
        self, case_id: str, query: str, k: int, constraints: Mapping[str, Any] | None = None
    ) -> list[Hit]:
        """The recorded top-k for `case_id`, filtered by constraints; [] if the run lacks the case."""
        run = self._load()
        self._lookups += 1
        recorded = run.get(str(case_id))
        if recorded is None:
            self._missing.add(str(case_id))
            return []
        mask = self.corpus.allowed_mask(constraints) if self.corpus is not None else None
        hits: list[Hit] = []
        for uid, score in recorded:
            if len(hits) >= k:
                break
            if mask is not None:
                row = self.corpus.index_of.get(uid)  # type: ignore[union-attr]
                if row is None or not mask[row]:
                    continue
            if self.min_score is not None and score is not None and score < self.min_score:
                continue
            hits.append(Hit(uid, score))
        return hits

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        """Look the case up by its query text (JSONL runs with a "query" field only)."""
        self._load()
        if query not in self._by_query:
            if not self._by_query:
                raise LookupError(
                    f"runfile ranker: {self.path} ({self.resolved_format}) replays by case id; call "
                    f"search_case(case_id, ...), or record a 'query' field per line in a JSONL run"
                )
            raise LookupError(f"runfile ranker: query {query!r} is not recorded in {self.path}")
        qid = self._by_query[query]
        if qid is None:
            raise LookupError(f"runfile ranker: query {query!r} is under several qids in {self.path}")
        return self.search_case(qid, query, k, constraints)

    def stats(self) -> dict[str, Any]:
        run = self._run or {}
        return {
            "run_path": str(self.path),
            "run_format": self.resolved_format,
            "run_queries": len(run),
            "run_hits": sum(len(h) for h in run.values()),
            "cases_looked_up": self._lookups,
            "missing_cases": len(self._missing),
            "unknown_ids": self._unknown_ids,
        }

    def __repr__(self) -> str:
        return f"RunFileRanker(path={str(self.path)!r}, format={self.format!r})"
