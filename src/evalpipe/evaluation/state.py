"""The state one evaluation carries from stage to stage.

Mutable on purpose: a signal can land in any stage, and the record stage then saves
whatever the stages before it produced (the cases measured so far, their scores),
so each stage fills in its own fields and never rebuilds another's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omegaconf import DictConfig
    from rich.console import Console

    from evalpipe.evaluation.preflight import Checked
    from evalpipe.evaluation.runner import PreparedRanker
    from evalpipe.inputs.fixture import Fixture
    from evalpipe.judge.asking import Judge
    from evalpipe.judge.run import JudgeOutcome, NotJudged
    from evalpipe.reporting.report import ReportRow
    from evalpipe.scoring.outcome import RunNotMeasured
    from evalpipe.scoring.results import CaseResult
    from evalpipe.scoring.run import RunScores
    from evalpipe.scoring.tokens import TokenCounter
    from evalpipe.tracking.mlflow_store import Tracker
    from evalpipe.tracking.record import Recording
    from evalpipe.tracking.run_store import RunStore
    from evalpipe.tracking.sweep_job import JobContext


@dataclass
class RunState:
    """Everything one run knows, in the order the stages learn it."""

    cfg: DictConfig
    console: Console
    err: Console  # stderr
    # check
    checked: Checked
    judge: Judge | None  # None: judge=none
    ranker_choice: str
    overrides: list[str]
    out_dir: Path | None
    run_name: str
    counter: TokenCounter
    # open store
    experiment: str = ""
    offline: bool = False
    #: where the run's data goes, chosen once (`tracking.run_store`)
    store: RunStore | None = None
    # reuse (identity)
    revision: str = ""
    chash: str = ""
    job: JobContext | None = None
    # start
    tags: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rec: Recording | None = None
    # measure / judge
    results: list[CaseResult] = field(default_factory=list)
    prepared: PreparedRanker | None = None
    scores: RunScores | None = None
    judged: JudgeOutcome | NotJudged | None = None
    figures: dict[str, float] = field(default_factory=dict)
    failure: RunNotMeasured | None = None
    interrupted: BaseException | None = None
    # record / upload
    why: str = ""
    row: ReportRow | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    upload_error: str | None = None

    @property
    def tracker(self) -> Tracker | None:
        """The store's tracker (None offline, or while the worker opens the store)."""
        return None if self.store is None else self.store.tracker

    @property
    def experiment_id(self) -> str | None:
        return None if self.store is None else self.store.experiment_id

    @property
    def fixture(self) -> Fixture:
        return self.checked.fixture

    @property
    def ks(self) -> list[int]:
        return self.checked.ks

    @property
    def objective(self) -> str:
        return self.checked.objective
