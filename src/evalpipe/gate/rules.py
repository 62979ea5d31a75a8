"""What counts as a regression: metrics, scope, allowed drop per metric, significance level.

A drop fails the gate only when it is both larger than the allowed absolute drop for that
metric AND the paired randomization test says it is real (p < alpha). The first condition
keeps a big fixture from failing on a real but negligible drop; the second keeps a small
fixture from failing on the loss of one or two cases, which per-case noise produces all
the time. Rows are gated overall and per tier (`scope`), because an aggregate hides a
collapse in one tier that another tier's gain pays for.

Rules are the defaults below, then a rules file (`--rules gate.yaml`, checked into the user's
repo beside the baseline), then flags; see docs/gate.md for the noise the defaults tolerate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalpipe.gate.model import GateError

SCOPES = ("both", "overall", "tiers")
FIELDS = ("metrics", "scope", "max_drop", "max_drops", "alpha", "resamples", "seed", "tiers")


@dataclass(frozen=True)
class GateRules:
    """The gate's rules, with defaults for fixtures of a few dozen cases per tier (docs/gate.md)."""

    #: per-case metrics gated; empty = the baseline's objective and mrr
    metrics: tuple[str, ...] = ()
    #: overall, tiers (each tier) or both
    scope: str = "both"
    #: allowed absolute drop (baseline - candidate) of any metric not in max_drops
    max_drop: float = 0.02
    #: allowed absolute drop per metric, e.g. {mrr: 0.03}
    max_drops: Mapping[str, float] = field(default_factory=dict)
    #: significance level of the paired randomization test (two-sided); CIs are at 1 - alpha
    alpha: float = 0.05
    resamples: int = 10000
    seed: int = 0
    #: tiers gated (empty = every tier of the fixture)
    tiers: tuple[str, ...] = ()

    def allowed_drop(self, metric: str) -> float:
        return float(self.max_drops.get(metric, self.max_drop))

    def to_json(self) -> dict[str, Any]:
        return {
            "metrics": list(self.metrics),
            "scope": self.scope,
            "max_drop": self.max_drop,
            "max_drops": dict(self.max_drops),
            "alpha": self.alpha,
            "resamples": self.resamples,
            "seed": self.seed,
            "tiers": list(self.tiers),
        }


def _number(value: Any, name: str, where: str, low: float, high: float | None, integer: bool = False) -> Any:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise GateError(f"{where}: {name} must be a {'whole ' if integer else ''}number, got {value!r}")
    if value < low or (high is not None and value > high):
        span = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
        raise GateError(f"{where}: {name} must be {span}, got {value!r}")
    return int(value) if integer else float(value)


def _names(value: Any, name: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise GateError(f"{where}: {name} must be a list of names, got {value!r}")
    return tuple(value)


def apply(rules: GateRules, data: Mapping[str, Any], where: str) -> GateRules:
    """`rules` with the fields of `data` (a rules file's mapping or flags) applied, each checked."""
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise GateError(f"{where}: unknown rule(s) {unknown}; allowed: {list(FIELDS)}")
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if value is None:
            continue
        if key in ("metrics", "tiers"):
            changes[key] = _names(value, key, where)
        elif key == "scope":
            if value not in SCOPES:
                raise GateError(f"{where}: scope must be one of {', '.join(SCOPES)}, got {value!r}")
            changes[key] = value
        elif key == "max_drop":
            changes[key] = _number(value, key, where, 0.0, None)
        elif key == "max_drops":
            if not isinstance(value, Mapping):
                raise GateError(f"{where}: max_drops must map metric names to drops, got {value!r}")
            merged = dict(rules.max_drops)
            for metric, drop in value.items():
                merged[str(metric)] = _number(drop, f"max_drops.{metric}", where, 0.0, None)
            changes[key] = merged
        elif key == "alpha":
            changes[key] = _number(value, key, where, 1e-9, 0.999999)
        elif key == "resamples":
            changes[key] = _number(value, key, where, 100, 10_000_000, integer=True)
        elif key == "seed":
            changes[key] = _number(value, key, where, 0, None, integer=True)
    return replace(rules, **changes)


def read_rules_file(path: Path, rules: GateRules | None = None) -> GateRules:
    """Rules from a YAML file (strictly read: a duplicated key is an error naming both lines).

    The file may hold the rules at its top level or under a `gate:` key (so they can sit in a
    larger CI config file)."""
    # lazy: evalpipe.inputs.strict_yaml, yaml, ~19 ms
    from evalpipe.inputs.strict_yaml import YAMLFileError, load_file

    if not path.is_file():
        raise GateError(f"rules file {path} not found")
    try:
        data, _ = load_file(path)
    except YAMLFileError as exc:
        raise GateError(str(exc)) from None
    data = data or {}
    if isinstance(data, Mapping) and set(data) == {"gate"}:
        data = data["gate"] or {}
    if not isinstance(data, Mapping):
        raise GateError(f"{path}: a rules file is a mapping of {', '.join(FIELDS)}")
    return apply(rules or GateRules(), data, str(path))


def parse_drop_flags(values: Sequence[str]) -> dict[str, float]:
    """`--max-drop-for mrr=0.03 recall_at_5=0.05` as {metric: drop}."""
    out: dict[str, float] = {}
    for item in values:
        metric, sep, number = item.partition("=")
        if not sep or not metric:
            raise GateError(f"--max-drop-for {item!r}: write METRIC=DROP, e.g. mrr=0.03")
        try:
            out[metric] = float(number)
        except ValueError:
            raise GateError(f"--max-drop-for {item!r}: {number!r} is not a number") from None
    return out


def load_rules(rules_file: Path | None, flags: Mapping[str, Any]) -> GateRules:
    """The defaults, then the rules file, then flags."""
    rules = GateRules()
    if rules_file is not None:
        rules = read_rules_file(rules_file, rules)
    return apply(rules, {k: v for k, v in flags.items() if v is not None}, "flags")
