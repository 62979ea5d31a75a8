"""Every point of a sweep checked before the sweep's parent run exists.

The sweep's own settings (`evaluation.preflight.check_sweep`) say nothing about a value that only
one point has: `chunker.size=256,0` or `ranker.k1=1.2,-1` composes, and used to be refused by the
second job, after the first point was measured and the parent run created (then FAILED). Here the
parent composes every point the sweeper will launch, with Hydra's own composition (the configs
are handed on to the launcher by `sweeps.compose_once`, so nothing is composed twice), and runs
the checks a single run makes before its first case (`preflight.check`: config, fixture and
corpus, the ranker built but not prepared, replayed files). No index is built.

Which points can be known:
- Hydra's basic sweeper (the grid): every point, exactly as it will run.
- The Optuna sweeper: the search space's bounds. For each swept key, each end of an interval
  or range and every choice, with the other keys at their first value; a trial's value between
  two good ends is not checked (the ranker's own check still refuses it, in that trial).
- Another sweeper: none (its jobs still check themselves).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from evalpipe.safety.errors import EvalpipeError

#: Most points checked for a search space (Optuna): its bounds, not a grid over it.
MAX_BOUND_POINTS = 200


class PointError(EvalpipeError):
    """A sweep point that cannot run; the message names the point and the value."""


@dataclass(frozen=True)
class Points:
    """The overrides of each point to check, and whether they are the sweep's exact points
    (the grid) or only the ends of a search space (kept for the launcher only when exact)."""

    overrides: list[list[str]]
    exact: bool
    kind: str  # "grid" | "bounds"
    labels: list[str] | None = None  # how each point is named in an error (default: its swept values)


def _items(params: Mapping[str, Any] | None, task: Sequence[str]) -> list[str]:
    """The sweeper's params then the command line, as Hydra's sweepers join them."""
    return [f"{k}={v}" for k, v in (params or {}).items()] + [str(t) for t in task]


def grid(params: Mapping[str, Any] | None, task: Sequence[str], loader: Any = None) -> list[list[str]]:
    """The basic sweeper's points, in its order (`BasicSweeper.split_arguments`)."""
    # lazy: hydra, ~140 ms
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create(config_loader=loader).parse_overrides(_items(params, task))
    return [list(point) for batch in BasicSweeper.split_arguments(parsed, None) for point in batch]


def _number(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else repr(float(value))


def bounds(params: Mapping[str, Any] | None, task: Sequence[str]) -> tuple[list[list[str]], list[str]]:
    """Points at the ends of a search space: every choice and both ends of every interval or
    range, one key at a time, the other keys at their first value (a later key replaces an earlier
    one, as the Optuna sweeper reads them). Returns the points and a label for each."""
    # lazy: hydra, ~140 ms
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import IntervalSweep

    parser = OverridesParser.create()
    axes: dict[str, list[str]] = {}
    for item in _items(params, task):
        (override,) = parser.parse_overrides([item])
        key = item.partition("=")[0].strip()
        for seen in [k for k in axes if k.lstrip("+~") == key.lstrip("+~")]:
            del axes[seen]
        if not override.is_sweep_override():
            axes[key] = [override.get_value_element_as_str()]
        elif override.is_interval_sweep():
            value = override.value()
            assert isinstance(value, IntervalSweep)
            if isinstance(value.start, int) and isinstance(value.end, int):
                axes[key] = [str(value.start), str(value.end)]
            else:
                axes[key] = [_number(value.start), _number(value.end)]
        else:
            values = list(override.sweep_string_iterator())
            if override.is_range_sweep() and len(values) > 2:
                values = [values[0], values[-1]]
            axes[key] = values or [override.get_value_element_as_str()]
    base = {k: v[0] for k, v in axes.items()}
    swept = [k for k, v in axes.items() if len(v) > 1]
    points = [[f"{k}={v}" for k, v in base.items()]]
    labels = [" ".join(f"{k}={base[k]}" for k in swept) + " (the first value of each axis)"]
    for key, values in axes.items():
        for value in values[1:]:
            points.append([f"{k}={value if k == key else v}" for k, v in base.items()])
            labels.append(f"{key}={value} (the other axes at their first value)")
            if len(points) >= MAX_BOUND_POINTS:
                return points, labels
    return points, labels


def points_of(config: DictConfig, loader: Any = None) -> Points | None:
    """The points to check for this multirun config (None: a sweeper whose points cannot be known)."""
    sweeper = config.hydra.sweeper
    target = str(sweeper.get("_target_", ""))
    params = sweeper.get("params")
    params = OmegaConf.to_container(params, resolve=False) if isinstance(params, DictConfig) else {}
    task = [str(x) for x in OmegaConf.to_container(config.hydra.overrides.task, resolve=False)]
    if target.endswith(".BasicSweeper"):
        return Points(grid(params, task, loader), exact=True, kind="grid")  # type: ignore[arg-type]
    if "optuna" in target.lower():
        overrides, labels = bounds(params, task)  # type: ignore[arg-type]
        return Points(overrides, exact=False, kind="bounds", labels=labels)
    return None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _varying(points: Sequence[Sequence[str]]) -> set[str]:
    """The keys whose value is not the same in every point, or that some point lacks (what tells
    the points apart)."""
    values: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    for point in points:
        for item in point:
            key, _, value = item.partition("=")
            values.setdefault(key, set()).add(value)
            counts[key] = counts.get(key, 0) + 1
    return {k for k in values if len(values[k]) > 1 or counts[k] < len(points)}


def _swept(point: Sequence[str], varying: set[str]) -> str:
    """The point's swept overrides (all of them when nothing varies: a one-point sweep)."""
    own = [o for o in point if o.partition("=")[0] in varying]
    return " ".join(own or point)


def check_points(
    config: DictConfig,
    loader: Any,
    check: Callable[[DictConfig, Sequence[str]], Any],
    keep: Callable[[Sequence[str], Any], None] | None = None,
) -> int:
    """Compose each point with `loader` (Hydra's config loader) and run `check` on its job config
    (the config without its `hydra` node, as the job receives it); the first bad point raises a
    PointError naming the point. `keep(overrides, composed)` hands an exact point's composed
    config on (to the launcher). Returns the number of points checked."""
    points = points_of(config, loader)
    if points is None:
        return 0
    varying = _varying(points.overrides)
    total = len(points.overrides)
    for i, overrides in enumerate(points.overrides):
        where = (
            f"sweep point {i + 1} of {total} ({_swept(overrides, varying)})"
            if points.exact
            else f"sweep search space at {points.labels[i] if points.labels else _swept(overrides, varying)}"
        )
        try:
            composed = loader.load_sweep_config(config, list(overrides))
        except EvalpipeError as exc:
            raise PointError(f"{where}: {exc}") from None
        except Exception as exc:  # Hydra's own: a missing option, a key that is not in the config
            raise PointError(f"{where}: {_one_line(exc)}") from None
        job = copy.deepcopy(composed)
        with open_dict(job):
            job.pop("hydra", None)
        if not job.get("suite"):  # a suite checks its fixtures itself, before its own run (suite.run)
            try:
                check(job, list(overrides))
            except EvalpipeError as exc:
                raise PointError(f"{where}: {exc}") from None
        if keep is not None and points.exact:
            keep(overrides, composed)
    return total
