"""What a sweep's parent process asks of the store, done here or by the warm upload worker.

Importing MLflow and opening its SQLite store cost a sweep's parent about 1.5 s of CPU
before its first point, as much as a dozen reused points. `python -m evalpipe -m ...` therefore
starts the upload worker (`tracking.upload_worker`) first thing, as a single run does: it
imports MLflow on the other core while Hydra composes the sweep. The sweep then asks the worker
for every store operation it makes (`WorkerStore`), and never imports MLflow itself unless a
point has to be measured (the measured point opens the store in its own process, as before):

    open, create_parent   the experiment and the parent run (sent at the start, answered
                          while Hydra composes the jobs; `Pending.wait` before the first job)
    find                  a point's reusable run, from one query for the whole sweep
                          (`tracking.reuse.finished_by_hash`)
    record                the reuse child of that point (not waited for: its reply, the child's
                          ID, comes back while the next point composes; `flush` writes it into
                          the point's `reused_run.json`)
    end_orphans, upload_saved_points, collect_rows, log, end_run   the sweep's end

The worker runs these with `LocalStore`, the same code the parent runs when there is no
worker (`EVALPIPE_UPLOAD_WORKER=0`, MLflow already imported, a worker that died: every call
then falls back to a `LocalStore` opened here). Replies come back in request order, so a
later reply never overtakes an earlier one.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from evalpipe.core.fingerprint import code_fingerprint

#: The parent's store, while an in-process sweep's jobs run (set by the sweep callback).
_point_store: WorkerStore | None = None
MARKER = "reused_run.json"
#: Why a child still RUNNING when its sweep ends was ended FAILED (tag on that run).
ORPHAN_TAG = "evalpipe.failure"
ORPHAN_REASON = (
    "its worker process ended before the run did (killed or crashed); run the sweep again to measure it"
)


def set_point_store(store: WorkerStore | None) -> None:
    global _point_store
    _point_store = store


# --- the operations, run with an open tracker (in the parent, or in the worker) -------------------


class SweepStore(Protocol):
    """What a sweep asks of its store, whichever process talks to MLflow: `LocalStore` (this
    process) and `WorkerStore` (the upload worker, with a `LocalStore` fallback) both implement
    it, so the sweep callback never needs to know which one it holds."""

    @property
    def uri(self) -> str: ...

    @property
    def ui_command(self) -> str: ...

    def find(self, **args: Any) -> dict[str, Any] | None: ...

    def end_orphans(self, parent: str, status: str) -> None: ...

    def upload_saved_points(self, sweep_dir: str) -> int: ...

    def collect_rows(self, parent: str, sweep_dir: str, keys: Sequence[str], since: float) -> list[Any]: ...

    def log(
        self,
        run_id: str,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
        subdir: str = "",
    ) -> None: ...

    def end_run(self, run_id: str, status: str) -> None: ...

    def per_case(self, run_ids: Sequence[str], objective: str) -> list[dict[str, float] | None]:
        """Each run's {case ID: objective value} (`tracking.cases.per_case`), read where the
        store is open, so the tie step does not import MLflow in the sweep's process."""
        ...

    def read_client(self) -> Any:
        """An MLflow client for reads (the hold-out check) that leaves the store's own route for
        writes as it is."""
        ...


