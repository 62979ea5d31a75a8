"""Plug-in rankers used by the CLI tests (imported via PYTHONPATH=tests)."""

from __future__ import annotations


class ScriptedRanker:
    """Returns a fixed list per query; raises for the query 'boom' (a retrieval error)."""

    def __init__(self, answers: dict[str, list[str]] | None = None):
        self.answers = answers or {}

    def search(self, query, k, constraints=None):
        if query == "boom":
            raise ConnectionError("backend down")
        return self.answers.get(query, [])[:k]


def keyword_search(query, k, constraints=None):
    """A plain function plug-in: every unit whose id contains a query word (3+ letters), as (id, score)."""
    ids = ["pkg/a.py::merge_settings", "pkg/a.py::Session.merge", "pkg/b.go::Open"]
    words = [w for w in query.lower().split() if len(w) >= 3]
    return [(i, 1.0 / (n + 1)) for n, i in enumerate(x for x in ids if any(w in x.lower() for w in words))][
        :k
    ]


class SlowRanker:
    """Sleeps `delay` seconds per query, appending the query to `progress_file` after each one
    (tests wait on that file before sending a signal). Extra keyword arguments (an `api_key`,
    `endpoint`, headers...) are accepted and kept, as a real client's would be."""

    def __init__(self, delay: float = 0.5, progress_file: str | None = None, **settings):
        self.delay = float(delay)
        self.progress_file = progress_file
        self.settings = settings

    def search(self, query, k, constraints=None):
        import time

        time.sleep(self.delay)
        if self.progress_file:
            with open(self.progress_file, "a", encoding="utf-8") as fh:
                fh.write(query + "\n")
        return keyword_search(query, k, constraints)


class HoldingRanker:
    """Holds its first query `hold_s` seconds after writing its process ID to `marker` (tests
    kill that process, or signal the sweep, while the point is in the middle of its cases).
    With `once`, a marker left by an earlier run means "already held": no hold, so re-running
    the same configuration measures normally. Other keyword arguments (a swept knob) are kept."""

    def __init__(self, marker: str, hold_s: float = 0.0, once: bool = False, **settings):
        self.marker, self.hold_s, self.once = marker, float(hold_s), bool(once)
        self.settings = settings
        self._held = False

    def search(self, query, k, constraints=None):
        import os
        import time

        if self.hold_s > 0 and not self._held and not (self.once and os.path.exists(self.marker)):
            self._held = True
            with open(self.marker + ".tmp", "w", encoding="utf-8") as fh:
                fh.write(str(os.getpid()))
            os.replace(self.marker + ".tmp", self.marker)
            # in short sleeps, as a ranker computing would be: Ray's cancel of a running task raises
            # KeyboardInterrupt between bytecodes only, so one long sleep would hold it to the end
            deadline = time.monotonic() + self.hold_s
            while (left := deadline - time.monotonic()) > 0:
                time.sleep(min(0.1, left))
        return keyword_search(query, k, constraints)
