"""`python -m evalpipe ARGS` run inside the test's own process: the same entry code, no new process.

A real `python -m evalpipe` costs 1.5-2.5 s before it reads its first argument (interpreter,
Hydra, MLflow, numpy imports); a test that checks what the pipeline does (which line a bad
fixture gets, what a gate decides, what a run logs) pays that on every call for nothing the
test looks at. `run_cli` calls the CLI's own `evalpipe.__main__._main()` (subcommand dispatch,
Hydra's one-line errors, the signal handlers, the Hydra task, the stages) with `sys.argv`, the
working directory and the environment a subprocess would get, and hands back what
`subprocess.run(..., capture_output=True, text=True)` would: the exit status (SystemExit's code,
or 1 with the traceback on stderr for an uncaught exception, as Python's own exit does),
stdout and stderr.

What it leaves to the real process (tests that check these keep `cli_helpers.cli`): the
interpreter's start-up and its exit (`evalpipe.__main__.exit_now`), signals sent from outside,
the warm upload worker (`EVALPIPE_UPLOAD_WORKER=0` unless the caller's env says otherwise: the
run then uploads in this process, as it does whenever the worker is not there), and stdout /
stderr written by C code or by loggers that captured the real streams when their library was
first imported (MLflow's INFO lines; tests drop those lines anyway).

Everything the run changes in this process is put back afterwards: environment, working
directory, `sys.argv`, signal handlers, `sys.unraisablehook`, the root logger's handlers and
level, Hydra's global state, the record of received signals and the upload worker's slots.

A SQLite store the run creates is a copy of a store MLflow's migrations built once
(tests/store_template.py, applied to every test by tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import gc
import io
import logging
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

from cli_helpers import cli_env
from evalpipe.core import progress_bars

_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
)
MAIN = str(Path(__file__).resolve().parents[1] / "src" / "evalpipe" / "__main__.py")


def _status(code: object, err: io.StringIO) -> int:
    """SystemExit's code as the process status (`evalpipe.__main__.exit_now`'s rule)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=err)
    return 1


def _clear_hydra() -> None:
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()


def _end_left_runs() -> None:
    """What MLflow's own exit hook does in a real process: end a fluent run left active."""
    fluent = sys.modules.get("mlflow.tracking.fluent")
    if fluent is not None:
        while fluent.active_run() is not None:
            fluent.end_run()


def _release_upload_worker() -> None:
    """What `upload_worker._at_exit` does at a real exit, then its slots emptied for the next run."""
    upload_worker = sys.modules.get("evalpipe.tracking.upload_worker")
    if upload_worker is None:
        return
    upload_worker._at_exit()
    upload_worker._early = None
    upload_worker._taken.clear()


def run_cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m evalpipe *args` in `cwd` with `env` (default `cli_helpers.cli_env()`), in this process."""
    from evalpipe import __main__ as entry
    from evalpipe.safety import signals

    environ = dict(env if env is not None else cli_env())
    environ.setdefault("EVALPIPE_UPLOAD_WORKER", "0")
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv = sys.argv[:]
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS}
    saved_hook = sys.unraisablehook
    saved_bars = progress_bars.allowed()  # a run with progress=false says so process-wide
    # the CLI freezes its heap and may leave the collector off before it exits (evalpipe.heap)
    saved_gc = (gc.isenabled(), gc.get_freeze_count())
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(environ)
    os.chdir(cwd)
    sys.argv = [MAIN, *args]
    _clear_hydra()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                entry._main()
                status = 0
            except SystemExit as exc:
                status = _status(exc.code, err)
            except BaseException:  # what the interpreter prints for an uncaught exception
                traceback.print_exc(file=err)
                status = 1
            finally:
                _end_left_runs()
                _release_upload_worker()
    finally:
        _clear_hydra()
        for handler in root.handlers:
            if handler not in saved_handlers:
                with contextlib.suppress(Exception):
                    handler.close()
        root.handlers[:] = saved_handlers
        root.setLevel(saved_level)
        for s, handler in saved_signals.items():
            if handler is not None:
                signal.signal(s, handler)
        sys.unraisablehook = saved_hook
        progress_bars.allow(saved_bars)
        if saved_gc[1] == 0:
            gc.unfreeze()
        if saved_gc[0]:
            gc.enable()
        signals._received.clear()
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(
        ["python", "-m", "evalpipe", *args], status, out.getvalue(), err.getvalue()
    )
