"""Plug-in rankers that misbehave, for the bad-input tests (imported via PYTHONPATH=tests)."""

from __future__ import annotations

import time

from evalpipe.rankers.base import RankerUnavailable

#: What ShapeRanker returns per query (the tiny fixture's queries); anything else -> [].
SHAPES = {
    "merge_settings": "pkg/a.py::merge_settings",  # a bare string
    "combine another session": {"id": "pkg/a.py::Session.merge", "score": 1.0},  # one dict
    "open a file with pip": None,  # forgot `return`
    "zebra": [(7, 1.0)],  # an integer ID
}


class ShapeRanker:
    """Returns a wrong shape for every query (see SHAPES), or only for `bad` of them."""

    def __init__(self, bad: list[str] | None = None):
        self.bad = bad

    def search(self, query, k, constraints=None):
        if self.bad is not None and query not in self.bad:
            return ["pkg/a.py::merge_settings"]
        return SHAPES.get(query, [])


class WrongScoreRanker:
    def search(self, query, k, constraints=None):
        return [("pkg/a.py::merge_settings", "high")]


class StrangerRanker:
    """Returns IDs that are not in the corpus (another corpus's ID scheme) next to a real one."""

    def search(self, query, k, constraints=None):
        return ["pkg/a.py::merge_settings", "src/pkg/a.py:merge_settings", "other/" + query.split()[0]]


class SlowRanker:
    """Hangs (sleeps `hang_s`) on the query 'zebra'; answers the others at once."""

    def __init__(self, hang_s: float = 60.0):
        self.hang_s = hang_s

    def search(self, query, k, constraints=None):
        if query == "zebra":
            time.sleep(self.hang_s)
        return ["pkg/a.py::merge_settings"]


class UnavailableRanker:
    """A backend that cannot load: the run is skipped."""

    def prepare(self, corpus):
        raise RankerUnavailable("backend 'vecdb' not installed (pip install vecdb)")

    def search(self, query, k, constraints=None):  # pragma: no cover - never reached
        return []
