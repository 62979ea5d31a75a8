"""Keeping Python's cyclic garbage collector out of what is measured and off the startup heap.

A full collection is a process-wide pause proportional to the number of live
container objects, and importing MLflow leaves ~340k of them: a collection that
lands inside a timed query is charged to that query (issue #13), and every later
full collection, including the one at interpreter exit, walks them again.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_startup_frozen = False


def freeze_startup_heap() -> None:
    """Move everything alive now (imported modules, the opened store) out of the collector's
    sight, once per process: later collections, including the one at exit, skip it.

    Once only, so that a sweep running many points in one process does not also freeze
    (and so never free) the garbage of earlier points.
    """
    global _startup_frozen
    if not _startup_frozen:
        _startup_frozen = True
        gc.freeze()


@contextmanager
def collector_paused() -> Iterator[Callable[[], None]]:
    """Keep Python's cyclic garbage collector out of the timed queries.

    A collection is a process-wide pause: one landing inside a query is charged to
    that query's latency (the first query after importing MLflow used to read ~190 ms
    for ~2 ms of work). Inside this block the objects that already exist are frozen
    (`gc.freeze`: no collection scans them) and automatic collection is off; the
    function yielded collects the young generations when they fill up, and the
    runner calls it *between* queries, outside any timed window, so memory stays
    bounded while no query is ever paused. Both are undone on exit, except that a heap
    someone froze before (the app freezes what its imports left) stays frozen.
    """
    was_enabled = gc.isenabled()
    was_frozen = gc.get_freeze_count() > 0
    threshold = max(gc.get_threshold()[0], 1)
    gc.freeze()
    gc.disable()

    def between_queries() -> None:
        if gc.get_count()[0] >= threshold:
            gc.collect(1)  # young generations only: the frozen heap is not traversed

    try:
        yield between_queries
    finally:
        if not was_frozen:
            gc.unfreeze()
        if was_enabled:
            gc.enable()


@contextmanager
def collector_off() -> Iterator[None]:
    """No automatic collection inside a block that makes many objects but no reference cycles.

    Scoring a large run builds tens of thousands of small records (misses, per-case
    rows) next to millions of live hits; each time the young generation fills up the
    collector may walk that whole heap, for garbage that reference counting frees
    anyway. Restored on exit (a caller that had it off keeps it off).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
