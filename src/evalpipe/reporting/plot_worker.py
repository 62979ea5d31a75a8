"""A sweep's plots drawn by a warm child process, off the sweep's critical path.

A sweep's summary plots need matplotlib, whose import costs about as much as a dozen
reused sweep points. The sweep's parent starts this worker when the sweep starts: it imports
matplotlib on the other core while the points run, then waits. At the end the parent sends
the summary rows (pickled) and logs the PNGs it gets back; the worker then exits. A worker
that fails or cannot start costs nothing but time: the parent draws the plots itself.
It exits on end of input (the parent gone) and holds nothing worth a signal handler.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from collections.abc import Sequence
from typing import Any


class PlotWorker:
    """The parent's handle: `render` once, or `discard`."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc

    @classmethod
    def start(cls) -> PlotWorker | None:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "evalpipe.reporting.plot_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            return None
        return cls(proc)

    def render(self, rows: Sequence[Any], metrics: Sequence[str], timeout: float = 120.0) -> dict[str, bytes]:
        """The plots of `plots.sweep_plots(rows, metrics)`; raises if the worker fails."""
        try:
            out, _ = self.proc.communicate(pickle.dumps((list(rows), list(metrics))), timeout=timeout)
        except subprocess.TimeoutExpired:
            self.discard()
            raise
        if self.proc.returncode != 0 or not out:
            raise RuntimeError(f"the plot worker ended with code {self.proc.returncode}")
        result = pickle.loads(out)
        if isinstance(result, BaseException):
            raise result
        return dict(result)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.communicate(timeout=5)


def serve() -> None:
    # lazy: evalpipe.reporting, numpy, ~83 ms
    from evalpipe.reporting import plots

    with contextlib.suppress(Exception):  # warm: what `plots._figure` and `plots._png` import
        # lazy: matplotlib, numpy, ~731 ms
        import matplotlib.backends.backend_agg  # noqa: F401
        import matplotlib.figure  # noqa: F401
    data = sys.stdin.buffer.read()
    if not data:
        os._exit(0)  # the sweep ended without asking (aborted, or nothing to plot)
    rows, metrics = pickle.loads(data)
    try:
        result: Any = plots.sweep_plots(rows, metrics)
    except Exception as exc:
        result = RuntimeError(f"{type(exc).__name__}: {exc}")
    sys.stdout.buffer.write(pickle.dumps(result))
    sys.stdout.buffer.flush()
    os._exit(0)


if __name__ == "__main__":
    serve()
