"""The files a run saves: report.md, config.yaml, and when cases ran misses, run.trec and cases.jsonl.

Built before anything is uploaded, so the output directory alone holds the whole run
(what `evalpipe sync` uploads and `evalpipe compare --cases` reads back).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from evalpipe.inputs.fixture import Fixture
from evalpipe.reporting.report import ReportRow, markdown_report
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import RunScores


def case_table(results: list[CaseResult], scores: RunScores) -> dict[str, list[Any]]:
    """Per-case results as columns (logged with mlflow.log_table; `evalpipe compare` reads it back)."""
    table: dict[str, list[Any]] = {
        "case_id": [r.case_id for r in results],
        "tier": [r.tier for r in results],
        "query": [r.query for r in results],
        "expected": [json.dumps(dict(r.qrels)) for r in results],
        "top": [json.dumps(r.ranked_ids) for r in results],
        # The hits' own scores, in the ranker's scale (run.trec writes rank-derived scores where
        # scores tie): what `evalpipe abstain` reads its signal from.
        "scores": [json.dumps([_score(h.score) for h in r.hits]) for r in results],
        "first_rank": [int(x) for x in scores.first_rank],
        "latency_us": [r.latency_us for r in results],
        "tokens": [r.tokens for r in results],
        "empty_result": [r.empty for r in results],
        "error": [r.error or "" for r in results],
    }
    # Ranking metrics are empty (None) for unjudged cases, as they are left out of the means.
    judged = [len(r.qrels) > 0 for r in results]
    for name, values in sorted(scores.per_case.items()):
        table[name] = [float(v) if ok else None for v, ok in zip(values, judged, strict=True)]
    if any(x is not None for x in scores.rag_per_case):
        # As numbers (1.0 / 0.0), not booleans, so compare and the hold-out check read them as
        # per-case figures (a None verdict stays empty).
        fields = ["document_hit", "section_hit", "reciprocal_rank", "citation_validity"]
        # the graded and all-sections verdicts only where some case has them (a plain fixture's
        # table keeps its columns)
        fields += [
            f
            for f in ("document_ndcg", "all_sections_hit", "section_recall")
            if any(x is not None and getattr(x, f) is not None for x in scores.rag_per_case)
        ]
        for field in fields:
            column = [None if x is None else getattr(x, field) for x in scores.rag_per_case]
            table[f"rag_{field}"] = [None if v is None else float(v) for v in column]
        # A label, not a figure (no rag_ prefix, so compare never reads it as one).
        table["answerability"] = [str(r.labels.get("answerability", "answerable")) for r in results]
    return table


def _score(value: Any) -> float | None:
    """A hit's score as JSON can hold it (None for a missing or non-finite score)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def trec_run_text(results: list[CaseResult], tag: str) -> str:
    """The run as a TREC run file, so it can be re-scored with trec_eval or ranx."""
    # lazy: evalpipe.inputs.trec, ~2 ms
    from evalpipe.inputs.trec import write_trec_run

    with tempfile.TemporaryDirectory(prefix="evalpipe-") as tmp:
        path = Path(tmp) / "run.trec"
        write_trec_run(path, {r.case_id: r.hits for r in results}, tag=tag)
        return path.read_text(encoding="utf-8")


def misses_jsonl(scores: RunScores) -> str:
    return "".join(json.dumps(m._asdict(), ensure_ascii=False) + "\n" for m in scores.misses)


def run_files(
    masked_config: Mapping[str, Any],
    ks: Sequence[int],
    fixture: Fixture,
    row: ReportRow,
    results: list[CaseResult],
    table: dict[str, list[Any]] | None,
    revision: str,
    notes: list[str],
) -> dict[str, str]:
    """The run's files: report.md, config.yaml and, when cases ran, misses, run.trec and cases.jsonl.

    `masked_config` is the resolved config with its secrets masked (`safety.secrets.mask_config`),
    as the run logs it: the config is not read or resolved again here."""
    files = {"config.yaml": OmegaConf.to_yaml(OmegaConf.create(dict(masked_config)))}
    scores = row.scores
    if scores is not None and table is not None:
        files["misses.jsonl"] = misses_jsonl(scores)
        try:
            files["run.trec"] = trec_run_text(results, tag="".join(row.name.split()) or "evalpipe")
        except ValueError as exc:  # e.g. IDs with whitespace cannot be written as TREC
            notes.append(f"run.trec not written: {exc}")
        files["cases.jsonl"] = "".join(
            json.dumps({k: v[i] for k, v in table.items()}, ensure_ascii=False) + "\n"
            for i in range(len(results))
        )
    files["report.md"] = markdown_report(
        fixture.label, [row], list(ks), fixture.tier_counts(), revision=revision, notes=notes
    )
    return files
