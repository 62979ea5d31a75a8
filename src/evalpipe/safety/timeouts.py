"""A per-query time limit (`timeout_s`): a ranker that hangs on one query must not hang the run.

Python cannot stop a thread, so a search that overruns is *abandoned*: it keeps running
in a daemon thread (which dies with the process) while the run records the case as a
retrieval error "timeout after Ns" and goes on. An abandoned search may still use CPU,
memory or the ranker's state until it returns; rankers that are not thread-safe can
see it overlap the next query. That is the price of going on at all; leave `timeout_s`
null (the default) to run every search in the main thread as before.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class SearchTimeout(Exception):
    """A search ran past `timeout_s`; str() is the retrieval error recorded for the case."""


def call_with_timeout(fn: Callable[[], T], timeout_s: float | None) -> T:
    """fn() in a worker thread, waiting at most `timeout_s` seconds (None: call it here, no limit)."""
    if timeout_s is None:
        return fn()
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="evalpipe-search", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise SearchTimeout(f"timeout after {timeout_s:g}s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
