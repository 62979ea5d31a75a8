"""The stages of one evaluation, in order, each over the run's `RunState`.

check -> open_store -> reuse -> start -> measure -> judge -> record -> show -> upload -> report.
Bad input stops in `check` (or, found while building the index, in `measure`) with
exit 2 and one line; from `start` on an MLflow run is open, and every way out
ends it (FINISHED, FAILED or KILLED). `record` saves the run locally before
`upload` touches the store, so a tracking failure never costs finished work, and
`show` prints the results as soon as they are saved.

Where the run's data goes (offline, the warm upload worker, an in-process sweep's worker, or
this process) is decided once, in `open_store`, by `tracking.run_store.RunStore`; the later
stages ask it (`start`, `await_open`) and never choose again. With the worker, `open_store`
makes the checks that need no MLflow (exit 2 as before) and only asks the worker to open the
store; `record` waits for it before it saves, and `upload` sends the saved run to the worker.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from evalpipe import __version__
from evalpipe.core import progress_bars
from evalpipe.core.fingerprint import code_fingerprint
from evalpipe.corpus import corpus_metrics
from evalpipe.evaluation.files import case_table, run_files
from evalpipe.evaluation.identity import config_hash, default_run_name, experiment_name, hydra_context
from evalpipe.evaluation.measure import measure as measure_cases
from evalpipe.evaluation.measure import result_tags, score
from evalpipe.evaluation.runner import peak_memory_mb, prepare_ranker
from evalpipe.evaluation.state import RunState
from evalpipe.inputs.fixture import Fixture
from evalpipe.inputs.split import SPLIT_TAG
from evalpipe.reporting.headline import NOTE_TAG, run_description
from evalpipe.reporting.local import PARTIAL_MARK, unsynced
from evalpipe.reporting.params import measurement_params
from evalpipe.reporting.plots import plot_mode, run_figures
from evalpipe.reporting.report import ReportRow, print_tables
from evalpipe.safety import signals
from evalpipe.safety.errors import EvalpipeError, fail, print_error
from evalpipe.safety.secrets import mask_config, mask_mapping, mask_text, register_config
from evalpipe.scoring.names import lookup, named
from evalpipe.scoring.outcome import error_note, unknown_ids, verdict
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import RunScores, flat_metrics
from evalpipe.scoring.tokens import get_token_counter


def check(cfg: DictConfig) -> RunState:
    """Everything that can be checked before a case runs (and before MLflow is opened)."""
    # lazy: rich, evalpipe.evaluation, evalpipe.judge.run, ~45 ms
    from rich.console import Console

    from evalpipe.evaluation import preflight
    from evalpipe.judge.run import build_judge

    signals.install()
    console = Console(width=None if sys.stdout.isatty() else 160)
    err = Console(stderr=True)
    containers = register_config(cfg)  # the config read once; from here on, secrets are masked
    ranker_choice, overrides, out_dir = hydra_context()
    if out_dir is not None:  # never overwrite results that exist nowhere else
        kept = unsynced(out_dir, "hydra.sweep.dir" if preflight.is_multirun() else "hydra.run.dir")
        if kept:
            fail(kept)
    try:
        checked = preflight.check(cfg, overrides, containers)
        judge = build_judge(checked.resolved.get("judge"))  # plain values, not the Hydra node
    except EvalpipeError as exc:
        fail(str(exc))
    progress_bars.allow(checked.progress)  # progress=false: no bar of ours nor of a model loader
    for warning in checked.warnings:  # one plain line each (rich would wrap them)
        print(f"evalpipe: warning: {mask_text(warning)}", file=sys.stderr)
    return RunState(
        cfg=cfg,
        console=console,
        err=err,
        checked=checked,
        judge=judge,
        ranker_choice=ranker_choice,
        overrides=overrides,
        out_dir=out_dir,
        run_name=mask_text(checked.run_name or default_run_name(ranker_choice, overrides)),
        counter=get_token_counter(cfg.get("token_encoding", "cl100k_base")),
    )


def open_store(state: RunState) -> None:
    """Choose where the run's data goes (`tracking.run_store`) and open it; an unreachable
    store is exit 2 before any case."""
    # lazy: evalpipe.tracking.run_store, ~3 ms
    from evalpipe.tracking.run_store import RunStore, StoreSettings

    cfg = state.cfg
    state.experiment = experiment_name(cfg)
    state.offline = bool(cfg.tracking.get("offline", False))
    try:
        uri = cfg.tracking.uri
    except Exception:  # no tracking.uri at all (offline runs need none)
        uri = None
    settings = StoreSettings(
        uri=None if uri is None else str(uri),
        experiment=state.experiment,
        offline=state.offline,
        force=bool(cfg.get("force")),
        traces=bool(cfg.get("traces", False)),
        ks=tuple(state.ks),
        objective=state.objective,
    )
    state.store = RunStore.choose(settings)


def reuse(state: RunState) -> float | None:
    """The run's identity; inside a sweep, a point already measured is reused (its objective)."""
    # lazy: evalpipe.sweeps, evalpipe.tracking, ~11 ms
    from evalpipe.tracking import mlflow_store
    from evalpipe.tracking import sweep_job as sweep

    state.revision = mlflow_store.git_revision()
    fixture = state.fixture
    state.chash = config_hash(state.checked.resolved, fixture.sha256, code_fingerprint())
    state.job = sweep.job_context(state.tracker, state.experiment_id)
    # lazy: evalpipe.tracking.run_store, evalpipe.tracking.sweep_store, ~3 ms
    from evalpipe.tracking import sweep_store as sweep_store
    from evalpipe.tracking.run_store import Route

    if state.store.route is Route.SWEEP:  # the sweep's worker knows the points measured already
        reused = sweep_store.reuse_point(state) if state.job.sweep_id else None
        if reused is None:  # measured: with the store opened in this process, as before
            state.store.open_here()
        return reused
    if state.tracker is None or not state.job.sweep_id or state.cfg.get("force"):
        return None
    # lazy: evalpipe.tracking.reuse, ~1 ms
    from evalpipe.tracking.reuse import find_reusable, reuse_point

    done = find_reusable(state.tracker, state.experiment_id, state.chash, code_fingerprint(), fixture.sha256)
    if done is None:
        return None

    return reuse_point(
        state.console,
        state.tracker,
        state.experiment_id,
        done,
        state.job,
        state.run_name,
        state.out_dir,
        state.objective,
    )


