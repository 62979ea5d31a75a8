"""The progress line over cases, which says which case is slow when one is.

A frozen bar gives no clue whether the ranker is working or hung; once a case has
taken more than `slow_after` seconds the description names it and counts the
seconds (from a watchdog thread, so it updates while the search blocks).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from evalpipe.inputs.fixture import Case

SLOW_AFTER_S = 3.0


def slow_description(description: str, case_id: str, seconds: float, timeout_s: float | None) -> str:
    # lazy: rich, ~18 ms
    from rich.markup import escape

    limit = f" of {timeout_s:g}s" if timeout_s else ""
    return f"{description} · case {escape(case_id)} running {seconds:.0f}s{limit}"


def case_progress(
    cases: Sequence[Case],
    description: str,
    console: Any,
    timeout_s: float | None = None,
    slow_after: float = SLOW_AFTER_S,
) -> Iterator[Case]:
    """Yield `cases` under a transient rich progress bar; the case in hand is named once it is slow."""
    # lazy: rich, ~33 ms
    from rich.progress import Progress

    current: list[Any] = [None, 0.0]  # case id, start time (monotonic)
    stop = threading.Event()
    with Progress(*Progress.get_default_columns(), console=console, transient=True) as bar:
        task = bar.add_task(description, total=len(cases))

        def watch() -> None:
            shown = False
            while not stop.wait(1.0):
                case_id, started = current
                elapsed = time.monotonic() - started
                if case_id is not None and elapsed >= slow_after:
                    bar.update(task, description=slow_description(description, case_id, elapsed, timeout_s))
                    shown = True
                elif shown:
                    bar.update(task, description=description)
                    shown = False

        watcher = threading.Thread(target=watch, name="evalpipe-progress", daemon=True)
        watcher.start()
        try:
            for case in cases:
                current[:] = [case.id, time.monotonic()]
                yield case
                current[0] = None
                bar.advance(task)
        finally:
            stop.set()
            watcher.join(timeout=2.0)
