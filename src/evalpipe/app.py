"""The Hydra task: config -> fixture + ranker -> per-case results -> metrics -> report and MLflow.

Bad input exits with code 2 and one line naming what to fix; once cases have
run, their results are written to the job's output directory before MLflow is
touched, so a tracking failure never throws finished work away.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalpipe import __version__
from evalpipe.errors import EvalpipeError
from evalpipe.fixture import Fixture
from evalpipe.judge.run import build_judge, run_judge
from evalpipe.reporting.headline import NOTE_TAG, run_description
from evalpipe.reporting.names import lookup, named
from evalpipe.reporting.params import measurement_params
from evalpipe.reporting.report import ReportRow, markdown_report
from evalpipe.results import CaseResult
from evalpipe.runner import PreparedRanker, peak_memory_mb, prepare_ranker, run_cases
from evalpipe.scoring import RunScores, flat_metrics, score_results
from evalpipe.tokens import get_token_counter

# Keys that change where/how a run is recorded, not what is measured.
NON_MEASURING_KEYS = ("tracking", "run_name", "force", "progress", "plots", "sweep", "objective", "traces")


def fail(message: str, code: int = 2) -> None:
    """Stop with one clear line on stderr (no traceback)."""
    print(f"evalpipe: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def config_hash(cfg: Mapping[str, Any], *identity: str) -> str:
    """Identity of what a run measures: the config (less where it is logged) plus `identity`
    (fixture sha256, code fingerprint). A sweep resumes by skipping hashes already FINISHED."""
    measured = {k: v for k, v in cfg.items() if k not in NON_MEASURING_KEYS}
    blob = json.dumps([measured, *identity], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def hydra_context() -> tuple[str, list[str], Path | None]:
    """(ranker choice, task overrides, output dir) of the current Hydra job, if any."""
    try:
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
    except Exception:
        return "ranker", [], None
    choice = hc.runtime.choices.get("ranker")
    if not choice:  # plug-in given as ranker._target_ without a config group option
        target = next((o.split("=", 1)[1] for o in hc.overrides.task if "ranker._target_=" in o), "plugin")
        choice = target.rsplit(".", 1)[-1]
    return choice, list(hc.overrides.task), Path(hc.runtime.output_dir)


def missing_values(node: Any, prefix: str = "") -> list[str]:
    """Dotted keys still set to `???` (a value the user must give)."""
    out: list[str] = []
    if isinstance(node, DictConfig):
        for key in node:
            if OmegaConf.is_missing(node, key):
                out.append(f"{prefix}{key}")
            else:
                out += missing_values(node._get_node(key), f"{prefix}{key}.")
    return out


def experiment_name(cfg: DictConfig) -> str:
    """`<prefix>/<fixture name>`, known from config alone so a sweep's parent can name it before any job."""
    if cfg.tracking.get("experiment"):
        return str(cfg.tracking.experiment)
    source = cfg.fixture.get("path") or cfg.fixture.get("qrels") or "fixture"
    fixture = cfg.fixture.get("name") or Path(str(source)).stem
    return f"{cfg.tracking.experiment_prefix}/{fixture}"


def default_run_name(ranker_choice: str, overrides: list[str]) -> str:
    from evalpipe.sweeps.naming import point_name

    return point_name(ranker_choice, overrides)


