"""How a request to the upload worker fails, apart from the worker itself: the sweep store and
the run stages catch these without importing the worker (which imports the sweep store)."""

from __future__ import annotations


class WorkerGone(Exception):
    """The worker process ended or its pipe broke: the caller falls back to the in-process path."""


class WorkerError(Exception):
    """A request failed in the worker; `bad` when it is the store's fault (EvalpipeError)."""

    def __init__(self, message: str, bad: bool = False) -> None:
        super().__init__(message)
        self.bad = bad
