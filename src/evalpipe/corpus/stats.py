"""Corpus statistics: what the builder put into a corpus, in numbers a reader can check.

The same figures are printed by `python -m evalpipe.corpus` and can be recorded with a run
(`corpus_metrics`), so a ranker result can be read against the corpus it ran on: how many
units are tests, how many functions are overloaded, how many declarations were merged, how
many edges of each relation kind a graph ranker can walk.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from evalpipe.core import Unit
from evalpipe.core.unit import RELATION_KINDS


@dataclass(frozen=True)
class CorpusStats:
    """Counts over a corpus; `relations` has every known kind (0 when absent)."""

    units: int
    files: int
    kinds: Mapping[str, int] = field(default_factory=dict)
    languages: Mapping[str, int] = field(default_factory=dict)
    test_units: int = 0
    overloaded: int = 0
    merged_declarations: int = 0
    relations: Mapping[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "units": self.units,
            "files": self.files,
            "kinds": dict(self.kinds),
            "languages": dict(self.languages),
            "test_units": self.test_units,
            "overloaded": self.overloaded,
            "merged_declarations": self.merged_declarations,
            "relations": dict(self.relations),
        }

    def metrics(self, prefix: str = "corpus/") -> dict[str, float]:
        """Flat numeric figures for a run (`corpus/units`, `corpus/kind/function`, ...)."""
        out = {
            f"{prefix}units": float(self.units),
            f"{prefix}files": float(self.files),
            f"{prefix}test_units": float(self.test_units),
            f"{prefix}overloaded": float(self.overloaded),
            f"{prefix}merged_declarations": float(self.merged_declarations),
        }
        out.update({f"{prefix}kind/{k}": float(v) for k, v in self.kinds.items()})
        out.update({f"{prefix}relation/{k}": float(v) for k, v in self.relations.items()})
        return out

    def lines(self) -> list[str]:
        """The human-readable summary printed by the corpus CLI."""
        share = f" ({100.0 * self.test_units / self.units:.1f}%)" if self.units else ""
        return [
            f"  kinds:     {_fmt(self.kinds)}",
            f"  languages: {_fmt(self.languages)}",
            f"  tests:     {self.test_units} units{share}",
            f"  overloaded functions: {self.overloaded}; merged declarations: {self.merged_declarations}",
            f"  relations: {_fmt({k: v for k, v in self.relations.items() if v})}",
        ]


def _fmt(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def corpus_stats(units: Iterable[Unit]) -> CorpusStats:
    """Count `units` (a `Corpus` or any iterable of units; old corpora derive `is_test`)."""
    units = list(units)
    relations = Counter({k: 0 for k in RELATION_KINDS})
    for u in units:
        for kind, targets in u.relations.items():
            relations[kind] += len(targets)
    return CorpusStats(
        units=len(units),
        files=len({u.path for u in units if u.path}),
        kinds=dict(Counter(u.kind for u in units)),
        languages=dict(Counter(u.language for u in units if u.language)),
        test_units=sum(1 for u in units if u.get("is_test") is True),
        overloaded=sum(1 for u in units if u.metadata.get("overloads")),
        merged_declarations=sum(1 for u in units if u.metadata.get("merged_kinds")),
        relations=dict(relations),
    )


def corpus_metrics(units: Iterable[Unit]) -> dict[str, float]:
    """`corpus_stats(units).metrics()`: the one call a run needs to record these figures."""
    return corpus_stats(units).metrics()


def write_corpus_stats(units: Iterable[Unit], path: str | Path) -> Path:
    """The statistics as a JSON artifact (e.g. `corpus_stats.json` next to a run's results)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(corpus_stats(units).as_dict(), indent=2, sort_keys=True) + "\n")
    return path