class LocalStore:
    """Store operations of a sweep through an MLflow client in this process."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self._experiments: dict[str, str] = {}
        self._found: dict[str, Any] = {}

    @classmethod
    def open(cls, uri: str | None) -> LocalStore:
        # lazy: evalpipe.tracking, ~15 ms
        from evalpipe.tracking import mlflow_store

        return cls(mlflow_store.ensure_store(uri))

    @property
    def uri(self) -> str:
        return str(self.tracker.uri)

    @property
    def ui_command(self) -> str:
        return str(self.tracker.ui_command)

    def read_client(self) -> Any:
        return self.tracker.client

    def per_case(self, run_ids: Sequence[str], objective: str) -> list[dict[str, float] | None]:
        # lazy: evalpipe.tracking.cases, ~5 ms
        from evalpipe.tracking.cases import per_case

        return [per_case(self.tracker.client, run_id, objective) for run_id in run_ids]

    def adopt_experiment(self, name: str, experiment_id: str) -> None:
        """An experiment the caller opened and prepared already (so `experiment` does not again)."""
        self._experiments[name] = experiment_id

    def experiment(self, name: str, ks: Sequence[int], objective: str) -> str:
        """The experiment's ID (created and prepared once per process, as a run's `open_store`)."""
        if name not in self._experiments:
            # lazy: evalpipe.tracking, ~14 ms
            from evalpipe.tracking import links, mlflow_store

            experiment_id = mlflow_store.ensure_experiment(self.tracker, name)
            links.prepare_experiment(self.tracker.client, experiment_id, list(ks), objective)
            self._experiments[name] = experiment_id
        return self._experiments[name]

    def create_parent(
        self, experiment_id: str, run_name: str, tags: Mapping[str, str], params: Mapping[str, str]
    ) -> str:
        # lazy: evalpipe.tracking, ~15 ms
        from evalpipe.tracking import mlflow_store

        run = self.tracker.client.create_run(experiment_id, run_name=run_name, tags=dict(tags))
        mlflow_store.log_batch(self.tracker, run.info.run_id, params=params)
        return run.info.run_id

    def find(
        self,
        experiment: str,
        ks: Sequence[int],
        objective: str,
        config_hash: str,
        fingerprint: str,
        fixture_sha: str,
    ) -> dict[str, Any] | None:
        """The FINISHED run a point with this config hash can reuse, as plain data (or None)."""
        # lazy: evalpipe.tracking.reuse, ~1 ms
        from evalpipe.tracking.reuse import find_reusable

        experiment_id = self.experiment(experiment, ks, objective)
        done = find_reusable(self.tracker, experiment_id, config_hash, fingerprint, fixture_sha)
        if done is None:
            return None
        self._found[done.info.run_id] = done
        return {
            "run_id": done.info.run_id,
            "experiment_id": experiment_id,
            "metrics": {k: float(v) for k, v in done.data.metrics.items()},
        }

    def record(self, run_id: str, experiment_id: str, job_tags: Mapping[str, str], run_name: str) -> str:
        """The reuse child of a point `find` answered (`tracking.reuse.record_reuse`); its run ID."""
        # lazy: evalpipe.tracking.reuse, ~1 ms
        from evalpipe.tracking.reuse import record_reuse

        done = self._found.get(run_id) or self.tracker.client.get_run(run_id)
        return record_reuse(self.tracker, experiment_id, done, dict(job_tags), run_name)

    def end_orphans(self, parent: str, status: str) -> None:
        """Children still RUNNING when the sweep ends (their worker was killed before it could
        save) end with the sweep's status (FAILED when the sweep itself finished), tagged why."""
        client = self.tracker.client
        experiment_id = client.get_run(parent).info.experiment_id
        runs = client.search_runs(
            [experiment_id],
            filter_string=f"tags.`mlflow.parentRunId` = '{parent}' and attributes.status = 'RUNNING'",
        )
        for run in runs:
            client.set_tag(run.info.run_id, ORPHAN_TAG, ORPHAN_REASON)
            client.set_terminated(run.info.run_id, status=status)

    def upload_saved_points(self, sweep_dir: str) -> int:
        """After an aborted sweep: points their workers saved but could not upload go up now,
        into their own runs, as `evalpipe sync` would; returns how many could not."""
        # lazy: evalpipe.reporting.local, evalpipe.safety.secrets, evalpipe.tracking.sync, ~23 ms
        from evalpipe.reporting.local import find_saved_runs, load_run, update_info
        from evalpipe.safety.secrets import mask_text
        from evalpipe.tracking.sync import finish_upload, upload_saved

        left = 0
        for directory in find_saved_runs([Path(sweep_dir)]):
            try:
                saved = load_run(directory)
            except Exception:
                left += 1
                continue
            run_id = saved.info.get("run_id")
            if saved.info.get("upload") == "complete" or not run_id:
                continue
            try:
                upload_saved(self.tracker, run_id, saved)
                finish_upload(self.tracker, run_id, saved)
                update_info(directory, upload="complete", uploads={mask_text(self.tracker.uri): run_id})
            except Exception:
                left += 1
        return left

    def collect_rows(self, parent: str, sweep_dir: str, keys: Sequence[str], since: float) -> list[Any]:
        # lazy: evalpipe.tracking.sweep_summary, numpy, yaml, ~110 ms
        from evalpipe.tracking.sweep_summary import collect_rows

        return collect_rows(self.tracker.client, parent, sweep_dir, list(keys), since=since)

    def log(
        self,
        run_id: str,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
        subdir: str = "",
    ) -> None:
        # lazy: evalpipe.tracking, ~14 ms
        from evalpipe.tracking import mlflow_store

        if metrics or tags:
            mlflow_store.log_batch(self.tracker, run_id, metrics=metrics, tags=tags)
        if files:
            mlflow_store.log_artifact_files(self.tracker, run_id, files, subdir=subdir)

    def end_run(self, run_id: str, status: str) -> None:
        self.tracker.client.set_terminated(run_id, status=status)


