"""Waiting for a process to be ready (or to be gone) without betting on how fast the machine is.

A fixed wait ("the server answers /health within 60 s") fails on a machine at load 10-17 while
the process it waits for is alive and about to answer: the wait was a clock, not a check. Here a
wait ends when the thing waited for is true, or fails at once when the process it depends on has
ended (naming the exit status and its output), and has only a safety limit, `HUNG_S`, far beyond
any run of the suite on a loaded machine, which fires only when the process hung. Every failure
names what was waited for.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

#: Safety limit for one wait: reached only by a process that hung (a whole loaded suite run
#: takes less). Never a measure of speed.
HUNG_S = 1800.0


def _ended(
    proc: subprocess.Popen | None, alive: Callable[[], bool] | None, output: Callable[[], str] | None
) -> str | None:
    if alive is not None and not alive():
        return f"the process ended first{': ' + output()[-3000:] if output is not None else ''}"
    if proc is None or proc.poll() is None:
        return None
    tail = ""
    if output is not None:
        tail = output()
    elif proc.stderr is not None and not proc.stderr.closed:
        tail = proc.stderr.read()
    return f"the process ended first (exit {proc.returncode}): {str(tail)[-3000:]}"


def wait_until(
    what: str,
    ready: Callable[[], bool],
    proc: subprocess.Popen | None = None,
    *,
    alive: Callable[[], bool] | None = None,
    output: Callable[[], str] | None = None,
    poll_s: float = 0.1,
    safety_s: float = HUNG_S,
) -> None:
    """Return once `ready()` is true. Fail (AssertionError naming `what`) as soon as `proc` has
    ended without it (or `alive()` says the process it depends on is gone; with `output()`, or
    `proc`'s stderr pipe, in the message), or after `safety_s`
    (the process hung). `ready` is asked once more after the process ends: what it waited for
    may be the last thing the process did."""
    start = time.monotonic()
    while True:
        if ready():
            return
        ended = _ended(proc, alive, output)
        if ended is not None:
            if ready():
                return
            raise AssertionError(f"waiting for {what}: {ended}")
        if time.monotonic() - start > safety_s:
            raise AssertionError(f"waiting for {what}: not after {safety_s:.0f} s, the process alive (hung)")
        time.sleep(poll_s)


def wait_gone(what: str, alive: Callable[[], bool], *, poll_s: float = 0.1, safety_s: float = HUNG_S) -> None:
    """Return once `alive()` is false (a process ended, a run left RUNNING); fail naming `what`
    after `safety_s` (it never will)."""
    wait_until(f"{what} to end", lambda: not alive(), poll_s=poll_s, safety_s=safety_s)
