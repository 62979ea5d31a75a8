"""What a suite is (`conf/suite/<name>.yaml`): a name and a list of fixture config names.

Checked before any fixture runs: an unknown fixture name, an empty list or an unknown
aggregation stops the suite with exit 2 and one line saying what exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalpipe.safety.errors import EvalpipeError

#: How the suite's own figures (and the objective a sweep over it optimises) combine the fixtures.
AGGREGATIONS = ("mean", "min")


class SuiteError(EvalpipeError):
    """A suite config that cannot run; the message names the key and what would work."""


@dataclass(frozen=True)
class Suite:
    name: str
    fixtures: tuple[str, ...]
    agg: str = "mean"


def fixture_options(conf_dirs: Sequence[Path]) -> list[str]:
    """The `fixture=<name>` options of these config dirs (`<dir>/fixture/<name>.yaml`)."""
    names = {p.stem for d in conf_dirs for p in (Path(d) / "fixture").glob("*.yaml")}
    return sorted(names)


def conf_dirs(searchpath: Sequence[str] = ()) -> list[Path]:
    """evalpipe's own conf/ and the file:// entries of `hydra.searchpath`."""
    # lazy: evalpipe.paths, ~1 ms
    from evalpipe.paths import PROJECT_ROOT

    dirs = [PROJECT_ROOT / "conf"]
    for entry in searchpath:
        text = str(entry)
        if text.startswith("file://"):
            dirs.append(Path(text[len("file://") :]))
    return dirs


def check_suite(raw: Any, agg: Any, options: Sequence[str]) -> Suite:
    """The suite from the resolved `suite:` node and `objective_agg`, or a SuiteError."""
    if not isinstance(raw, Mapping):
        raise SuiteError(f"suite must be a config with name and fixtures (conf/suite/*.yaml), got {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SuiteError("suite.name must be a non-empty name, e.g. name: code")
    fixtures = raw.get("fixtures")
    if not isinstance(fixtures, list | tuple) or not fixtures:
        raise SuiteError(
            f"suite {name}: fixtures must be a non-empty list of fixture config names, e.g. [gold, docs]"
        )
    bad = [f for f in fixtures if not isinstance(f, str) or not f.strip()]
    if bad:
        raise SuiteError(f"suite {name}: each fixture must be a fixture config name, got {bad[0]!r}")
    unknown = [f for f in fixtures if f not in options]
    if unknown:
        raise SuiteError(
            f"suite {name}: unknown fixture {unknown[0]!r} (no conf/fixture/{unknown[0]}.yaml); "
            f"available: {', '.join(options)}"
        )
    if len(set(fixtures)) != len(fixtures):
        raise SuiteError(f"suite {name}: a fixture is listed twice in {list(fixtures)}")
    agg = agg if agg is not None else raw.get("objective_agg", "mean")
    if agg not in AGGREGATIONS:
        raise SuiteError(f"objective_agg must be one of {', '.join(AGGREGATIONS)}, got {agg!r}")
    return Suite(name.strip(), tuple(fixtures), str(agg))
