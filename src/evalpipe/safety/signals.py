"""Signals that end a process as exceptions in the main thread, so a run can end KILLED with what
it measured.

`kill`, `timeout`, `docker stop` and a cancelled CI job send SIGTERM, whose default
action ends Python without running any cleanup: the MLflow run stayed RUNNING and
the cases already run were lost. `install()` makes SIGTERM raise `Interrupted` (a
BaseException, like KeyboardInterrupt, so the per-query `except Exception` of the
runner cannot swallow it) and records SIGINT before raising KeyboardInterrupt as
usual. The other signals whose default action ends the process (SIGHUP from a
closed terminal or a dropped ssh session, SIGQUIT, SIGUSR1/2, SIGALRM, SIGXCPU,
SIGXFSZ, SIGVTALRM, SIGPROF, SIGPWR) are handled as SIGTERM is, unless they are
ignored when the process starts (`nohup` ignores SIGHUP: that stays so).
Whoever catches one saves what it has, marks the run KILLED and exits with
`exit_code` (128 + the signal number: 130 for SIGINT, 143 for SIGTERM, 129 for
SIGHUP), printing one line.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any

_received: list[int] = []
_hooks: list[Callable[[int], None]] = []

#: Besides SIGINT: every signal whose default action terminates the process and that Python
#: can catch (SIGKILL and SIGSTOP cannot be; SIGPIPE is ignored by Python itself).
TERMINATING: tuple[int, ...] = tuple(
    getattr(signal, name)
    for name in (
        "SIGTERM",
        "SIGHUP",
        "SIGQUIT",
        "SIGUSR1",
        "SIGUSR2",
        "SIGALRM",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGPWR",
    )
    if hasattr(signal, name)
)


class Interrupted(BaseException):
    """Raised in the main thread by the handler of SIGTERM and the other TERMINATING signals."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    def __reduce__(self) -> tuple[type, tuple[int]]:
        # A sweep worker hands its exception back to the parent by pickling it; rebuild from the
        # signal number (the default would call Interrupted("SIGTERM") and fail to unpickle).
        return (Interrupted, (self.signum,))


def _run_hooks(signum: int) -> None:
    hooks, _hooks[:] = list(_hooks), []
    for hook in hooks:
        with suppress(Exception):
            hook(signum)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    _run_hooks(signum)
    raise Interrupted(signum)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    _run_hooks(signum)
    raise KeyboardInterrupt


def on_interrupt(hook: Callable[[int], None]) -> None:
    """Run `hook(signum)` once, in the handler, before the exception is raised (a sweep's parent
    uses it to let its workers save before they are torn down)."""
    _hooks.append(hook)


def remove_hook(hook: Callable[[int], None]) -> None:
    if hook in _hooks:
        _hooks.remove(hook)


def child_pids(pid: int | None = None) -> list[int]:
    """Direct child processes of `pid` (this process by default), from /proc (Linux)."""
    pid = os.getpid() if pid is None else pid
    out = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            stat = entry.read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry.parent.name))
    return out


def forward(signum: int, pids: list[int]) -> None:
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signum)


def wait_until(done: Callable[[], bool], timeout: float, step: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(step)
    return done()


def _unraisable(info: Any) -> None:
    """A signal that lands while Python runs a finalizer or weakref callback (e.g. SQLAlchemy's,
    during garbage collection) raises there, where the exception is printed as "Exception ignored"
    and dropped. Deliver it again instead: the handler then raises at the next safe point."""
    exc = info.exc_value
    if isinstance(exc, Interrupted | KeyboardInterrupt):
        signal.raise_signal(signum_of(exc))
        return
    _previous_unraisable(info)


_previous_unraisable = sys.unraisablehook


def install() -> None:
    """Install the handlers (main thread only; a no-op elsewhere). Safe to call more than once."""
    if threading.current_thread() is not threading.main_thread():
        return
    sys.unraisablehook = _unraisable
    for signum in TERMINATING:
        # keep what was ignored when the process started (`nohup`: SIGHUP); ours is reinstalled
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _on_sigterm)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # keep "ignore" of a background job
        signal.signal(signal.SIGINT, _on_sigint)


@contextmanager
def handled() -> Iterator[None]:
    """Our handlers for the length of one run, then whatever was there before: a sweep worker
    (joblib/loky) that receives SIGTERM while idle between jobs then ends as it would have
    without evalpipe, instead of raising Interrupted inside the pool's own loop (a traceback)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    watched = (signal.SIGINT, *TERMINATING)
    previous = {s: signal.getsignal(s) for s in watched}
    hook = sys.unraisablehook
    install()
    try:
        yield
    finally:
        for s, handler in previous.items():
            if handler is not None:
                signal.signal(s, handler)
        sys.unraisablehook = hook


def received() -> int | None:
    """The first signal this process received since start (or None)."""
    return _received[0] if _received else None


def is_interrupt(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt | Interrupted)


def signum_of(exc: BaseException) -> int:
    return exc.signum if isinstance(exc, Interrupted) else signal.SIGINT


def exit_code(exc: BaseException) -> int:
    """128 + signal number: 130 for SIGINT (Ctrl-C), 143 for SIGTERM, 129 for SIGHUP, as shells
    report them."""
    return 128 + int(signum_of(exc))


def name_of(exc: BaseException) -> str:
    return signal.Signals(signum_of(exc)).name


@contextmanager
def deferred() -> Iterator[None]:
    """While saving what was measured, a second Ctrl-C or SIGTERM is recorded but does not interrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, *TERMINATING)}
    for s, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(s, lambda signum, frame: _received.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
