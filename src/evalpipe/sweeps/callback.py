"""Hydra callback that turns a multirun into one MLflow parent run with a summary of every point.

Why a callback and not code in the task: only the multirun *parent* process sees
the whole sweep. It creates the store and experiment once (several jobs creating
a fresh SQLite store at the same time corrupt it), opens the parent run before
any job starts, and hands its ID to the jobs through the environment (inherited
by the basic launcher's in-process jobs and by joblib/loky and local Ray workers).
Jobs tag themselves as children (`evalpipe.tracking.sweep_job.job_context`). At the end the
parent collects the children and the runs reused by resume and logs
summary.md / summary.csv / plots and best/<metric>.

Single runs are untouched: only on_multirun_start/on_multirun_end act. If the
sweep aborts (Hydra's basic sweeper raises after a failed job, skipping
on_multirun_end; Ctrl-C), an atexit hook still writes what finished and marks
the parent FAILED/KILLED, so it is never left RUNNING.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from evalpipe.safety.errors import EvalpipeError, fail, print_error
from evalpipe.safety.secrets import mask_lines, mask_override, mask_text
from evalpipe.tracking.sweep_job import (
    PARENT_ENV,
    ROLE_TAG,
    SWEEP_ENV,
    SWEEP_FILE,
    SWEEP_TAG,
    SWEPT_ENV,
    link_env,
    sweep_id_for,
)
from evalpipe.tracking.sweep_store import (  # noqa: F401
    ORPHAN_REASON,
    ORPHAN_TAG,
    LocalStore,
    Opened,
    SweepStore,
    WorkerStore,
    set_point_store,
)

URI_ENV = "MLFLOW_TRACKING_URI"
ENV_KEYS = (PARENT_ENV, SWEEP_ENV, SWEPT_ENV, URI_ENV)
WORKER_GRACE_S = 15.0
#: Launchers that cancel their own jobs on SIGINT/SIGTERM (hydra_plugins.evalpipe_ray_launcher):
#: the driver's child processes are then the local Ray instance's daemons, not job workers.
SELF_CANCELLING_LAUNCHERS = ("RayLauncher",)
#: Launchers that run the jobs in this process: the parent run may still be on its way from the
#: upload worker when the sweep starts (it is waited for before the first job, `on_job_start`).
IN_PROCESS_LAUNCHERS = ("BasicLauncher",)
#: Sweepers that read the jobs' `reused_run.json` only once the sweep has ended.
LATE_READING_SWEEPERS = ("BasicSweeper",)
ABORT_NOTE = "The sweep stopped early (a job failed or was interrupted); points not listed did not run."


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _sweep_name(config: DictConfig) -> str:
    sweep = config.get("sweep")
    if isinstance(sweep, DictConfig) and sweep.get("name"):
        return str(sweep.name)
    return ""


def _param_key(key: str) -> str:
    """An override key as an MLflow param name (`+sweep` -> `sweep`; odd characters -> `_`)."""
    return re.sub(r"[^A-Za-z0-9_\-. /:]", "_", key.strip().lstrip("+~"))


def _sweeper_spec(config: DictConfig) -> tuple[dict[str, str], list[str]]:
    """({key: spec} of the sweeper's params, command-line task overrides)."""
    hydra_cfg = config.hydra
    params = hydra_cfg.sweeper.get("params")
    spec = {}
    if isinstance(params, DictConfig):
        spec = {str(k): str(v) for k, v in OmegaConf.to_container(params, resolve=True).items()}
    task = [str(x) for x in OmegaConf.to_container(hydra_cfg.overrides.task, resolve=False)]
    return spec, task


def _check_every_point(config: DictConfig) -> None:
    """Compose and check every point (the grid; an Optuna search space's ends) before the parent
    run exists (`sweeps.points`); the grid's configs go on to the launcher (`compose_once.keep`)."""
    # lazy: hydra, ~140 ms
    from hydra.core.global_hydra import GlobalHydra

    # lazy: evalpipe.evaluation.preflight, evalpipe.sweeps, numpy, ~83 ms
    from evalpipe.evaluation import preflight
    from evalpipe.sweeps import compose_once, points

    hydra = GlobalHydra.instance()
    if not hydra.is_initialized():  # the callback driven by hand (tests): no loader to compose with
        return
    loader = hydra.config_loader()
    points.check_points(
        config,
        loader,
        lambda job, overrides: preflight.check(job, overrides, sweep=True),
        keep=lambda overrides, composed: compose_once.keep(loader, overrides, composed),
    )


class MLflowSweepCallback(Callback):
    """Parent MLflow run per multirun; summary, best points and plots when it ends.

    `plot_metrics` picks the metrics drawn over each swept parameter (default:
    the objective and mrr).
    """

    def __init__(self, plot_metrics: list[str] | None = None) -> None:
        self.plot_metrics = list(plot_metrics or [])
        self._reset()

    def _reset(self) -> None:
        self._uri: str | None = None
        self._parent: str | None = None
        self._sweep_id = ""
        self._sweep_dir = ""
        self._keys: list[str] = []
        self._objective = "recall_at_5"
        self._started = 0.0
        self._saved_env: dict[str, str | None] = {}
        self._config: DictConfig | None = None
        self._experiment_id = ""
        self._rows: list[Any] = []
        self._holdout: Any = None
        self._significance: Any = None  # sweeps.significance.Significance: the tied group
        self._stats: Any = None  # sweeps.significance.Settings, read from the config at the start
        self._launcher = ""
        self._plotter: Any = None  # reporting.plot_worker.PlotWorker, importing matplotlib meanwhile
        self._store: SweepStore | None = None
        self._pending: Any = None  # tracking.sweep_store.Pending: the parent run, being created by the worker
        self._experiment = ""
        self._sweeper = ""

    # Hydra pickles the callbacks with the job context for joblib/Ray workers: ship an inert copy.
    def __getstate__(self) -> dict[str, Any]:
        return {"plot_metrics": self.plot_metrics}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.plot_metrics = list(state.get("plot_metrics") or [])
        self._reset()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Hydra turns a callback's exception into a warning and runs the jobs anyway, each then
        # racing to create the store: stop the sweep instead (SystemExit is not caught).
        try:
            self._start(config)
        except SystemExit:
            raise
        except Exception as exc:
            print_error(f"cannot start the sweep: {type(exc).__name__}: {exc}")
            self._finish(aborted="FAILED")
            raise SystemExit(2) from None

    def _start(self, config: DictConfig) -> None:
        # lazy: evalpipe.evaluation.preflight, numpy, ~83 ms
        from evalpipe.evaluation.preflight import check_sweep, check_sweep_dir

        # lazy: evalpipe.sweeps, evalpipe.tracking.sweep_summary, numpy, ~98 ms
        from evalpipe.sweeps import compose_once
        from evalpipe.tracking.sweep_summary import swept_keys

        compose_once.install()  # each job's config composed once (the check's copy goes to the launcher)
        # lazy: evalpipe.sweeps.significance, numpy, ~154 ms
        from evalpipe.sweeps.significance import settings_from

        try:  # bad input found now leaves nothing in the store (no experiment, no parent run)
            check_sweep(config, swept_keys(*_sweeper_spec(config)))
            self._stats = settings_from(config.get("sweep"))
            check_sweep_dir(str(config.hydra.sweep.dir))
            _check_every_point(config)
        except EvalpipeError as exc:
            fail(exc)
        except ValueError as exc:  # a bad sweep.alpha / correction / power
            fail(exc)
        # lazy: evalpipe.tracking, ~8 ms
        from evalpipe.tracking import upload_worker

        worker = upload_worker.take()  # started by `python -m evalpipe -m`; not for the jobs
        if worker is not None and ("mlflow" in sys.modules or config.tracking.get("offline")):
            worker.discard()  # MLflow is here already (nothing to gain), or there is no store
            worker = None
        if config.tracking.get("offline"):  # jobs save locally; `evalpipe sync <sweep dir>` uploads them
            print("[evalpipe] offline sweep: no parent run; each job saves its run locally", file=sys.stderr)
            return
        # lazy: evalpipe.evaluation.identity, ~3 ms
        from evalpipe.evaluation.identity import experiment_name

        # lazy: evalpipe.tracking, evalpipe.tracking.links, ~13 ms
        from evalpipe.tracking import mlflow_store
        from evalpipe.tracking.links import prepare_experiment

        # Resolving now also pins ${now:...} in the sweep dir: Hydra copies this config's
        # resolver cache into every job, so parent and jobs agree on the dir and its sweep ID.
        self._sweep_dir = os.path.abspath(str(config.hydra.sweep.dir))
        self._sweep_id = sweep_id_for(self._sweep_dir, time.time_ns())
        self._objective = str(config.get("objective") or "recall_at_5")
        # lazy: evalpipe.safety.hydra_secrets, ~1 ms
        from evalpipe.safety.hydra_secrets import register_job_secrets

        register_job_secrets(config)
        spec, task = _sweeper_spec(config)
        spec = {k: mask_override(f"{k}={v}").partition("=")[2] for k, v in spec.items()}
        task = [mask_override(item) for item in task]
        self._keys = swept_keys(spec, task)
        experiment = experiment_name(config)
        self._experiment = experiment
        sweeper = str(config.hydra.sweeper.get("_target_", "")).rsplit(".", 1)[-1]
        launcher = str(config.hydra.launcher.get("_target_", "")).rsplit(".", 1)[-1]
        self._launcher = launcher
        self._sweeper = sweeper
        name = _sweep_name(config)
        tags = {
            ROLE_TAG: "parent",
            SWEEP_TAG: self._sweep_id,
            "evalpipe.sweep_dir": mask_text(self._sweep_dir),
            "evalpipe.sweeper": sweeper,
            "evalpipe.launcher": launcher,
            "evalpipe.objective": self._objective,
            "evalpipe.swept_keys": ",".join(self._keys),
        }
        params = {f"sweep.{_param_key(k)}": v for k, v in spec.items()}
        for item in task:
            key, _, value = item.partition("=")
            key = _param_key(key)
            params[f"{'sweep' if key in self._keys else 'override'}.{key}"] = value
        for key in ("n_trials", "n_jobs", "direction"):
            if config.hydra.sweeper.get(key) is not None:
                params[f"sweeper.{key}"] = str(config.hydra.sweeper.get(key))
        params["objective"] = self._objective
        params.update(
            {
                "stats.alpha": str(self._stats.alpha),
                "stats.correction": self._stats.correction,
                "stats.power": str(self._stats.power),
            }
        )
        run_name = f"{name or 'sweep'} {self._sweep_id}"
        ks = [int(k) for k in config.ks]
        try:
            if worker is not None:  # the warm worker opens the store while Hydra composes the jobs
                uri = mlflow_store.check_store(str(config.tracking.uri))  # exit 2 now, as before
                self._store = WorkerStore(worker, uri)
                self._pending = self._store.begin(experiment, ks, self._objective, run_name, tags, params)
            else:
                self._start_plotter()
                tracker, experiment_id = mlflow_store.open_experiment(str(config.tracking.uri), experiment)
                prepare_experiment(tracker.client, experiment_id, ks, self._objective)
                self._store = LocalStore(tracker)
                self._store.adopt_experiment(experiment, experiment_id)
                self._opened(
                    Opened(experiment_id, self._store.create_parent(experiment_id, run_name, tags, params))
                )
        except EvalpipeError as exc:
            fail(exc)
        self._started = time.time()
        self._config = config
        atexit.register(self._on_abort)
        # lazy: evalpipe.safety, ~3 ms
        from evalpipe.safety import signals

        signals.on_interrupt(self._stop_workers)
        if launcher not in IN_PROCESS_LAUNCHERS:  # the jobs inherit the parent run's ID when they start
            self._resolve()
        elif self._pending is not None:  # once Hydra has composed the first batch (or a job starts)
            # lazy: evalpipe.sweeps, ~1 ms
            from evalpipe.sweeps import compose_once

            compose_once.after_check(self._resolve)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Before an in-process job: the parent run the worker was creating meanwhile."""
        if self._pending is not None:
            self._resolve()

    def on_job_end(self, config: DictConfig, **kwargs: Any) -> None:
        """After an in-process job: the sweepers that read a job's `reused_run.json` as it ends
        (Optuna's) get its reuse child's ID; Hydra's basic sweeper reads them at the end."""
        if isinstance(self._store, WorkerStore) and self._sweeper not in LATE_READING_SWEEPERS:
            self._store.flush()

    def _resolve(self) -> None:
        """Wait for the parent run; a store the worker could not open is exit 2, as before."""

        pending, self._pending = self._pending, None
        if pending is None:
            return
        # lazy: evalpipe.sweeps, ~1 ms
        from evalpipe.sweeps import compose_once

        compose_once.after_check(None)
        try:
            opened = pending.wait()
        except EvalpipeError as exc:
            fail(exc)
        self._opened(opened)

    def _start_plotter(self) -> None:
        """The summary's plots are drawn by a warm child at the end: it imports matplotlib meanwhile
        (after the upload worker has imported MLflow, so that the two do not share the second core)."""
        # lazy: evalpipe.reporting.plot_worker, ~6 ms
        from evalpipe.reporting.plot_worker import PlotWorker

        if self._plotter is None:
            self._plotter = PlotWorker.start()

    def _opened(self, opened: Opened) -> None:
        """The parent run exists: tell the jobs (environment, sweep file) and the user."""
        assert self._store is not None
        self._start_plotter()
        self._parent = opened.parent_run_id
        self._experiment_id = opened.experiment_id
        self._uri = self._store.uri
        new_env = {
            PARENT_ENV: self._parent,
            SWEEP_ENV: self._sweep_id,
            SWEPT_ENV: ",".join(self._keys),
            URI_ENV: self._store.uri,
        }
        os.makedirs(self._sweep_dir, exist_ok=True)
        with open(os.path.join(self._sweep_dir, SWEEP_FILE), "w", encoding="utf-8") as fh:
            json.dump(
                {"sweep_id": self._sweep_id, "parent_run_id": self._parent, "swept_keys": self._keys}, fh
            )
        self._saved_env = {k: os.environ.get(k) for k in new_env}
        os.environ.update(new_env)
        if isinstance(self._store, WorkerStore):
            set_point_store(self._store)
        print(
            f"[evalpipe] sweep {self._sweep_id}: parent run {self._parent} "
            f"in experiment {self._experiment!r}",
            file=sys.stderr,
        )

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        # lazy: evalpipe.safety, ~3 ms
        from evalpipe.safety import signals

        atexit.unregister(self._on_abort)
        signals.remove_hook(self._stop_workers)
        self._finish(aborted=None)

    def _stop_workers(self, signum: int) -> None:
        """On SIGINT/SIGTERM: pass it on to the worker processes (joblib/loky) and give their jobs
        up to WORKER_GRACE_S to save what they measured (run_info.json) before the launcher kills
        them; jobs still running after that are marked KILLED by `_finish`."""

        # lazy: evalpipe.reporting.local, evalpipe.safety, ~5 ms
        from evalpipe.reporting.local import INFO_FILE
        from evalpipe.safety import signals

        if self._launcher in SELF_CANCELLING_LAUNCHERS:  # its children are Ray's own daemons
            return
        own = {getattr(getattr(getattr(self._store, "worker", None), "proc", None), "pid", None)}
        children = [  # the upload worker is not a job's: it ends the sweep's runs when told to
            p for p in signals.child_pids() if "resource_tracker" not in _cmdline(p) and p not in own
        ]
        if not children:
            return
        signals.forward(signum, children)
        sweep_dir = Path(self._sweep_dir)

        def saved() -> bool:
            started = [d for d in sweep_dir.iterdir() if (d / ".hydra").is_dir()]
            return all((d / INFO_FILE).is_file() or (d / "reused_run.json").is_file() for d in started)

        signals.wait_until(saved, WORKER_GRACE_S)

    def _on_abort(self) -> None:
        """atexit: the sweep ended without on_multirun_end (a job failed, Ctrl-C, SIGTERM, SystemExit)."""
        # lazy: evalpipe.safety, ~3 ms
        from evalpipe.safety import signals

        self._finish(aborted="KILLED" if signals.received() else "FAILED")

    def _finish(self, aborted: str | None) -> None:
        try:
            self._finish_parent(aborted)
        finally:
            plotter, self._plotter = self._plotter, None
            if plotter is not None:  # not asked (aborted, or the summary failed first)
                plotter.discard()

    def _finish_parent(self, aborted: str | None) -> None:
        if self._pending is not None:  # stopped before the first job: the parent run is on its way
            try:
                self._resolve()
            except SystemExit:
                return
        if self._parent is None or self._uri is None:
            return
        set_point_store(None)
        parent, store = self._parent, self._store
        self._parent = None
        status = aborted or "FINISHED"
        try:
            if aborted:  # what interrupted workers saved goes up before their runs are ended
                self._upload_saved_points(store)
            # A child still RUNNING now lost its worker (a Ray worker or node killed mid-point): the
            # sweep itself went on, so this is not only for aborts.
            store.end_orphans(parent, aborted or "FAILED")
            failed = self._write_summary(store, parent, aborted)
            if failed and status == "FINISHED":
                status = "FAILED"
        except Exception as exc:  # the summary is a convenience: never leave the parent RUNNING for it
            print(
                f"[evalpipe] warning: sweep summary not written: {type(exc).__name__}: {exc}", file=sys.stderr
            )
            status = aborted or "FAILED"
        finally:
            try:
                store.end_run(parent, status)
            except Exception as exc:  # the store went away (a server stopped mid-sweep): one line
                store = None
                print(
                    f"[evalpipe] warning: parent run {parent} could not be ended {status} "
                    f"({type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''})",
                    file=sys.stderr,
                )
            finally:
                for key, value in self._saved_env.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
                self._saved_env = {}
        print(f"[evalpipe] sweep {self._sweep_id}: parent run {parent} {status}", file=sys.stderr)
        if self._rows and store is not None:
            self._print_summary(store, parent, status)

    def _print_summary(self, store: SweepStore, parent: str, status: str) -> None:
        """The top points by the objective, the best point, and where the summary and parent run are."""

        # lazy: rich, evalpipe.tracking.sweep_summary, numpy, ..., ~153 ms
        from rich import box
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        from evalpipe.tracking.links import ui_lines
        from evalpipe.tracking.sweep_summary import best_line, points_table, top_points

        console = Console(width=None if sys.stdout.isatty() else 160)
        top = top_points(self._rows, self._objective)
        sig = self._significance
        header, body = points_table(
            top,
            self._keys,
            {r.run_id for r in sig.tied_rows} if sig else None,
            sig.ranks() if sig else None,
        )
        table = Table(
            box=box.SIMPLE_HEAD,
            title=f"sweep {self._sweep_id}: top {len(top)} of {len(self._rows)} points "
            f"by {escape(self._objective)}{self._split_note()}",
            title_justify="left",
        )
        for i, h in enumerate(header):
            table.add_column(escape(h), justify="right" if i > len(self._keys) else "left")
        for row, point in zip(body, top, strict=True):  # the 8-character ID, as compare accepts it
            table.add_row(*(escape(cell) for cell in row[:-1]), point.run_id[:8])
        console.print(table)
        console.print(escape(best_line(self._rows, self._keys, self._objective)), highlight=False)
        if self._significance is not None:
            # lazy: evalpipe.sweeps.significance, numpy, ~129 ms
            from evalpipe.sweeps.significance import label_for, mde_line

            sig, label = self._significance, label_for(self._keys)
            console.print(escape(sig.headline(label)), highlight=False, soft_wrap=True)
            if sig.mde is not None:
                console.print(escape(mde_line(sig)), highlight=False, soft_wrap=True)
            for warning in sig.warnings(label):
                console.print(f"[bold yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)
        if self._holdout is not None:
            # lazy: evalpipe.sweeps.holdout, numpy, ~93 ms
            from evalpipe.sweeps.holdout import print_holdout

            print_holdout(console, self._holdout)
        summary = Path(self._sweep_dir) / "summary.md"
        if summary.is_file():
            console.print(f"summary:    {escape(str(summary))}", highlight=False)
        console.print(f"parent run: {parent} ({status})", highlight=False)
        for line in ui_lines(store.uri, self._experiment_id, parent, store.ui_command):
            console.print(escape(line), highlight=False, soft_wrap=True)

    def _upload_saved_points(self, store: SweepStore) -> None:
        """After an aborted sweep: points their workers saved but could not upload before being
        torn down go up now, into their own runs, as `evalpipe sync` would; what cannot is named
        in one line with the sync command."""
        left = store.upload_saved_points(self._sweep_dir)
        if left:
            print(
                f"evalpipe: {left} interrupted point(s) are saved in {self._sweep_dir} but not in the store: "
                f"upload them with `evalpipe sync {self._sweep_dir}`",
                file=sys.stderr,
            )

    def _split_note(self) -> str:
        """` on fixture.split=dev` when the sweep measured part of its fixture."""
        fixture = self._config.get("fixture") if self._config is not None else None
        split = str((fixture or {}).get("split") or "all")
        return "" if split == "all" else f" on fixture.split={split}"

    def _write_summary(self, store: SweepStore, parent: str, aborted: str | None = None) -> int:
        """Log summary.md, summary.csv, plots and best/<metric>; return the number of failed points."""

        # lazy: evalpipe.reporting.headline, numpy, evalpipe.reporting.plots, ~150 ms
        from evalpipe.reporting.headline import NOTE_TAG, clip
        from evalpipe.reporting.plots import sweep_plots

        # lazy: evalpipe.tracking.sweep_summary, numpy, ~90 ms
        from evalpipe.tracking.sweep_summary import (
            best_metric_names,
            best_points,
            summary_csv,
            summary_markdown,
            sweep_description,
        )

        # 1 s slack: file mtimes can be coarser than time.time().
        rows = store.collect_rows(parent, self._sweep_dir, self._keys, since=self._started - 1.0)
        self._rows = rows
        best = best_points(rows, best_metric_names(rows, self._objective))
        failed = sum(r.status == "FAILED" for r in rows)
        metrics = {f"best/{name}": row.metrics[name] for name, row in best.items()}
        metrics.update(
            {
                "sweep/points": float(len(rows)),
                "sweep/failed": float(failed),
                "sweep/reused": float(sum(r.status == "REUSED" for r in rows)),
            }
        )
        tags = {f"best/{name}.run_id": row.run_id for name, row in best.items()}
        sig = self._tied_group(store, rows)
        held = self._run_holdout(store, parent, rows) if aborted is None else None
        description = sweep_description(rows, self._keys, self._objective, self._sweep_id)
        if sig is not None:
            # lazy: evalpipe.sweeps, numpy, ~133 ms
            from evalpipe.sweeps import significance

            metrics.update(significance.metrics(sig))
            tags.update(significance.tags(sig))
            label = significance.label_for(self._keys)
            lines = [f"**{sig.headline(label)}**"] + [f"**warning: {w}**" for w in sig.warnings(label)]
            description = "\n\n".join(lines) + "\n\n" + description
            if held is not None:
                held = dataclasses.replace(held, tied=tuple(label(r) for r in sig.tied_rows))
                self._holdout = held
        if held is not None:
            # lazy: evalpipe.sweeps, numpy, ~105 ms
            from evalpipe.sweeps import holdout

            metrics.update(holdout.metrics(held))
            tags.update(holdout.tags(held))
            description = "\n".join(holdout.markdown(held)) + "\n" + description
        tags[NOTE_TAG] = clip(description)
        store.log(parent, metrics=metrics, tags=tags)
        name = _sweep_name(self._config) if self._config is not None else ""
        files: dict[str, str | bytes] = {
            "summary.md": summary_markdown(
                rows,
                self._keys,
                self._objective,
                self._sweep_id,
                name,
                note=ABORT_NOTE if aborted else "",
                holdout_lines=holdout.markdown(held) if held is not None else (),
                tied_lines=significance.markdown(sig, self._keys, significance.label_for(self._keys))
                if sig is not None
                else (),
                tied={r.run_id for r in sig.tied_rows} if sig is not None else None,
                ranks=sig.ranks() if sig is not None else None,
            ),
            "summary.csv": summary_csv(rows, self._keys, holdout=held),
        }
        if held is not None:
            # lazy: evalpipe.sweeps.holdout, numpy, ~94 ms
            from evalpipe.sweeps.holdout import csv_rows

            files["holdout.csv"] = csv_rows(held)
        for extra in ("multirun.yaml", "optimization_results.yaml"):  # Hydra's, and Optuna's best point
            path = Path(self._sweep_dir) / extra
            if path.is_file():
                files[extra] = path.read_text(encoding="utf-8")
        files = {k: mask_lines(v) if isinstance(v, str) else v for k, v in files.items()}
        store.log(parent, files=files)
        plot_metrics = self.plot_metrics or [
            (best_metric_names(rows, self._objective) or [self._objective])[0],
            "mrr",
        ]
        plotter, self._plotter = self._plotter, None
        try:
            plots = None
            if plotter is not None:
                with contextlib.suppress(Exception):  # the worker failed: draw them here
                    plots = plotter.render(rows, plot_metrics)
            if plots is None:
                plots = sweep_plots(rows, plot_metrics)
        except Exception as exc:  # a plot must not cost the summary
            print(f"[evalpipe] warning: sweep plots skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
            plots = {}
        if plots:
            store.log(parent, files=plots, subdir="plots")
        out = Path(self._sweep_dir)
        if out.is_dir():  # a local copy beside Hydra's multirun.yaml
            for fname in ("summary.md", "summary.csv", "holdout.csv"):
                if fname in files:
                    (out / fname).write_text(str(files[fname]), encoding="utf-8")
        return failed

    def _tied_group(self, store: SweepStore, rows: list[Any]) -> Any:
        """The points tied with the best on the objective (and against the default), from their
        per-case values; None when fewer than two points have them. Never costs the summary."""
        # lazy: evalpipe.sweeps.significance, numpy, ~150 ms
        from omegaconf import OmegaConf

        from evalpipe.sweeps import significance

        measured = [r for r in rows if r.measured]
        if len(measured) < 2 or self._stats is None:
            return None
        try:
            cases = store.per_case([r.run_id for r in measured], self._objective)
            defaults: dict[str, Any] = {}
            if self._config is not None:
                for key in self._keys:
                    value = OmegaConf.select(self._config, key, default="\0missing")
                    if value != "\0missing" and not OmegaConf.is_config(value):
                        defaults[key] = value
            default = significance.default_index(measured, self._keys, defaults)
            sig = significance.significance(measured, cases, self._objective, self._stats, default)
        except Exception as exc:  # the tests are on top of the sweep: never cost its summary
            print(f"[evalpipe] warning: tied-with-best skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        self._significance = sig
        return sig

    def _run_holdout(self, store: SweepStore, parent: str, rows: list[Any]) -> Any:
        """On a dev-split sweep: the best and the reference point re-run on the test split."""
        # lazy: evalpipe.sweeps, numpy, ~106 ms
        from evalpipe.sweeps import holdout

        config = self._config
        if config is None or not holdout.wanted(config):
            return None
        # lazy: evalpipe.suite.members, ~8 ms
        from evalpipe.suite.members import hydra_overrides

        task = [str(x) for x in OmegaConf.to_container(config.hydra.overrides.task, resolve=False)]
        task += hydra_overrides([str(x) for x in OmegaConf.to_container(config.hydra.overrides.hydra)])
        link = link_env(parent, holdout.HOLDOUT_ROLE, self._sweep_id)
        try:
            client = store.read_client()
            held = holdout.run_holdout(
                client,
                rows,
                self._objective,
                task,
                self._keys,
                self._sweep_dir,
                link,
                say=lambda line: print(line, file=sys.stderr),
            )
        except Exception as exc:  # the check is on top of the sweep: never cost its summary
            print(f"[evalpipe] warning: hold-out check failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return None
        self._holdout = held
        return held