def _pack_files(files: Mapping[str, str | bytes] | None) -> dict[str, dict[str, str]]:
    return {
        name: {"b64": base64.b64encode(v).decode("ascii")} if isinstance(v, bytes) else {"text": v}
        for name, v in (files or {}).items()
    }


def _unpack_files(packed: Mapping[str, Mapping[str, str]] | None) -> dict[str, str | bytes]:
    return {
        name: base64.b64decode(v["b64"]) if "b64" in v else str(v["text"])
        for name, v in (packed or {}).items()
    }


def serve(server: Any, req: Mapping[str, Any]) -> dict[str, Any]:
    """The worker's side of a `sweep` request (`tracking.upload_worker`), on its open store."""
    store = getattr(server, "sweep_store", None)
    if store is None or store.tracker is not server.tracker:
        store = server.sweep_store = LocalStore(server.tracker)
    method, kw = str(req.get("method")), dict(req.get("args") or {})
    if method == "create_parent":
        run_id = store.create_parent(kw["experiment_id"], kw["run_name"], kw["tags"], kw["params"])
        server.open_runs.add(run_id)  # ended KILLED if the sweep's process disappears
        return {"run_id": run_id}
    if method == "find":
        return {"run": store.find(**kw)}
    if method == "record":
        return {"child_run_id": store.record(**kw)}
    if method == "end_orphans":
        store.end_orphans(**kw)
        return {}
    if method == "upload_saved_points":
        return {"left": store.upload_saved_points(**kw)}
    if method == "collect_rows":
        return {"rows": [asdict(row) for row in store.collect_rows(**kw)]}
    if method == "log":
        kw["files"] = _unpack_files(kw.get("files"))
        store.log(**kw)
        return {}
    if method == "end_run":
        store.end_run(**kw)
        server.open_runs.discard(kw["run_id"])
        return {}
    if method == "per_case":
        return {"cases": store.per_case(**kw)}
    raise ValueError(f"unknown sweep request {method!r}")


# --- the parent's end: the same operations through the worker ---------------------------------------


@dataclass(frozen=True)
class Opened:
    """The sweep's experiment and parent run, once the store has them."""

    experiment_id: str
    parent_run_id: str


@dataclass
class _Record:
    """A reuse child asked for and not yet confirmed: its request and the marker to complete."""

    request: int
    marker: Path | None
    args: dict[str, Any]


