"""The embedding pass's progress: one bar on stderr with units, units/s and an honest ETA.

The semantic ranker embeds texts longest first, so an ETA from units/s alone is too long at the
start and shrinks as the run goes; the bar's ETA is the remaining `text_cost` at the cost rate
so far, shown from the first batch on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

#: Above this many units to embed, the bar (and the one line before it) is shown.
MIN_UNITS = 256


def console() -> Any:
    """Where the embedding bar goes: stderr (rich draws nothing there when it is not a terminal)."""
    # lazy: rich, ~25 ms
    from rich.console import Console

    return Console(stderr=True)


def text_cost(text: str, max_seq_length: int) -> int:
    """A text's share of the model's work, for the ETA: its length up to what truncation keeps
    (about 4 characters a token), plus a fixed part per unit. Texts are embedded longest first,
    so an ETA from units/s alone would be too long at the start and shrink as the run goes."""
    return min(len(text), 4 * max_seq_length) + 64


@contextlib.contextmanager
def embed_progress(total: int, enabled: bool, total_cost: int = 0) -> Iterator[Callable[[int, int], None]]:
    """Yield `advance(units, cost)`; when `enabled`, a transient rich bar with units, units/s and ETA.

    Both are computed from the start of the pass (not rich's sliding window), so they show from
    the first batch on; the ETA is the remaining cost (`text_cost`) at the cost rate so far.
    """
    if not enabled:
        yield lambda n, cost=0: None
        return
    # lazy: rich, ~50 ms
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            elapsed = task.elapsed or 0.0
            rate = task.completed / elapsed if task.completed and elapsed else 0.0
            return Text(f"{rate:.1f} units/s" if rate else "? units/s")

    class EtaColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            done, whole = task.fields.get("cost", 0), task.fields.get("total_cost", 0)
            elapsed = task.elapsed or 0.0
            if task.finished:
                return Text("ETA 0:00:00")
            if not done or not elapsed or not whole:
                return Text("ETA -:--:--")
            left = int(elapsed * (whole - done) / done)
            return Text(f"ETA {left // 3600}:{left % 3600 // 60:02d}:{left % 60:02d}")

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TimeElapsedColumn(),
        EtaColumn(),
    )
    with Progress(*columns, console=console(), transient=True) as bar:
        task = bar.add_task("embedding corpus", total=total, cost=0, total_cost=total_cost or total)
        spent = [0]

        def advance(n: int, cost: int = 0) -> None:
            spent[0] += cost or n
            bar.update(task, advance=n, cost=spent[0])

        yield advance
