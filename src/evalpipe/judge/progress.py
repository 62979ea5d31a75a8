"""What the judge is doing while it works: the size up front, then a progress bar on stderr.

Judging a fixture can take minutes and cost money, so the run says before the
first request how many questions there are, what the budget covers and who is
asked; then a transient rich bar (only on a terminal, like the cases' bar) counts
questions, cache hits, calls and errors.
"""

from __future__ import annotations

import sys
from typing import Any


def size_line(label: str, server: str, questions: int, budget: int, cached_note: str = "") -> str:
    """`judge: 1,646 questions for openai:m at http://..., budget 500: 1,146 will not be judged ...`"""
    head = f"judge: {questions:,} questions for {label} at {server}, budget {budget:,} (judge.max_calls)"
    if questions > budget:
        return (
            f"{head}: {questions - budget:,} will not be judged and the judged figures will be partial "
            "(raise judge.max_calls to cover them)"
        )
    return head + cached_note


class JudgeBar:
    """A rich progress bar over the questions within the budget; silent when stderr is not a terminal."""

    def __init__(self, description: str = "judging") -> None:
        # lazy: rich, ~35 ms
        from rich.console import Console

        self.console = Console(stderr=True)
        self.description = description
        self.bar: Any = None
        self.task: Any = None

    def start(self, total: int) -> None:
        if not self.console.is_terminal or not total:
            return
        # lazy: rich, ~44 ms
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self.bar.start()
        self.task = self.bar.add_task(self.description, total=total, counts="")

    def update(self, hits: int, calls: int, errors: int) -> None:
        if self.bar is None:
            return
        counts = f"{hits:,} cached · {calls:,} calls · {errors:,} errors"
        self.bar.update(self.task, completed=hits + calls, counts=counts)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
