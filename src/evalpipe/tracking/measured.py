"""Which run measured a point: a reused sweep point is compared as the run it reuses.

A sweep records a point it did not re-run as a reuse child (`evalpipe.tracking.reuse`): a
FINISHED run with the figures of the run that measured that configuration, tagged
`evalpipe.reused_run_id`, whose artifacts (the per-case table `cases.json`) stay with that run.
`evalpipe compare` follows the tag, through any chain of reuses, to the run holding the cases,
and says so in one line. A reused run whose original was deleted cannot be compared: that is
one clear error saying how to get the original back or measure the point again.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from evalpipe.safety.errors import EvalpipeError
from evalpipe.tracking.reuse import REUSED_TAG

#: Longest chain of reuses followed (a reuse child is never itself reused today; this bounds a cycle).
MAX_CHAIN = 20


class MissingOriginal(EvalpipeError):
    """A reused run whose measured run is deleted or absent from the store (exit 2)."""


@dataclass(frozen=True)
class Measured:
    """`run` as selected, and `measured`, the run whose per-case table stands for it."""

    selected: Any
    measured: Any
    chain: tuple[str, ...] = ()  # run IDs from the selected run to the measured one, both included

    @property
    def reused(self) -> bool:
        return self.measured.info.run_id != self.selected.info.run_id

    def line(self) -> str:
        """`bm25 k1=0.9 (reused 2b0f2ca7 -> measured run <id>)`: how the selected run is compared."""
        name = self.selected.info.run_name or self.selected.info.run_id[:8]
        hops = " -> ".join(i[:8] for i in self.chain[1:])
        suffix = f" (reused {self.chain[1][:8]})" if len(self.chain) > 1 else ""
        base = name[: -len(suffix)] if suffix and name.endswith(suffix) else name
        return f"{base} (reused {hops} -> measured run {self.measured.info.run_id})"


def _fetch(client: Any, run_id: str) -> Any | None:
    try:
        run = client.get_run(run_id)
    except Exception:
        return None
    return None if getattr(run.info, "lifecycle_stage", "active") == "deleted" else run


def missing_message(selected: Any, missing_id: str, deleted: bool) -> str:
    name = selected.info.run_name or selected.info.run_id[:8]
    state = "was deleted from this store" if deleted else "is not in this store"
    fix = (
        f"restore it (mlflow runs restore --run-id {missing_id}, with MLFLOW_TRACKING_URI set to this store)"
        if deleted
        else "point --tracking-uri at the store that holds it"
    )
    return (
        f"run {name!r} ({selected.info.run_id[:8]}) is a reused sweep point standing for run {missing_id}, "
        f"which {state}; {fix}, or measure the point again with force=true, or leave "
        f"{selected.info.run_id[:8]} out"
    )


def follow(client: Any, run: Any) -> Measured:
    """The run that measured `run`: itself, or the end of its chain of `evalpipe.reused_run_id` tags."""
    chain = [run.info.run_id]
    current = run
    while REUSED_TAG in current.data.tags:
        target = current.data.tags[REUSED_TAG]
        if target in chain or len(chain) > MAX_CHAIN:
            raise MissingOriginal(
                f"run {run.info.run_name!r} ({run.info.run_id[:8]}): its reuse tags form a loop or a chain "
                f"longer than {MAX_CHAIN} ({' -> '.join(i[:8] for i in chain)}); compare the measured run"
            )
        nxt = _fetch(client, target)
        if nxt is None:
            deleted = False
            with contextlib.suppress(Exception):
                deleted = client.get_run(target).info.lifecycle_stage == "deleted"
            raise MissingOriginal(missing_message(run, target, deleted))
        chain.append(target)
        current = nxt
    return Measured(run, current, tuple(chain))