def case_table(results: list[CaseResult], scores: RunScores) -> dict[str, list[Any]]:
    """Per-case results as columns (logged with mlflow.log_table; `evalpipe compare` reads it back)."""
    table: dict[str, list[Any]] = {
        "case_id": [r.case_id for r in results],
        "tier": [r.tier for r in results],
        "query": [r.query for r in results],
        "expected": [json.dumps(dict(r.qrels)) for r in results],
        "top": [json.dumps(r.ranked_ids) for r in results],
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
        for field in ("document_hit", "section_hit", "reciprocal_rank", "citation_validity"):
            table[f"rag_{field}"] = [None if x is None else getattr(x, field) for x in scores.rag_per_case]
    return table


def trec_run_text(results: list[CaseResult], tag: str) -> str:
    """The run as a TREC run file, so it can be re-scored with trec_eval or ranx."""
    import tempfile

    from evalpipe.trec import write_trec_run

    with tempfile.TemporaryDirectory(prefix="evalpipe-") as tmp:
        path = Path(tmp) / "run.trec"
        write_trec_run(path, {r.case_id: r.hits for r in results}, tag=tag)
        return path.read_text(encoding="utf-8")


def misses_jsonl(scores: RunScores) -> str:
    return "".join(json.dumps(m.__dict__, ensure_ascii=False) + "\n" for m in scores.misses)


def measure(
    cfg: DictConfig, prepared: PreparedRanker, fixture: Fixture, count_tokens, run_name: str, err
) -> tuple[list[CaseResult], RunScores | None, dict[str, float]]:
    """Run and score every case (nothing for a skipped ranker); also the build/eval cost figures."""
    from rich.markup import escape
    from rich.progress import track

    ks = list(cfg.ks)
    figures = {"index_build_seconds": prepared.build_seconds, "corpus_units": float(len(fixture.corpus))}
    results: list[CaseResult] = []
    scores = None
    if not prepared.skipped:
        progress = None
        if cfg.get("progress", True):

            def progress(cases):
                return track(
                    cases, description=escape(f"{run_name} on {fixture.name}"), console=err, transient=True
                )

        start = time.perf_counter()
        results = run_cases(prepared.ranker, fixture, max(ks), count_tokens, progress)
        figures["eval_seconds"] = time.perf_counter() - start
        scores = score_results(
            results,
            ks,
            list(cfg.metrics),
            tiers=fixture.tiers,
            units={u.id: u for u in fixture.corpus} if any(r.labels for r in results) else None,
        )
    figures["peak_memory_mb"] = peak_memory_mb()
    for key, value in run_stats(prepared).items():
        if isinstance(value, bool | int | float):
            figures[f"index/{key}"] = float(value)
    return results, scores, figures


def run_stats(prepared: PreparedRanker) -> dict[str, Any]:
    """Build figures plus what the ranker counted while serving (e.g. cases missing from a run file)."""
    stats = dict(prepared.stats)
    if not prepared.skipped and hasattr(prepared.ranker, "stats"):
        stats.update(prepared.ranker.stats())
    return stats


def run_files(
    cfg: DictConfig,
    fixture: Fixture,
    row: ReportRow,
    results: list[CaseResult],
    table: dict[str, list[Any]] | None,
    revision: str,
    notes: list[str],
) -> dict[str, str]:
    """The run's files: report.md, config.yaml and, when cases ran, misses, run.trec and cases.jsonl."""
    files = {"config.yaml": OmegaConf.to_yaml(cfg, resolve=True)}
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
        fixture.name, [row], list(cfg.ks), fixture.tier_counts(), revision=revision, notes=notes
    )
    return files


def log_plots(tracker, run_id: str, scores: RunScores, results: list[CaseResult], err) -> None:
    """Recall@K curve, per-tier bars and latency histogram; a figure never costs a finished run."""
    from evalpipe.reporting import tracking
    from evalpipe.reporting.plots import run_plots

    try:
        files = run_plots(scores, [r.latency_us for r in results])
    except Exception as exc:
        err.print(f"[yellow]plots skipped:[/] {type(exc).__name__}: {exc}")
        return
    if files:
        tracking.log_artifact_files(tracker, run_id, files, subdir="plots")


