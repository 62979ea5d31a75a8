"""The upload side of a single run in a warm child process, working while the run measures.

A BM25 run over a few hundred queries searches for a fraction of a second, but importing
MLflow and opening its store costs about two seconds of CPU. `python -m evalpipe` therefore
starts this worker first thing (`spawn_early`): on the second core it imports MLflow and
prepares the SQLite store's mappings while the parent composes the config, loads the fixture,
builds the index and runs the cases. The parent then only sends requests over a pipe:

    open   -> the store and experiment (`tracking.open_experiment`, as in-process)
    start  -> the MLflow run (RUNNING from here)
    upload -> the saved run directory, with the same code `evalpipe sync` uses
    files  -> extra artifacts (the plots), from a directory the parent wrote
    finish -> the upload marker and the saved status and end time
    abandon-> end the run FAILED or KILLED
    sweep  -> a sweep's store operation (`tracking.sweep_store`: its parent run, reused points, summary)

A sweep (`-m`) starts the worker too (`wanted_sweep`): its parent process then asks the worker
for every store operation instead of importing MLflow itself (`tracking.sweep_store.WorkerStore`).

Replies come back in order, one JSON line each. What stays true with the worker:

* results are saved locally (by the parent) before the upload request is sent;
* the worker ignores the terminal's signals (its own session) and ends every run it opened:
  if the parent disappears (even SIGKILL: the pipe closes) with a run open, the run is ended
  KILLED; a parent that is interrupted saves the partial run and uploads it as before;
* a worker that dies or cannot start is replaced by the in-process path (`WorkerGone`);
* nothing the worker says is printed unmasked: the parent masks every message it prints.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalpipe.core.subcommands import SUBCOMMANDS  # `evalpipe <command>`s: not runs, nothing to upload
from evalpipe.safety import env_settings
from evalpipe.tracking.worker_errors import WorkerError, WorkerGone

#: EVALPIPE_UPLOAD_WORKER=0 runs the upload in the run's own process (as before the worker).
ENV = "EVALPIPE_UPLOAD_WORKER"
#: Command-line words after which no single run with a store follows (nothing to upload).
NO_RUN_FLAGS = frozenset(
    {"-m", "--multirun", "-h", "--help", "--hydra-help", "-c", "--cfg", "--info", "--shell-completion"}
)
MULTIRUN_FLAGS = frozenset({"-m", "--multirun"})
_OFFLINE = ("tracking.offline=true", "tracking.offline=True", "+tracking.offline=true")

_early: UploadWorker | None = None


def wanted(argv: Sequence[str]) -> bool:
    """Whether this command line is a single run that may upload (so a worker can help)."""
    if _disabled():
        return False
    if argv and argv[0] in SUBCOMMANDS:
        return False
    return not any(a in NO_RUN_FLAGS or a in _OFFLINE or a.startswith("--cfg") for a in argv)


def _disabled() -> bool:
    """EVALPIPE_UPLOAD_WORKER off. A value that is not a switch starts no worker either: the entry
    then refuses it in one line (`safety.env_settings.check_all`), before anything runs."""
    try:
        return not env_settings.switch(ENV)
    except env_settings.EnvSettingError:
        return True


def wanted_sweep(argv: Sequence[str]) -> bool:
    """Whether this command line is a sweep with a store (its parent's store work can go here)."""
    if _disabled() or (argv and argv[0] in SUBCOMMANDS) or not any(a in MULTIRUN_FLAGS for a in argv):
        return False
    return not any(
        (a in NO_RUN_FLAGS and a not in MULTIRUN_FLAGS) or a in _OFFLINE or a.startswith("--cfg")
        for a in argv
    )


class UploadWorker:
    """The parent's end of the pipe: requests out, replies back in order."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self._sent = 0
        self._read = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._buffer = b""
        self.gone = False
        #: a run was (or is being) opened through it: it must be let finish, not killed
        self.holds_run = False

    @classmethod
    def spawn(cls) -> UploadWorker:
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": os.environ.get("MLFLOW_DISABLE_TELEMETRY", "true")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "evalpipe.tracking.upload_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C or a group kill reaches the run, which tells the worker
            close_fds=True,
        )
        return cls(proc)

    def send(self, op: str, **fields: Any) -> int:
        """Queue a request; returns its number (for `reply`)."""
        if self.gone or self.proc.stdin is None:
            raise WorkerGone("the upload worker is not running")
        line = json.dumps({"op": op, **fields}, ensure_ascii=False) + "\n"
        try:
            self.proc.stdin.write(line.encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError) as exc:
            self.gone = True
            raise WorkerGone(f"the upload worker's pipe broke ({exc})") from None
        self._sent += 1
        return self._sent

    def _fill(self, chunk_wait: float | None) -> None:
        out = self.proc.stdout
        assert out is not None
        if chunk_wait is not None:
            ready, _, _ = select.select([out], [], [], chunk_wait)
            if not ready:
                return
        chunk = os.read(out.fileno(), 65536)
        if not chunk:
            self.gone = True
            raise WorkerGone("the upload worker ended")
        self._buffer += chunk

    def _drain(self, wait: float | None) -> None:
        """Move complete lines from the pipe into `_replies`; waits at most `wait` s for data."""
        self._fill(wait)
        while b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            self._read += 1
            self._replies[self._read] = json.loads(line)

    def answered(self, number: int) -> bool:
        """Whether the reply to request `number` has come (without waiting for it)."""
        if number not in self._replies and not self.gone:
            with contextlib.suppress(WorkerGone):
                self._drain(0.0)
        return number in self._replies

    def reply(self, number: int) -> dict[str, Any]:
        """The reply to request `number` (blocking); WorkerError if it failed."""
        while number not in self._replies:
            if self.gone:
                raise WorkerGone("the upload worker ended")
            self._drain(None)
        answer = self._replies[number]
        if not answer.get("ok"):
            raise WorkerError(str(answer.get("error") or "failed"), bool(answer.get("bad")))
        return answer

    def close(self, timeout: float = 60.0) -> None:
        """Let the worker finish what was sent, then end it (killed if it does not end in time)."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.gone = True

    def discard(self) -> None:
        """Not needed after all (offline, a sweep, traces): end it now, it holds nothing."""
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.close(timeout=5.0)


def spawn_early(argv: Sequence[str]) -> None:
    """Start the worker at the very start of `python -m evalpipe` when the command is a single run
    or a sweep."""
    global _early
    if _early is not None or not (wanted(argv) or wanted_sweep(argv)):
        return
    try:
        _early = UploadWorker.spawn()
    except OSError:
        _early = None
        return
    atexit.register(_at_exit)


def take() -> UploadWorker | None:
    """The early worker for the one run that uses it (None if there is none, or it is taken)."""
    global _early
    worker, _early = _early, None
    if worker is not None and worker.proc.poll() is not None:
        return None
    if worker is not None:
        _taken.append(worker)
    return worker


_taken: list[UploadWorker] = []


def _at_exit() -> None:
    if _early is not None:  # never used: it holds nothing
        _early.discard()
    for worker in _taken:  # used: let it end the runs it opened (it does on EOF), then reap it
        if worker.gone:
            continue
        if worker.holds_run:
            worker.close()
        else:
            worker.discard()


# --- the worker process ----------------------------------------------------------------------


def _warm() -> None:
    """Import what opening a store and uploading need, before the first request comes."""

    gc.disable()  # importing MLflow allocates ~340k objects: collections would walk them repeatedly
    # lazy: mlflow, pandas, scipy, ..., ~2628 ms
    import mlflow  # noqa: F401
    from mlflow.tracking import MlflowClient  # noqa: F401

    from evalpipe.tracking import datasets, links, mlflow_store, reuse, sweep_store, sweep_summary, sync  # noqa: F401  (a sweep's requests)  # noqa: F401

    with contextlib.suppress(Exception):  # the default store: SQLite through SQLAlchemy
        # lazy: sqlalchemy, mlflow, pandas, ..., ~2161 ms
        import sqlalchemy.orm
        from mlflow.store.tracking import sqlalchemy_store  # noqa: F401

        sqlalchemy.orm.configure_mappers()
    gc.freeze()
    gc.enable()


class _Serve:
    """The worker's state: one store, the runs it opened and has not ended."""

    def __init__(self) -> None:
        self.tracker: Any = None
        self.experiment_id: str | None = None
        self.open_runs: set[str] = set()
        #: runs one of whose upload steps failed: later steps must not mark them complete
        self.failed_runs: set[str] = set()
        self.sweep_store: Any = None  # tracking.sweep_store.LocalStore on `tracker`, for `sweep` requests

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._handle(req)
        except Exception:
            if req.get("op") in ("upload", "files", "finish"):
                self.failed_runs.add(str(req.get("run_id")))
            raise

    def _handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op == "open":
            # lazy: evalpipe.tracking, ~10 ms
            from evalpipe.tracking import links, mlflow_store

            self.tracker, self.experiment_id = mlflow_store.open_experiment(req["uri"], req["experiment"])
            links.prepare_experiment(
                self.tracker.client, self.experiment_id, req.get("ks") or (1, 5, 20), req.get("objective")
            )
            return {"uri": self.tracker.uri, "experiment_id": self.experiment_id}
        if self.tracker is None:
            raise RuntimeError("the store is not open")
        client = self.tracker.client
        if op in ("upload", "files", "finish") and req.get("run_id") in self.failed_runs:
            raise RuntimeError("an earlier upload step of this run failed")
        if op == "start":
            run = client.create_run(
                self.experiment_id, start_time=req["start_ms"], run_name=req["run_name"], tags=req["tags"]
            )
            self.open_runs.add(run.info.run_id)
            return {"run_id": run.info.run_id}
        if op == "upload":
            # lazy: evalpipe.reporting.local, evalpipe.tracking.sync, ~17 ms
            from evalpipe.reporting.local import load_run
            from evalpipe.tracking.sync import upload_saved

            upload_saved(self.tracker, req["run_id"], load_run(Path(req["dir"])))
            return {}
        if op == "files":
            client.log_artifacts(req["run_id"], req["dir"], artifact_path=req.get("subdir") or None)
            return {}
        if op == "finish":
            # lazy: evalpipe.reporting.local, evalpipe.tracking.sync, ~18 ms
            from evalpipe.reporting.local import load_run
            from evalpipe.tracking.sync import finish_upload

            finish_upload(self.tracker, req["run_id"], load_run(Path(req["dir"])))
            self.open_runs.discard(req["run_id"])
            return {}
        if op == "sweep":
            # lazy: evalpipe.tracking.sweep_store, ~9 ms
            from evalpipe.tracking.sweep_store import serve

            return serve(self, req)
        if op == "abandon":
            run_id = req["run_id"]
            client.set_terminated(run_id, status=req.get("status") or "FAILED")
            self.open_runs.discard(run_id)
            return {}
        raise ValueError(f"unknown request {op!r}")

    def end_open_runs(self) -> None:
        """The parent went away without ending its run: KILLED, never left RUNNING."""
        for run_id in list(self.open_runs):
            with contextlib.suppress(Exception):
                self.tracker.client.set_terminated(run_id, status="KILLED")


def serve() -> None:

    for name in ("SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE"):
        if hasattr(signal, name):  # only the parent tells this process what to do (or kill/EOF)
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    _warm()
    # lazy: evalpipe.safety.errors, ~3 ms
    from evalpipe.safety.errors import EvalpipeError

    server = _Serve()
    out = sys.stdout.buffer
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        try:
            reply = {"ok": True, **server.handle(json.loads(raw))}
        except EvalpipeError as exc:
            reply = {"ok": False, "bad": True, "error": str(exc)}
        except Exception as exc:
            text = str(exc).strip()
            first = text.splitlines()[0] if text else ""
            reply = {"ok": False, "error": f"{type(exc).__name__}: {first}"}  # cut by the parent
        try:
            out.write((json.dumps(reply) + "\n").encode("utf-8"))
            out.flush()
        except OSError:  # the parent is gone
            break
    server.end_open_runs()
    out.close()
    os._exit(0)  # nothing left to do: skip walking MLflow's heap at interpreter exit


if __name__ == "__main__":
    serve()
