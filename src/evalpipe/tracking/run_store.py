"""Where one run's data goes: the one object the stages and the suite runner ask.

A run's MLflow side can take four routes, chosen once, before the first case:

* `offline`: `tracking.offline=true`; the run is saved locally only (`evalpipe sync` later);
* `worker`: a single `python -m evalpipe` run hands the store to the warm upload worker
  (`tracking.upload_worker`), which opens it while the cases run; this process never imports
  MLflow;
* `sweep`: a point of an in-process sweep whose store is the sweep's worker
  (`tracking.sweep_store`); the point asks it whether it was measured already, and only a point
  that must be measured opens the store here;
* `here`: this process opens the experiment itself (a suite, `traces`, a resumed sweep point,
  or MLflow already imported).

Every way the worker can fail to serve (it died before or while opening) falls back to
`here` through `fall_back`, so there is one place that decides, and the stages only say
what they need (`open`, `start`, `await_open`). The sweep's own parent run goes through
`tracking.sweep_store.SweepStore`, the interface both of its store kinds implement.
"""

from __future__ import annotations

import contextlib
import enum
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalpipe.heap import freeze_startup_heap
from evalpipe.safety import signals
from evalpipe.safety.errors import EvalpipeError, fail

if TYPE_CHECKING:
    from collections.abc import Mapping

    from evalpipe.tracking.mlflow_store import Tracker
    from evalpipe.tracking.record import Recording
    from evalpipe.tracking.upload_worker import UploadWorker


class Route(enum.Enum):
    """The four routes of the module docstring."""

    OFFLINE = "offline"
    WORKER = "worker"
    SWEEP = "sweep"
    HERE = "here"


@dataclass(frozen=True)
class StoreSettings:
    """The plain tracking values a route is chosen from (read from the config at the entry)."""

    uri: str | None
    experiment: str
    offline: bool = False
    force: bool = False
    traces: bool = False
    ks: tuple[int, ...] = ()
    objective: str = "recall_at_5"