class WorkerStore:
    """`LocalStore`'s operations, sent to the upload worker; a worker that is gone is replaced by a
    `LocalStore` opened here (the same calls, MLflow imported in this process)."""

    def __init__(self, worker: Any, uri: str) -> None:
        self.worker = worker
        self._uri = uri
        self._local: LocalStore | None = None
        self._records: list[_Record] = []
        self._console: Any = None

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def ui_command(self) -> str:
        # lazy: evalpipe.tracking.mlflow_store, ~14 ms
        from evalpipe.tracking.mlflow_store import Tracker

        return Tracker(self._uri, None).ui_command

    def read_client(self) -> Any:
        """A client of this process's own: `local()` would turn this store's later calls (the
        parent's end) away from the worker, which then ends the parent KILLED as a run it still
        holds open."""
        # lazy: evalpipe.tracking (MLflow), ~700 ms, only for a summary's reads
        from evalpipe.tracking import mlflow_store

        return mlflow_store.ensure_store(self._uri).client

    def local(self) -> LocalStore:
        """The store opened in this process (MLflow imported here): for a hold-out check, and
        for every call once the worker is gone."""
        if self._local is None:
            self._local = LocalStore.open(self._uri)
        return self._local

    def _ask(self, method: str, **args: Any) -> int:
        return self.worker.send("sweep", method=method, args=args)

    def _reply(self, number: int) -> dict[str, Any]:
        # lazy: evalpipe.safety.errors, evalpipe.tracking.worker_errors, ~4 ms
        from evalpipe.safety.errors import EvalpipeError
        from evalpipe.tracking.worker_errors import WorkerError

        try:
            return self.worker.reply(number)
        except WorkerError as exc:
            if exc.bad:
                raise EvalpipeError(str(exc)) from None
            raise RuntimeError(str(exc)) from None

    def _call(self, method: str, **args: Any) -> dict[str, Any] | None:
        """The worker's reply, or None when the worker is gone (the caller then calls `local()`)."""
        # lazy: evalpipe.tracking.worker_errors, ~1 ms
        from evalpipe.tracking.worker_errors import WorkerGone

        if self._local is not None:
            return None
        try:
            return self._reply(self._ask(method, **args))
        except WorkerGone:
            self.flush()
            return None

    # the start: sent at once, waited for before the first job
    def begin(
        self,
        experiment: str,
        ks: Sequence[int],
        objective: str,
        run_name: str,
        tags: Mapping[str, str],
        params: Mapping[str, str],
    ) -> Pending:
        """Ask the worker to open the store and create the parent run; `Pending.wait` for them."""
        self.worker.holds_run = True  # let it finish what it was sent before it is reaped
        opened = self.worker.send(
            "open", uri=self._uri, experiment=experiment, ks=list(ks), objective=objective
        )
        return Pending(self, opened, experiment, run_name, dict(tags), dict(params), list(ks), objective)

    # a point
    def find(self, **args: Any) -> dict[str, Any] | None:
        reply = self._call("find", **args)
        if reply is None:
            return self.local().find(**args)
        self.flush(wait=False)  # replies come in order: earlier points' records are here by now
        return reply.get("run")

    def record(
        self, run_id: str, experiment_id: str, job_tags: Mapping[str, str], run_name: str, marker: Path | None
    ) -> None:
        """Ask for the point's reuse child; its ID goes into `marker` when the reply comes."""
        # lazy: evalpipe.tracking.worker_errors, ~1 ms
        from evalpipe.tracking.worker_errors import WorkerGone

        args = {
            "run_id": run_id,
            "experiment_id": experiment_id,
            "job_tags": dict(job_tags),
            "run_name": run_name,
        }
        if self._local is None:
            try:
                self._records.append(_Record(self._ask("record", **args), marker, args))
                return
            except WorkerGone:
                pass
        self._complete(marker, run_id, self._record_here(args))

    def _record_here(self, args: dict[str, Any]) -> str:
        try:
            return self.local().record(**args)
        except Exception as exc:
            _warn_unrecorded(self._console, exc)
            return ""

    @staticmethod
    def _complete(marker: Path | None, run_id: str, child: str) -> None:
        if marker is not None and child:
            marker.write_text(json.dumps({"run_id": run_id, "child_run_id": child}), encoding="utf-8")

    def flush(self, wait: bool = True) -> None:
        """Write the child IDs of the reuse records answered so far (all of them with `wait`)."""
        # lazy: evalpipe.tracking.worker_errors, ~1 ms
        from evalpipe.tracking.worker_errors import WorkerGone

        while self._records:
            record = self._records[0]
            if not wait and not self.worker.answered(record.request):
                return
            self._records.pop(0)
            try:
                child = str(self._reply(record.request).get("child_run_id") or "")
            except WorkerGone:  # not known whether it was recorded: record it here
                child = self._record_here(record.args)
            except Exception as exc:
                _warn_unrecorded(self._console, exc)
                child = ""
            self._complete(record.marker, record.args["run_id"], child)

    # the end
    def end_orphans(self, parent: str, status: str) -> None:
        if self._call("end_orphans", parent=parent, status=status) is None:
            self.local().end_orphans(parent, status)

    def upload_saved_points(self, sweep_dir: str) -> int:
        reply = self._call("upload_saved_points", sweep_dir=sweep_dir)
        return self.local().upload_saved_points(sweep_dir) if reply is None else int(reply["left"])

    def collect_rows(self, parent: str, sweep_dir: str, keys: Sequence[str], since: float) -> list[Any]:
        # lazy: evalpipe.tracking.sweep_summary, numpy, yaml, ~107 ms
        from evalpipe.tracking.sweep_summary import SweepRow

        self.flush()
        reply = self._call("collect_rows", parent=parent, sweep_dir=sweep_dir, keys=list(keys), since=since)
        if reply is None:
            return self.local().collect_rows(parent, sweep_dir, keys, since)
        return [SweepRow(**row) for row in reply["rows"]]

    def log(
        self,
        run_id: str,
        metrics: Mapping[str, float] | None = None,
        tags: Mapping[str, str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
        subdir: str = "",
    ) -> None:
        args = {"run_id": run_id, "metrics": dict(metrics or {}), "tags": dict(tags or {}), "subdir": subdir}
        if self._call("log", files=_pack_files(files), **args) is None:
            self.local().log(files=files, **args)

    def end_run(self, run_id: str, status: str) -> None:
        if self._call("end_run", run_id=run_id, status=status) is None:
            self.local().end_run(run_id, status)

    def per_case(self, run_ids: Sequence[str], objective: str) -> list[dict[str, float] | None]:
        self.flush()  # the points' records are in the store before their tables are read
        reply = self._call("per_case", run_ids=list(run_ids), objective=objective)
        if reply is None:
            return self.local().per_case(run_ids, objective)
        return list(reply["cases"])


def _warn_unrecorded(console: Any, exc: BaseException) -> None:
    # lazy: rich, ~17 ms
    from rich.markup import escape

    text = f"[yellow]warning:[/] could not record the reused point as a child run: {escape(str(exc))}"
    if console is not None:
        console.print(text)
    else:
        print(f"warning: could not record the reused point as a child run: {exc}", file=sys.stderr)


class Pending:
    """The parent run being created by the worker while the parent composes the jobs."""

    def __init__(
        self,
        store: WorkerStore,
        opened: int,
        experiment: str,
        run_name: str,
        tags: dict[str, str],
        params: dict[str, str],
        ks: list[int],
        objective: str,
    ) -> None:
        self.store = store
        self._opened = opened
        self._created: int | None = None
        self._args = (experiment, run_name, tags, params, ks, objective)

    def wait(self) -> Opened:
        """The experiment and parent run; EvalpipeError if the store could not be opened (a bad
        store: exit 2 as before), and opened here if the worker is gone."""
        # lazy: evalpipe.tracking.worker_errors, ~2 ms
        from evalpipe.tracking.worker_errors import WorkerGone

        experiment, run_name, tags, params, ks, objective = self._args
        store = self.store
        try:
            experiment_id = str(store._reply(self._opened)["experiment_id"])
            self._created = store._ask(
                "create_parent", experiment_id=experiment_id, run_name=run_name, tags=tags, params=params
            )
            return Opened(experiment_id, str(store._reply(self._created)["run_id"]))
        except WorkerGone:
            pass
        # lazy: evalpipe.tracking, ~14 ms
        from evalpipe.tracking import mlflow_store

        tracker, experiment_id = mlflow_store.open_experiment(store.uri, experiment)
        store._local = local = LocalStore(tracker)
        local._experiments[experiment] = experiment_id
        # lazy: evalpipe.tracking.links, ~2 ms
        from evalpipe.tracking.links import prepare_experiment

        prepare_experiment(tracker.client, experiment_id, ks, objective)
        return Opened(experiment_id, local.create_parent(experiment_id, run_name, tags, params))


# --- a point of an in-process sweep -----------------------------------------------------------------


def serves(force: bool, offline: bool, uri: str | None) -> bool:
    """Whether this job is a point of an in-process sweep whose store is the warm worker (and the
    point may be reused: `force=true` measures it, with the store opened in the job's process);
    `uri` is the job's `tracking.uri`."""
    store = _point_store
    if store is None or force or offline:
        return False
    # lazy: evalpipe.tracking.mlflow_store, ~14 ms
    from evalpipe.tracking.mlflow_store import normalise_uri

    try:
        return normalise_uri(uri) == store.uri
    except Exception:
        return False


def reuse_point(state: Any) -> float | None:
    """A point the sweep already measured: its objective, with the reuse child asked for and the
    marker left for the summary (as `tracking.reuse.reuse_point`); None: it must be measured."""
    # lazy: evalpipe.reporting.run_end, rich, evalpipe.scoring.names, ~19 ms
    from evalpipe.reporting.run_end import point_line
    from evalpipe.scoring.names import lookup

    store = _point_store
    assert store is not None
    store._console = state.console
    done = store.find(
        experiment=state.experiment,
        ks=list(state.ks),
        objective=state.objective,
        config_hash=state.chash,
        fingerprint=code_fingerprint(),
        fixture_sha=state.fixture.sha256,
    )
    if done is None:
        return None
    marker = None
    if state.out_dir is not None:
        state.out_dir.mkdir(parents=True, exist_ok=True)
        marker = state.out_dir / MARKER
        marker.write_text(json.dumps({"run_id": done["run_id"], "child_run_id": ""}), encoding="utf-8")
    store.record(done["run_id"], done["experiment_id"], state.job.tags, state.run_name, marker)
    line = point_line(state.job.job_num, state.run_name, done["metrics"], done["run_id"])
    state.console.print(f"{line} [green]reused[/] (force=true re-runs)", highlight=False)
    return float(lookup(done["metrics"], state.objective) or 0.0)