def start(state: RunState) -> None:
    """Open the MLflow run (RUNNING from here until record/upload end it) with the identity tags."""
    # lazy: evalpipe.tracking.record, ~5 ms
    from evalpipe.tracking.record import Recording

    fixture, counter = state.fixture, state.counter
    tags = {
        **state.job.tags,
        "evalpipe.version": __version__,
        "evalpipe.git_revision": state.revision,
        "evalpipe.fixture": fixture.name,
        SPLIT_TAG: fixture.split,
        "evalpipe.fixture_sha256": fixture.sha256,
        **({"evalpipe.fixture_version": fixture.version} if fixture.version else {}),
        "evalpipe.corpus_sha256": fixture.corpus.sha256,
        "evalpipe.ranker": state.ranker_choice,
        "evalpipe.config_hash": state.chash,
        "evalpipe.code_fingerprint": code_fingerprint(),  # tracking.reuse asks by it
        "evalpipe.token_counter": counter.method,
        "evalpipe.objective": state.objective,
    }
    state.tags = mask_mapping(tags)
    state.notes = [] if not counter.note else [f"tokens estimated as chars/4: {counter.note}"]
    state.notes += state.checked.warnings
    out_dir = state.out_dir or Path(tempfile.mkdtemp(prefix="evalpipe-run-"))
    rec = Recording(out_dir, state.experiment, state.run_name)
    rec.describe_data(fixture)  # logged as MLflow dataset inputs (tracking.datasets)
    state.rec = rec
    state.store.attach(rec)
    state.store.start(rec, state.tags)


def guarded(state: RunState, stage: Callable[[RunState], None]) -> None:
    """Run a stage that runs cases: bad input found there ends the run FAILED with exit 2, a signal
    is kept in `state.interrupted` (record then saves the partial run), anything else is FAILED."""
    if state.interrupted is not None:
        return
    try:
        stage(state)
    except (EvalpipeError, FileNotFoundError) as exc:  # found while building the index: bad input
        state.rec.abandon("FAILED")
        fail(str(exc))
    except BaseException as exc:
        if not signals.is_interrupt(exc):
            state.rec.abandon("FAILED")
            raise
        state.interrupted = exc


def measure(state: RunState) -> None:
    """Build the index, run and score every case; decide whether the run counts (skipped, failed)."""
    checked, fixture, err = state.checked, state.fixture, state.err
    state.prepared = prepare_ranker(checked.ranker, fixture.corpus)
    if state.prepared.skipped and checked.allow_skipped:
        err.print(f"[yellow]ranker {state.ranker_choice} skipped:[/] {mask_text(state.prepared.skipped)}")
    state.results, state.scores, state.figures = measure_cases(
        checked, state.prepared, fixture, state.counter.count, state.run_name, err, state.results
    )
    if state.figures.get("unknown_ids"):
        state.notes.append(unknown_ids(state.results, fixture.corpus).note())
    state.failure = verdict(state.prepared.skipped, state.results, checked.allow_skipped, state.ranker_choice)
    state.notes += [n for n in [error_note(state.results)] if n and state.failure is None]