@dataclass
class RunStore:
    """One run's route to its store, and the handles that route holds."""

    settings: StoreSettings
    route: Route
    tracker: Tracker | None = None
    experiment_id: str | None = None
    worker: UploadWorker | None = None
    #: the worker's "open" request, answered by `await_open`
    open_request: int | None = None
    #: the store URI the worker was asked to open (checked by `check_store` before any case)
    uri: str | None = None

    # -- choosing -------------------------------------------------------------------------------

    @classmethod
    def choose(cls, settings: StoreSettings, worker_allowed: bool = True) -> RunStore:
        """The route for this run, with the store opened (or asked to open) now: an unreachable
        store is exit 2 here, before any case. `worker_allowed=False` (a suite) never uses the
        warm worker."""
        # lazy: evalpipe.tracking.upload_worker, ~2 ms
        from evalpipe.tracking import upload_worker

        worker = upload_worker.take() if worker_allowed else None
        if worker is not None and not settings.offline and _worker_fits(settings):
            store = cls(settings, Route.WORKER)
            if store._ask_worker(worker):
                return store
        if worker is not None:
            worker.discard()
        if settings.offline:
            return cls(settings, Route.OFFLINE)
        if worker_allowed and _served_by_sweep(settings):
            return cls(settings, Route.SWEEP)
        store = cls(settings, Route.HERE)
        store.open_here()
        return store

    def _ask_worker(self, worker: UploadWorker) -> bool:
        # lazy: evalpipe.tracking.mlflow_store, ~8 ms
        from evalpipe.tracking import mlflow_store, upload_worker

        try:
            uri = mlflow_store.check_store(self.settings.uri, self.settings.experiment)
        except EvalpipeError as exc:
            fail(str(exc))
        with contextlib.suppress(upload_worker.WorkerGone):  # gone: open it here instead
            self.open_request = worker.send(
                "open",
                uri=uri,
                experiment=self.settings.experiment,
                ks=list(self.settings.ks),
                objective=self.settings.objective,
            )
            self.worker, self.uri = worker, uri
            return True
        return False

    @property
    def online(self) -> bool:
        return self.route is not Route.OFFLINE

    def open_here(self) -> None:
        """Open the experiment in this process (exit 2 if it cannot be) and prepare its UI."""
        # lazy: evalpipe.tracking, ~8 ms
        from evalpipe.tracking import links, mlflow_store

        try:
            self.tracker, self.experiment_id = mlflow_store.open_experiment(
                self.settings.uri, self.settings.experiment
            )
        except EvalpipeError as exc:
            fail(str(exc))
        self.route = Route.HERE
        freeze_startup_heap()  # MLflow's import heap: no later collection (or the exit) walks it again
        links.prepare_experiment(
            self.tracker.client, self.experiment_id, list(self.settings.ks), self.settings.objective
        )

    # -- the run --------------------------------------------------------------------------------

    def attach(self, rec: Recording) -> None:
        """Give the recording the handles of this route."""
        rec.tracker, rec.experiment_id = self.tracker, self.experiment_id
        if self.route is Route.WORKER:
            rec.worker, rec.uri = self.worker, self.uri

    def fall_back(self, rec: Recording | None = None) -> None:
        """The worker is gone: open the store here and give the recording the new handles."""
        self.worker = None
        self.tracker = None
        if rec is not None:
            rec.worker = None
        self.open_here()
        if rec is not None:
            self.attach(rec)

    def start(self, rec: Recording, tags: Mapping[str, str]) -> None:
        """Open the MLflow run (offline: nothing); RUNNING from here until the run is ended."""
        if self.route is Route.OFFLINE:
            return
        if self.route is Route.WORKER:
            # lazy: evalpipe.tracking.worker_errors, ~1 ms
            from evalpipe.tracking.worker_errors import WorkerGone

            try:
                rec.start(tags)
                return
            except WorkerGone:
                self.fall_back(rec)
        self._start_here(rec, tags)

    def _start_here(self, rec: Recording, tags: Mapping[str, str]) -> None:
        # lazy: mlflow, pandas, scipy, ..., ~1181 ms
        from mlflow.exceptions import MlflowException

        assert self.tracker is not None
        try:
            rec.start(tags)
        except MlflowException as exc:
            fail(f"cannot start an MLflow run in {self.tracker.uri}: {exc}", code=1)
        except BaseException as exc:  # a signal while the run is being created: nothing measured yet
            if signals.is_interrupt(exc):
                rec.abandon("KILLED")
            raise

    def await_open(self, rec: Recording, tags: Mapping[str, str]) -> None:
        """Wait for the worker to have opened the store and the run (before anything is saved).

        The store passed `check_store` before the first case, so a failure here (it died
        meanwhile, a damaged database) is an upload failure: the run is saved locally and the
        upload stage reports it (exit 1, `evalpipe sync` later). A worker that died is replaced
        by opening the store here."""
        if self.route is not Route.WORKER or self.tracker is not None or rec.store_error:
            return
        # lazy: evalpipe.tracking, evalpipe.tracking.worker_errors, ~9 ms
        from evalpipe.tracking import mlflow_store
        from evalpipe.tracking.worker_errors import WorkerError, WorkerGone

        assert self.worker is not None and self.open_request is not None
        try:
            opened = self.worker.reply(self.open_request)
            self.experiment_id = rec.experiment_id = str(opened["experiment_id"])
            rec.uri = str(opened["uri"])
            rec.started()
        except WorkerError as exc:
            rec.store_error = str(exc)
            return
        except WorkerGone:
            self.fall_back(rec)
            self._start_here(rec, tags)
            return
        self.tracker = mlflow_store.Tracker(
            rec.uri, client=None
        )  # for the links; the worker holds the client

    # -- a parent run (the suite's) ---------------------------------------------------------------

    def create_parent(self, run_name: str, tags: Mapping[str, str]) -> str | None:
        """A parent run opened here (the suite's); None offline."""
        if self.tracker is None:
            return None
        return str(
            self.tracker.client.create_run(self.experiment_id, run_name=run_name, tags=dict(tags)).info.run_id
        )

    def end_parent(self, run_id: str | None, status: str) -> None:
        if self.tracker is not None and run_id is not None:
            self.tracker.client.set_terminated(run_id, status=status)


def _served_by_sweep(settings: StoreSettings) -> bool:
    # lazy: evalpipe.tracking.sweep_store, ~8 ms
    from evalpipe.tracking import sweep_store

    if settings.uri is None:  # no tracking.uri at all: not a point the sweep's worker serves
        return False
    return sweep_store.serves(settings.force, settings.offline, settings.uri)


def _worker_fits(settings: StoreSettings) -> bool:
    """A single run that needs no store lookup before its cases, with MLflow not yet imported."""
    # lazy: evalpipe.tracking.sweep_job, ~3 ms
    from evalpipe.tracking import sweep_job

    if "mlflow" in sys.modules or settings.traces:
        return False
    # resume looks a sweep's point up in the store before measuring it
    return not (sweep_job.job_context(None, None).sweep_id and not settings.force)
