"""Named baselines in the tracking store: `evalpipe baseline set main <run>`, then `--baseline main`.

A name maps to a run ID (a single run or a suite's parent). The mapping lives in the store itself,
as tags of one experiment `evalpipe/baselines` (it holds no runs), so everyone gating against the
store agrees on what `main` is, and moving it is one command. The run a name points at also gets
the tag `evalpipe.baseline.<name>` (removed from the run it pointed at before), so the runs table
shows which run is the baseline.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from evalpipe.gate.model import GateError, looks_like_run_id

EXPERIMENT = "evalpipe/baselines"
TAG_PREFIX = "evalpipe.baseline."
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
NOTE = (
    "Named baselines of `evalpipe gate`, kept as this experiment's tags `evalpipe.baseline.<name>` "
    "(this experiment holds no runs). List them with `evalpipe baseline list`."
)


@dataclass(frozen=True)
class NamedBaseline:
    name: str
    run_id: str
    run_name: str = ""
    experiment: str = ""
    set_at_ms: int = 0
    previous: str = ""


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise GateError(
            f"baseline name {name!r}: use letters, digits, '_', '-' and '.' (at most 100, starting with a "
            "letter or digit), e.g. main"
        )
    if looks_like_run_id(name):
        raise GateError(
            f"baseline name {name!r} looks like a run ID prefix; pick a name with a non-hex letter"
        )
    return name


def _experiment(client: Any, create: bool) -> Any:
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None and create:
        with contextlib.suppress(Exception):  # created concurrently
            client.create_experiment(EXPERIMENT, tags={"mlflow.note.content": NOTE})
        exp = client.get_experiment_by_name(EXPERIMENT)
    return exp


def list_baselines(client: Any) -> list[NamedBaseline]:
    exp = _experiment(client, create=False)
    if exp is None:
        return []
    out = []
    for key, value in sorted((exp.tags or {}).items()):
        if not key.startswith(TAG_PREFIX):
            continue
        try:
            data = json.loads(value)
        except ValueError:
            continue
        out.append(
            NamedBaseline(
                key[len(TAG_PREFIX) :],
                str(data.get("run_id") or ""),
                str(data.get("run_name") or ""),
                str(data.get("experiment") or ""),
                int(data.get("set_at_ms") or 0),
                str(data.get("previous") or ""),
            )
        )
    return out


def lookup(client: Any, name: str) -> str:
    """The run ID a named baseline points at, or a GateError listing the names there are."""
    found = {b.name: b for b in list_baselines(client)}
    if name not in found:
        known = ", ".join(sorted(found)) or "none yet: `evalpipe baseline set NAME RUN` records one"
        raise GateError(f"no baseline named {name!r} in this tracking store (named baselines: {known})")
    return found[name].run_id


def set_baseline(client: Any, name: str, run: Any) -> NamedBaseline:
    """Point `name` at `run` (checked to be a gateable run by the caller); returns the new record."""
    check_name(name)
    exp = _experiment(client, create=True)
    previous = next((b for b in list_baselines(client) if b.name == name), None)
    experiment = client.get_experiment(run.info.experiment_id).name
    record = NamedBaseline(
        name,
        run.info.run_id,
        run.info.run_name or "",
        experiment,
        int(time.time() * 1000),
        previous.run_id if previous is not None else "",
    )
    payload = {
        "run_id": record.run_id,
        "run_name": record.run_name,
        "experiment": record.experiment,
        "set_at_ms": record.set_at_ms,
        "previous": record.previous,
    }
    client.set_experiment_tag(exp.experiment_id, TAG_PREFIX + name, json.dumps(payload))
    if previous is not None and previous.run_id != run.info.run_id:
        with contextlib.suppress(Exception):  # the old run was deleted, or never had the tag
            client.delete_tag(previous.run_id, TAG_PREFIX + name)
    client.set_tag(run.info.run_id, TAG_PREFIX + name, "true")
    return record
