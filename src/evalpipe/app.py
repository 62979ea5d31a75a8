"""The Hydra task: config -> fixture + ranker -> per-case results -> metrics -> report and MLflow.

Bad input exits with code 2 and one line naming what to fix; once cases have
run, their results are written to the job's output directory before MLflow is
touched, so a tracking failure never throws finished work away.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalpipe import __version__
from evalpipe.batching import run_search
from evalpipe.heap import freeze_startup_heap
from evalpipe.inputs.fixture import Fixture
from evalpipe.judge.run import build_judge, run_judge
from evalpipe.reporting.headline import NOTE_TAG, run_description
from evalpipe.reporting.local import PARTIAL_MARK
from evalpipe.reporting.params import measurement_params
from evalpipe.reporting.plots import plot_mode
from evalpipe.reporting.report import ReportRow, markdown_report
from evalpipe.runner import PreparedRanker, peak_memory_mb, prepare_ranker
from evalpipe.safety import signals
from evalpipe.safety.errors import EvalpipeError
from evalpipe.safety.secrets import mask_config, mask_mapping, mask_text, register_config
from evalpipe.scoring.names import lookup, named
from evalpipe.scoring.outcome import RunNotMeasured, error_note, unknown_ids, verdict
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import RunScores, flat_metrics, score_results
from evalpipe.scoring.tokens import get_token_counter

# Keys that change where/how a run is recorded, not what is measured.
NON_MEASURING_KEYS = (
    "tracking",
    "run_name",
    "force",
    "progress",
    "plots",
    "sweep",
    "objective",
    "traces",
    "secret_keys",
    "allow_skipped",
    "timeout_s",
)


def fail(message: str, code: int = 2) -> None:
    """Stop with one clear line on stderr (no traceback)."""
    from evalpipe.safety.secrets import mask_text

    print(f"evalpipe: error: {mask_text(message)}", file=sys.stderr)
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
    # As typed: an override holding ${...} must not be resolved here (it may not resolve at all).
    overrides = [str(o) for o in OmegaConf.to_container(hc.overrides.task, resolve=False)]  # type: ignore[union-attr]
    choice = hc.runtime.choices.get("ranker")
    if not choice:  # plug-in given as ranker._target_ without a config group option
        target = next((o.split("=", 1)[1] for o in overrides if "ranker._target_=" in o), "plugin")
        choice = target.rsplit(".", 1)[-1]
    return choice, overrides, Path(hc.runtime.output_dir)


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
    from evalpipe.inputs.trec import write_trec_run

    with tempfile.TemporaryDirectory(prefix="evalpipe-") as tmp:
        path = Path(tmp) / "run.trec"
        write_trec_run(path, {r.case_id: r.hits for r in results}, tag=tag)
        return path.read_text(encoding="utf-8")


def misses_jsonl(scores: RunScores) -> str:
    return "".join(json.dumps(m.__dict__, ensure_ascii=False) + "\n" for m in scores.misses)


def score(cfg: DictConfig, fixture: Fixture, results: list[CaseResult]) -> RunScores:
    return score_results(
        results,
        list(cfg.ks),
        list(cfg.metrics),
        tiers=fixture.tiers,
        units={u.id: u for u in fixture.corpus} if any(r.labels for r in results) else None,
    )


def measure(
    cfg: DictConfig,
    prepared: PreparedRanker,
    fixture: Fixture,
    count_tokens,
    run_name: str,
    err,
    results: list[CaseResult] | None = None,
) -> tuple[list[CaseResult], RunScores | None, dict[str, float]]:
    """Run and score every case (nothing for a skipped ranker); also the build/eval cost figures.

    Cases are appended to `results` as they finish (what an interrupted run still has)."""
    from rich.markup import escape

    from evalpipe.progress import case_progress

    ks = list(cfg.ks)
    timeout_s = cfg.get("timeout_s")
    figures = {"index_build_seconds": prepared.build_seconds, "corpus_units": float(len(fixture.corpus))}
    results = [] if results is None else results
    scores = None
    if not prepared.skipped:
        progress = None
        if cfg.get("progress", True):

            def progress(cases):
                return case_progress(cases, escape(f"{run_name} on {fixture.name}"), err, timeout_s)

        start = time.perf_counter()
        batch, sample = cfg.get("batch", "auto"), cfg.get("latency_sample", 100)
        _, plan = run_search(
            prepared.ranker,
            fixture,
            max(ks),
            count_tokens,
            progress,
            batch,
            sample,
            into=results,
            timeout_s=timeout_s,
        )
        figures["eval_seconds"] = time.perf_counter() - start
        figures["search_batched"] = float(plan.batched)
        scores = score(cfg, fixture, results)
        figures["unknown_ids"] = float(unknown_ids(results, fixture.corpus).count)
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


def result_tags(tags: dict[str, str], prepared: PreparedRanker | None, partial: bool) -> dict[str, str]:
    """The start tags plus what the run found out: ranker stats, why it was skipped, partial."""
    out = dict(tags)
    if prepared is not None:
        stats = run_stats(prepared).items()
        out.update({f"index.{k}": str(v) for k, v in stats if not isinstance(v, int | float)})
        if prepared.skipped:
            out["evalpipe.skipped"] = prepared.skipped[:5000]
    if partial:
        out["evalpipe.partial"] = "true"
    return out


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
    from evalpipe.safety.secrets import mask_config

    masked = mask_config(
        OmegaConf.to_container(cfg, resolve=True), OmegaConf.to_container(cfg, resolve=False)
    )
    files = {"config.yaml": OmegaConf.to_yaml(OmegaConf.create(masked))}
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


def print_offline_end(console, row: ReportRow, fixture: Fixture, ks, notes, after_tables) -> None:
    """The tables and notes of a run that is not (or not completely) in a store: no links."""
    from rich.markup import escape

    from evalpipe.reporting.report import print_tables

    print_tables(console, fixture.name, [row], ks, fixture.tier_counts())
    if after_tables is not None:
        after_tables(console)
    for n in notes:
        console.print(f"[yellow]note:[/] {escape(mask_text(n))}")


def log_plots(
    tracker, run_id: str, scores: RunScores, results: list[CaseResult], err, mode: str = "all"
) -> None:
    """The figures `plots` asks for (reporting.plots.run_figures); a figure never costs a finished run."""
    from evalpipe.reporting import tracking
    from evalpipe.reporting.plots import run_figures

    try:
        files = run_figures(scores, [r.latency_us for r in results if r.latency_timed], mode)
    except Exception as exc:
        err.print(f"[yellow]plots skipped:[/] {type(exc).__name__}: {exc}")
        return
    if files:
        tracking.log_artifact_files(tracker, run_id, files, subdir="plots")


def evaluate(cfg: DictConfig) -> float:
    """Run one evaluation and return `cfg.objective` (so sweepers can optimise it)."""
    from rich.console import Console

    from evalpipe import preflight

    signals.install()
    console = Console(width=None if sys.stdout.isatty() else 160)
    err = Console(stderr=True)
    register_config(cfg)  # from here on, secret values are masked in everything written
    ranker_choice, overrides, out_dir = hydra_context()
    try:  # everything that can be checked before a case runs (and before MLflow is opened)
        checked = preflight.check(cfg, overrides)
        judge = build_judge(cfg.get("judge"))
    except EvalpipeError as exc:
        fail(str(exc))
    resolved, ks, fixture, ranker = checked.resolved, checked.ks, checked.fixture, checked.ranker
    for warning in checked.warnings:  # one plain line each (rich would wrap them)
        print(f"evalpipe: warning: {mask_text(warning)}", file=sys.stderr)
    run_name = mask_text(checked.run_name or default_run_name(ranker_choice, overrides))
    from mlflow.exceptions import MlflowException

    counter = get_token_counter(cfg.get("token_encoding", "cl100k_base"))

    from evalpipe.reporting import tracking
    from evalpipe.reporting.record import Recording

    experiment = experiment_name(cfg)
    objective = checked.objective
    offline = bool(cfg.tracking.get("offline", False))
    tracker = experiment_id = None
    if not offline:
        try:
            tracker, experiment_id = tracking.open_experiment(cfg.tracking.uri, experiment)
        except EvalpipeError as exc:
            fail(str(exc))
        freeze_startup_heap()  # MLflow's import heap: no later collection (or the exit) walks it again
        from evalpipe.reporting import links

        links.prepare_experiment(tracker.client, experiment_id, ks, objective)

    from evalpipe.fixture_check.summary import difficulty_metrics
    from evalpipe.sweeps import job as sweep

    revision = tracking.git_revision()
    chash = config_hash(resolved, fixture.sha256, tracking.code_fingerprint())
    job = sweep.job_context(tracker, experiment_id)
    if tracker is not None and job.sweep_id and not cfg.get("force"):
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
    tags = mask_mapping(tags)
    notes = [] if not counter.note else [f"tokens estimated as chars/4: {counter.note}"]
    notes += checked.warnings
    failure: RunNotMeasured | None = None
    rec = Recording(out_dir or Path(tempfile.mkdtemp(prefix="evalpipe-run-")), experiment, run_name)
    rec.tracker, rec.experiment_id = tracker, experiment_id
    try:
        rec.start(tags)
    except MlflowException as exc:
        fail(f"cannot start an MLflow run in {tracker.uri}: {exc}", code=1)

    results: list[CaseResult] = []
    prepared = scores = judged = None
    figures: dict[str, float] = {}
    interrupted: BaseException | None = None
    try:
        prepared = prepare_ranker(ranker, fixture.corpus)
        if prepared.skipped and checked.allow_skipped:
            err.print(f"[yellow]ranker {ranker_choice} skipped:[/] {mask_text(prepared.skipped)}")
        results, scores, figures = measure(cfg, prepared, fixture, counter.count, run_name, err, results)
        if figures.get("unknown_ids"):
            notes.append(unknown_ids(results, fixture.corpus).note())
        failure = verdict(prepared.skipped, results, checked.allow_skipped, ranker_choice)
        notes += [n for n in [error_note(results)] if n and failure is None]
        if judge is not None and scores is not None and failure is None:  # judged beside strict
            judged = run_judge(judge, results, scores, fixture.corpus, counter.count, fixture.tiers)
            scores = judged.scores  # the same strict scores, misses carrying judged_hit
    except (EvalpipeError, FileNotFoundError) as exc:  # found while building the index: bad input
        rec.abandon("FAILED")
        fail(str(exc))
    except BaseException as exc:
        if not signals.is_interrupt(exc):
            rec.abandon("FAILED")
            raise
        interrupted = exc

    with signals.deferred():  # a second Ctrl-C must not cost what the first one saves
        status = "FINISHED" if failure is None else "FAILED"  # skipped (exit 3) or failed (exit 1)
        extra: dict[str, Any] = {"cases_total": len(fixture.cases), "cases_completed": len(results)}
        if interrupted is not None:
            status, failure = "KILLED", None
            judged = None  # judging may have been cut short: the strict figures only
            scores = score(cfg, fixture, results) if results else None
            figures = {"corpus_units": float(len(fixture.corpus)), "peak_memory_mb": peak_memory_mb()}
            why = f"{signals.name_of(interrupted)} after {len(results)} of {len(fixture.cases)} cases"
            notes.append(f"{PARTIAL_MARK}: interrupted by {why}; the figures cover those cases only")
            extra.update(partial=True, interrupted_by=signals.name_of(interrupted))
        skipped = prepared.skipped if prepared is not None else "interrupted before the index was built"
        row = ReportRow(run_name, scores, skipped=skipped if scores is None else "")
        table = case_table(results, scores) if scores is not None else None
        if judged is not None and table is not None:
            judged.add_columns(table)
        files = run_files(cfg, fixture, row, results, table, revision, notes)
        if judged is not None:
            judged.add_files(files)
        run_tags = result_tags(tags, prepared, partial=interrupted is not None)
        if "search_batched" in figures:
            run_tags["evalpipe.search_mode"] = "batched" if figures["search_batched"] else "per_query"
        metrics = {
            **(flat_metrics(scores) if scores is not None else {}),
            **named(figures),
            **difficulty_metrics(fixture),  # what the recall figures are measured on
        }
        if judged is not None:  # objective=judged_recall_at_5 works too
            metrics.update(judged.metrics)
            run_tags.update(judged.tags)
        if offline:  # where `evalpipe sync` uploads by default (a file-store path: it must be told)
            with contextlib.suppress(EvalpipeError):
                extra["intended_uri"] = tracking.normalise_uri(cfg.tracking.uri)
        masked = mask_config(resolved, OmegaConf.to_container(cfg, resolve=False))
        params = measurement_params(masked, ranker_choice, fixture.name)
        run_tags[NOTE_TAG] = run_description(
            fixture.name, row, ks, fixture.tier_counts(), params, objective, lookup(metrics, objective)
        )
        try:
            rec.save(files, metrics, params, run_tags, status, extra)
        except OSError as exc:
            rec.abandon("FAILED")
            fail(f"cannot save the run in {rec.out_dir}: {exc}", code=1)

        def log_extra(tracker, run_id):  # online only: plots and (opt-in) traces are not saved locally
            if scores is None or interrupted is not None:
                return
            if plot_mode(cfg.get("plots", "recall")) != "none":
                log_plots(tracker, run_id, scores, results, err, plot_mode(cfg.get("plots", "recall")))
            if cfg.get("traces", False):  # opt-in: slower than the run itself (docs/tracking.md)
                from evalpipe.reporting.traces import log_case_traces

                log_case_traces(tracker, experiment_id, run_id, results, scores.first_rank)

        upload_error = rec.upload(log_extra)

    after_tables = judged.print if judged is not None else None
    if rec.online and not upload_error:
        from evalpipe.reporting.run_end import print_run_end

        print_run_end(
            console,
            tracker,
            experiment,
            experiment_id,
            rec.run_id,
            run_name,
            row,
            fixture,
            ks,
            notes,
            job,
            after_tables,
        )
    else:
        print_offline_end(console, row, fixture, ks, notes, after_tables)
        if upload_error:
            fail(upload_error, code=1)
        console.print(
            f"Offline: saved in [bold]{rec.out_dir}[/]; upload it with [cyan]evalpipe sync {rec.out_dir}[/]",
            soft_wrap=True,
        )
    if interrupted is not None:
        where = f"run {rec.run_id} KILLED; " if rec.online else ""
        print(
            f"evalpipe: interrupted by {why}: {where}partial results saved in {rec.out_dir}",
            file=sys.stderr,
        )
        raise SystemExit(signals.exit_code(interrupted))
    if failure is not None:  # a sweep goes on (its summary shows the point); a single run stops here
        for i, line in enumerate(failure.lines):
            print(f"evalpipe: {'' if i else 'error: '}{mask_text(line)}", file=sys.stderr)
        if not job.sweep_id:
            raise SystemExit(failure.code)
        return float("nan")
    value, refused = judged.objective(objective) if judged is not None else (None, "")
    if refused:  # a judged objective below full coverage (docs/metrics.md#strict-and-judged-figures)
        print(f"evalpipe: warning: {mask_text(refused)}", file=sys.stderr)
        return float("nan")
    return float(value if value is not None else lookup(metrics, objective) or 0.0)
