"""What the gate compares: one side (baseline or candidate) as one run per fixture.

A single evaluation run is one `FixtureRun`; a suite run (a parent with one child run per
fixture, linked by the `mlflow.parentRunId` tag) is one `FixtureRun` per child. Both sides
are matched fixture by fixture on `FixtureKey` (fixture name and split), and each pair must
have been measured on the same data (`DataId`) before its figures mean anything together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalpipe.safety.errors import EvalpipeError
from evalpipe.stats.comparison import RunCases

#: The split of a run that records none (the whole fixture).
ALL_SPLIT = "all"
SPLIT_KEY = "evalpipe.split"


class GateError(EvalpipeError):
    """The gate cannot compare (bad input, missing run, different data): exit 2."""


#: A run ID or a prefix of one (6+ hex digits): what a baseline name must not look like.
RUN_ID = re.compile(r"[0-9a-f]{6,32}")


def looks_like_run_id(text: str) -> bool:
    return bool(RUN_ID.fullmatch(text))


@dataclass(frozen=True, order=True)
class FixtureKey:
    """Which fixture (and split of it) a run measured: what pairs baseline and candidate runs."""

    fixture: str
    split: str = ALL_SPLIT

    def __str__(self) -> str:
        return self.fixture if self.split == ALL_SPLIT else f"{self.fixture} (split {self.split})"


@dataclass(frozen=True)
class DataId:
    """The data a run was measured on: fixture and corpus sha256 (from its dataset inputs or tags)."""

    fixture_sha256: str = ""
    corpus_sha256: str = ""
    split: str = ALL_SPLIT
    #: where the digests were read: "inputs" (MLflow dataset inputs), "tags", "file", "saved run"
    read_from: str = ""
    #: the fixture's version (tag `evalpipe.fixture_version`; a BEIR fixture's qrels split)
    version: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "fixture_sha256": self.fixture_sha256,
            "corpus_sha256": self.corpus_sha256,
            "split": self.split,
            "version": self.version,
        }


def split_of(tags: Mapping[str, str], params: Mapping[str, str]) -> str:
    """The run's split (tag or param `evalpipe.split`); a run that records none measured `all`."""
    return str(tags.get(SPLIT_KEY) or params.get(SPLIT_KEY) or ALL_SPLIT)


@dataclass(frozen=True)
class FixtureRun:
    """One evaluation run: its per-case values, what it was measured on, and where it lives."""

    key: FixtureKey
    data: DataId
    cases: RunCases
    #: the run's aggregate MLflow metrics (figures shown beside the per-case means)
    figures: Mapping[str, float] = field(default_factory=dict)
    experiment_id: str = ""

    @property
    def run_id(self) -> str:
        return self.cases.run_id

    @property
    def label(self) -> str:
        return self.cases.label


@dataclass(frozen=True)
class Side:
    """A baseline or a candidate: a run (or suite run) as its fixture runs."""

    label: str
    run_id: str
    runs: Sequence[FixtureRun]
    #: where it came from: "store" (a tracking store), "file" (an exported baseline), "saved run" (a dir)
    origin: str = "store"
    tracking_uri: str = ""
    experiment_id: str = ""
    #: for an exported baseline: the file; for a named baseline: its name
    reference: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def by_key(self) -> dict[FixtureKey, FixtureRun]:
        out: dict[FixtureKey, FixtureRun] = {}
        for run in self.runs:
            if run.key in out:
                raise GateError(
                    f"{self.label} has two runs on fixture {run.key} ({out[run.key].run_id}, {run.run_id}); "
                    "gate one of them by its run ID"
                )
            out[run.key] = run
        return out