def judge(state: RunState) -> None:
    """LLM-judged figures beside the strict ones (never instead of them)."""
    if state.judge is None or state.scores is None or state.failure is not None:
        return
    # lazy: evalpipe.judge.run, ~22 ms
    from evalpipe.judge.run import run_judge

    fixture = state.fixture
    state.judged = run_judge(
        state.judge, state.results, state.scores, fixture.corpus, state.counter.count, fixture.tiers
    )
    state.scores = state.judged.scores  # the same strict scores, misses carrying judged_hit


def record(state: RunState) -> None:
    """Save the run (files, metrics, params, tags, status) in its output dir before any upload."""
    # lazy: evalpipe.fixture_check.summary, scipy, numpy, ..., ~219 ms
    from evalpipe.fixture_check.summary import difficulty_metrics
    from evalpipe.tracking import mlflow_store

    cfg, fixture, ks = state.cfg, state.fixture, state.ks
    results, prepared = state.results, state.prepared
    status = "FINISHED" if state.failure is None else "FAILED"  # skipped (exit 3) or failed (exit 1)
    extra: dict[str, Any] = {"cases_total": len(fixture.cases), "cases_completed": len(results)}
    if state.interrupted is not None:
        status, state.failure = "KILLED", None
        state.judged = None  # judging may have been cut short: the strict figures only
        ranker = prepared.ranker if prepared is not None else None
        state.scores = score(state.checked, fixture, results, ranker) if results else None
        state.figures = {"corpus_units": float(len(fixture.corpus)), "peak_memory_mb": peak_memory_mb()}
        name = signals.name_of(state.interrupted)
        state.why = f"{name} after {len(results)} of {len(fixture.cases)} cases"
        state.notes.append(f"{PARTIAL_MARK}: interrupted by {state.why}; the figures cover those cases only")
        extra.update(partial=True, interrupted_by=name)
    scores, judged = state.scores, state.judged
    skipped = prepared.skipped if prepared is not None else "interrupted before the index was built"
    row = state.row = ReportRow(state.run_name, scores, skipped=skipped if scores is None else "")
    table = case_table(results, scores) if scores is not None else None
    if judged is not None and table is not None:
        judged.add_columns(table)
    masked = mask_config(state.checked.resolved, state.checked.raw)  # config.yaml and the params
    files = run_files(masked, ks, fixture, row, results, table, state.revision, state.notes)
    if judged is not None:
        judged.add_files(files)
    run_tags = result_tags(state.tags, prepared, partial=state.interrupted is not None)
    if "search_batched" in state.figures:
        run_tags["evalpipe.search_mode"] = "batched" if state.figures["search_batched"] else "per_query"
    metrics = {
        **(flat_metrics(scores) if scores is not None else {}),
        **named(state.figures),
        **difficulty_metrics(fixture),  # what the recall figures are measured on
        **corpus_metrics(fixture.corpus),  # and over what: units by kind, tests, relations
    }
    if scores is None and state.interrupted is not None:  # stopped before its first case ended
        metrics["count/cases"] = 0.0
    if judged is not None:  # objective=judged_recall_at_5 works too
        metrics.update(judged.metrics)
        run_tags.update(judged.tags)
    state.metrics = metrics
    if state.offline:  # where `evalpipe sync` uploads by default (a file-store path: it must be told)
        with contextlib.suppress(EvalpipeError):
            extra["intended_uri"] = mlflow_store.normalise_uri(cfg.tracking.uri)
    params = measurement_params(masked, state.ranker_choice, fixture.name)
    params.update(state.checked.split.params())  # the split measured, even when left at its defaults
    headline = lookup(metrics, state.objective)
    run_tags[NOTE_TAG] = run_description(
        fixture.label, row, ks, fixture.tier_counts(), params, state.objective, headline
    )
    state.store.await_open(state.rec, state.tags)  # only now: the worker opens the run meanwhile
    try:
        state.rec.save(files, metrics, params, run_tags, status, extra)
    except OSError as exc:
        state.rec.abandon("FAILED")
        fail(f"cannot save the run in {state.rec.out_dir}: {exc}", code=1)