def evaluate(cfg: DictConfig) -> float:
    """Run one evaluation and return `cfg.objective` (so sweepers can optimise it)."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from mlflow.exceptions import MlflowException
    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 160)
    err = Console(stderr=True)
    missing = missing_values(cfg)
    if missing:
        fail(f"missing value for {', '.join(missing)}: give it on the command line, e.g. {missing[0]}=...")
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except Exception as exc:  # an interpolation that cannot resolve (e.g. ${oc.env:...} unset)
        fail(f"cannot resolve the config: {exc}")
    assert isinstance(resolved, dict)
    ks = list(cfg.ks)
    if not ks or not all(type(k) is int and k > 0 for k in ks):
        fail(f"ks must be a non-empty list of positive integers, got {ks!r} (e.g. ks=[1,5,20])")

    try:
        fixture = instantiate(cfg.fixture)
        ranker = instantiate(cfg.ranker)
        judge = build_judge(cfg.get("judge"))
    except EvalpipeError as exc:
        fail(str(exc))
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        fail(f"cannot build {'fixture' if 'fixture' in str(exc) else 'ranker'}: {cause}")
    except (ValueError, TypeError, ImportError) as exc:
        fail(str(exc))

    ranker_choice, overrides, out_dir = hydra_context()
    run_name = cfg.get("run_name") or default_run_name(ranker_choice, overrides)
    counter = get_token_counter(cfg.get("token_encoding", "cl100k_base"))

    from evalpipe.reporting import tracking

    experiment = experiment_name(cfg)
    try:
        tracker, experiment_id = tracking.open_experiment(cfg.tracking.uri, experiment)
    except EvalpipeError as exc:
        fail(str(exc))
    objective = str(cfg.get("objective", "recall_at_5"))
    from evalpipe.reporting import links

    links.prepare_experiment(tracker.client, experiment_id, ks, objective)

    from evalpipe.fixture_check.summary import difficulty_metrics
    from evalpipe.sweeps import job as sweep

    revision = tracking.git_revision()
    chash = config_hash(resolved, fixture.sha256, tracking.code_fingerprint())
    job = sweep.job_context(tracker, experiment_id)
    if job.sweep_id and not cfg.get("force"):
        done = sweep.find_finished(tracker, experiment_id, chash)
        if done is not None:
            from evalpipe.sweeps.reuse import reuse_point

            return reuse_point(console, tracker, experiment_id, done, job, run_name, out_dir, objective)

    tags = {
        **job.tags,
        "evalpipe.version": __version__,
        "evalpipe.git_revision": revision,
        "evalpipe.fixture": fixture.name,
        "evalpipe.fixture_sha256": fixture.sha256,
        **({"evalpipe.fixture_version": fixture.version} if fixture.version else {}),
        "evalpipe.corpus_sha256": fixture.corpus.sha256,
        "evalpipe.ranker": ranker_choice,
        "evalpipe.config_hash": chash,
        "evalpipe.token_counter": counter.method,
        "evalpipe.objective": objective,
    }
    notes = [] if not counter.note else [f"tokens estimated as chars/4: {counter.note}"]
    try:
        with tracking.tracked_run(tracker, experiment_id, run_name, tags) as run_id:
            prepared = prepare_ranker(ranker, fixture.corpus)
            if prepared.skipped:
                err.print(f"[yellow]ranker {ranker_choice} skipped:[/] {prepared.skipped}")
            results, scores, figures = measure(cfg, prepared, fixture, counter.count, run_name, err)
            judged = None
            if judge is not None and scores is not None:  # judged figures beside the strict ones
                judged = run_judge(judge, results, scores, fixture.corpus, counter.count, fixture.tiers)
                scores = judged.scores  # the same strict scores, misses carrying judged_hit
            row = ReportRow(run_name, scores, skipped=prepared.skipped)
            table = case_table(results, scores) if scores is not None else None
            if judged is not None and table is not None:
                judged.add_columns(table)
            files = run_files(cfg, fixture, row, results, table, revision, notes)
            if judged is not None:
                judged.add_files(files)
            if out_dir is not None:  # local copy first: finished results survive a tracking failure
                out_dir.mkdir(parents=True, exist_ok=True)
                for name, content in files.items():
                    (out_dir / name).write_text(content, encoding="utf-8")
            run_tags = {
                f"index.{k}": str(v) for k, v in run_stats(prepared).items() if not isinstance(v, int | float)
            }
            if prepared.skipped:
                run_tags["evalpipe.skipped"] = prepared.skipped[:5000]
            metrics = {
                **(flat_metrics(scores) if scores is not None else {}),
                **named(figures),
                **difficulty_metrics(fixture),  # what the recall figures are measured on
            }
            if judged is not None:  # objective=judged_recall_at_5 works too
                metrics.update(judged.metrics)
                run_tags.update(judged.tags)
            params = measurement_params(resolved, ranker_choice, fixture.name)
            run_tags[NOTE_TAG] = run_description(
                fixture.name, row, ks, fixture.tier_counts(), params, objective, lookup(metrics, objective)
            )
            tracking.log_batch(tracker, run_id, metrics=metrics, params=params, tags=run_tags)
            tracking.log_artifact_files(
                tracker, run_id, {k: v for k, v in files.items() if k != "cases.jsonl"}
            )
            if scores is not None and table is not None:
                tracking.log_table(tracker, run_id, table, "cases.json")
                if cfg.get("plots", True):
                    log_plots(tracker, run_id, scores, results, err)
                if cfg.get("traces", False):  # opt-in: slower than the run itself (docs/tracking.md)
                    from evalpipe.reporting.traces import log_case_traces

                    log_case_traces(tracker, experiment_id, run_id, results, scores.first_rank)
    except (EvalpipeError, FileNotFoundError) as exc:  # found while building the index: bad input
        fail(str(exc))
    except MlflowException as exc:  # the store went away mid-run: say where the results are
        saved = f"; the results are saved in {out_dir}" if out_dir is not None else ""
        fail(f"logging to MLflow failed ({type(exc).__name__}: {exc}){saved}", code=1)

    value = float(lookup(metrics, objective) or 0.0)
    from evalpipe.reporting.run_end import print_run_end

    after_tables = judged.print if judged is not None else None
    print_run_end(
        console,
        tracker,
        experiment,
        experiment_id,
        run_id,
        run_name,
        row,
        fixture,
        ks,
        notes,
        job,
        after_tables,
    )
    return value