def upload(state: RunState) -> None:
    """Upload the saved run (online only), then the figures and traces that are not saved locally."""
    cfg, scores, results = state.cfg, state.scores, state.results
    mode = plot_mode(cfg.get("plots", "recall"))
    complete = scores is not None and state.interrupted is None

    def figures() -> dict[str, str | bytes]:
        if not complete or mode == "none":
            return {}
        return plot_files(scores, results, state.err, mode)

    def log_extra(tracker, run_id):
        if complete and cfg.get("traces", False):  # opt-in: slower than the run itself (docs/tracking.md)
            # lazy: evalpipe.tracking.traces, ~2 ms
            from evalpipe.tracking.traces import log_case_traces

            log_case_traces(tracker, state.experiment_id, run_id, results, scores.first_rank)

    state.upload_error = state.rec.upload(log_extra, figures)


def show(state: RunState) -> None:
    """Print a single run's tables and notes as soon as it is saved (the links follow the upload)."""
    if state.job.sweep_id:  # a sweep point prints one line at the end (`report`)
        return
    # lazy: rich, ~15 ms
    from rich.markup import escape

    console, fixture = state.console, state.fixture
    print_tables(console, fixture.label, [state.row], state.ks, fixture.tier_counts())
    if state.judged is not None:
        state.judged.print(console)
    for n in state.notes:
        console.print(f"[yellow]note:[/] {escape(mask_text(n))}")
    with contextlib.suppress(Exception):
        console.file.flush()


def report(state: RunState) -> float:
    """Print the links (or where the run is saved), then the exit code or the objective for a sweeper."""
    console, rec = state.console, state.rec
    if rec.online and not state.upload_error:
        # lazy: evalpipe.reporting.run_end, rich, evalpipe.tracking.links, ~18 ms
        from evalpipe.reporting.run_end import print_point
        from evalpipe.tracking.links import print_links

        if state.job.sweep_id:
            print_point(console, state.job, state.run_name, state.row, rec.run_id)
        else:
            exp, exp_id = state.experiment, state.experiment_id
            print_links(console, state.tracker, exp, exp_id, rec.run_id, state.run_name)
    else:
        if state.job.sweep_id:  # its tables were not printed by `show`
            after_tables = state.judged.print if state.judged is not None else None
            print_offline_end(console, state.row, state.fixture, state.ks, state.notes, after_tables)
        if state.upload_error:
            fail(state.upload_error, code=1)
        console.print(
            f"Offline: saved in [bold]{rec.out_dir}[/]; upload it with [cyan]evalpipe sync {rec.out_dir}[/]",
            soft_wrap=True,
        )
    if state.interrupted is not None:
        where = f"run {rec.run_id} KILLED; " if rec.online else ""
        print(
            f"evalpipe: interrupted by {state.why}: {where}partial results saved in {rec.out_dir}",
            file=sys.stderr,
        )
        raise SystemExit(signals.exit_code(state.interrupted))
    if state.failure is not None:  # a sweep goes on (its summary shows the point); a single run stops here
        first, *more = state.failure.lines
        print_error(first, more=more)
        if not state.job.sweep_id:
            raise SystemExit(state.failure.code)
        return float("nan")
    judged = state.judged
    value, refused = judged.objective(state.objective) if judged is not None else (None, "")
    if refused:  # a judged objective below full coverage (docs/metrics.md#coverage-and-the-budget)
        print(f"evalpipe: warning: {mask_text(refused)}", file=sys.stderr)
        return float("nan")
    if value is None:
        value = lookup(state.metrics, state.objective)
    if value is None:  # not measured (a measure that does not apply): never a 0.0 for a sweeper
        print(
            f"evalpipe: warning: objective={state.objective} was not measured by this run (no case "
            "has labels that name this ranker's IDs, e.g. a store's own records: choose a RAG "
            "objective such as objective=rag_document_hit_rate)",
            file=sys.stderr,
        )
        return float("nan")
    return float(value)


def print_offline_end(console, row: ReportRow, fixture: Fixture, ks, notes, after_tables) -> None:
    """The tables and notes of a run that is not (or not completely) in a store: no links."""
    # lazy: rich, ~15 ms
    from rich.markup import escape

    print_tables(console, fixture.label, [row], ks, fixture.tier_counts())
    if after_tables is not None:
        after_tables(console)
    for n in notes:
        console.print(f"[yellow]note:[/] {escape(mask_text(n))}")


def plot_files(
    scores: RunScores, results: list[CaseResult], err, mode: str = "all"
) -> dict[str, str | bytes]:
    """The figures `plots` asks for (reporting.plots.run_figures); a figure never costs a finished run."""

    try:
        return dict(run_figures(scores, [r.latency_us for r in results if r.latency_timed], mode))
    except Exception as exc:
        err.print(f"[yellow]plots skipped:[/] {type(exc).__name__}: {exc}")
        return {}
