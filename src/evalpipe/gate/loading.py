"""Reading a side of the gate: a run in a tracking store, a saved run directory, or a baseline file.

A store run with child runs (tag `mlflow.parentRunId`) is a suite run: each child is gated on its
own fixture. A reused sweep point is read through the run it reuses (its cases live there). A run
that did not measure everything (FAILED, KILLED, partial, skipped ranker) is refused: a gate on
half a run says nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalpipe.compare.runs import get_run as compare_get_run
from evalpipe.core.files import read_json_text
from evalpipe.gate.model import DataId, FixtureKey, FixtureRun, GateError, Side, looks_like_run_id, split_of
from evalpipe.safety.errors import EvalpipeError
from evalpipe.stats.comparison import CompareError, cases_from_rows
from evalpipe.tracking.cases import load_cases
from evalpipe.tracking.reuse import is_reuse, original_run_id

PARENT_TAG = "mlflow.parentRunId"
#: Child runs that are not measurements (a comparison or a gate logged under a run).
NOT_MEASUREMENTS = ("compare", "gate")
# --- tracking store ------------------------------------------------------------------------------


def _check_measured(run: Any) -> None:
    tags = run.data.tags
    label = f"run {run.info.run_name or ''} ({run.info.run_id})".replace("run  (", "run (")
    if tags.get("evalpipe.skipped"):
        raise GateError(
            f"{label}: its ranker was skipped ({tags['evalpipe.skipped'][:120]}); nothing to gate"
        )
    if tags.get("evalpipe.partial") == "true":
        raise GateError(f"{label} is partial (interrupted): re-run it to completion before gating")
    if run.info.status != "FINISHED":
        raise GateError(f"{label} is {run.info.status}, not FINISHED: gate a run that measured every case")


def fixture_name(tags: dict[str, str], params: dict[str, str], fallback: str = "") -> str:
    return str(tags.get("evalpipe.fixture") or params.get("fixture") or fallback or "fixture")


def store_fixture_run(client: Any, run: Any) -> FixtureRun:
    """One evaluation run in a store (a reused sweep point: read through the run it reuses)."""
    # lazy: evalpipe.tracking.datasets, ~4 ms
    from evalpipe.tracking.datasets import logged_data

    _check_measured(run)
    source = run
    if is_reuse(run):
        try:
            source = client.get_run(original_run_id(run))
        except Exception:
            raise GateError(
                f"run {run.info.run_id} reuses run {original_run_id(run)}, which is not in this store"
            ) from None
    try:
        cases = load_cases(client, source)
    except CompareError as exc:
        raise GateError(str(exc)) from None
    tags, params = dict(source.data.tags), dict(source.data.params)
    logged = logged_data(source)
    split = split_of(tags, params)
    version = tags.get("evalpipe.fixture_version", "")
    data = DataId(logged.fixture_sha256, logged.corpus_sha256, split, logged.source, version)
    key = FixtureKey(fixture_name(tags, params, logged.fixture_name), split)
    figures = {k: float(v) for k, v in source.data.metrics.items()}
    return FixtureRun(key, data, cases, figures, source.info.experiment_id)


def child_runs(client: Any, run_id: str) -> list[Any]:
    """Measurement runs whose parent is `run_id` (in any experiment: a suite spans fixtures)."""
    # lazy: evalpipe.tracking.sweep_summary, yaml, ~47 ms
    from evalpipe.tracking.sweep_summary import search_all

    children = search_all(client, f"tags.`{PARENT_TAG}` = '{run_id}'")
    children = [c for c in children if c.data.tags.get("evalpipe.role") not in NOT_MEASUREMENTS]
    children.sort(key=lambda r: (r.info.start_time or 0, r.info.run_id))
    return children


def get_run(client: Any, run_ref: str) -> Any:
    """A run by ID or unique prefix (6+ hex digits), as `evalpipe compare` accepts them."""

    try:
        return compare_get_run(client, run_ref)
    except CompareError as exc:
        raise GateError(str(exc)) from None


def store_side(client: Any, run: Any, uri: str, reference: str = "") -> Side:
    """A run, or a suite run (its children, one per fixture), from a tracking store."""
    children = child_runs(client, run.info.run_id)
    if children:
        runs = [store_fixture_run(client, child) for child in children]
    else:
        runs = [store_fixture_run(client, run)]
    name = run.info.run_name or ""
    label = f"{name} ({run.info.run_id[:8]})" if name else run.info.run_id[:8]
    return Side(
        label=label,
        run_id=run.info.run_id,
        runs=runs,
        origin="store",
        tracking_uri=uri,
        experiment_id=run.info.experiment_id,
        reference=reference,
        extra={"suite": bool(children), "run_name": name},
    )


# --- saved run directories -----------------------------------------------------------------------


def _saved_fixture_run(directory: Path) -> tuple[FixtureRun, Any]:
    # lazy: evalpipe.reporting.local, evalpipe.tracking.datasets, ~8 ms
    from evalpipe.reporting.local import TABLE_FILE, load_run
    from evalpipe.tracking.datasets import CORPUS_CONTEXT, FIXTURE_CONTEXT, saved_specs

    saved = load_run(directory)
    info = saved.info
    status = str(info.get("status") or "")
    if status != "FINISHED" or info.get("partial"):
        what = f"{status or 'incomplete'}{' (partial)' if info.get('partial') else ''}"
        raise GateError(f"saved run {directory} is {what}: gate a run that measured every case")
    if saved.tags.get("evalpipe.skipped"):
        raise GateError(f"saved run {directory}: its ranker was skipped; nothing to gate")
    path = directory / TABLE_FILE
    if not path.is_file():
        raise GateError(f"saved run {directory} has no {TABLE_FILE} (per-case table); re-run it")
    try:
        rows = [
            json.loads(line) for line in read_json_text(path, "per-case table").splitlines() if line.strip()
        ]
    except (EvalpipeError, OSError, ValueError, RecursionError) as exc:
        raise GateError(f"{path}: cannot read the per-case table ({exc})") from None
    run_id = str(info.get("run_id") or info.get("local_id") or directory.name)
    name = str(info.get("run_name") or "")
    try:
        cases = cases_from_rows(
            rows,
            run_id=run_id,
            name=name,
            label=str(directory),
            objective=str(saved.params.get("objective") or saved.tags.get("evalpipe.objective", "")),
        )
    except CompareError as exc:
        raise GateError(str(exc)) from None
    specs = {s.context: s for s in saved_specs(saved)}
    tags, params = dict(saved.tags), dict(saved.params)
    split = split_of(tags, params)
    fx, corpus = specs.get(FIXTURE_CONTEXT), specs.get(CORPUS_CONTEXT)
    data = DataId(
        fx.sha256 if fx else tags.get("evalpipe.fixture_sha256", ""),
        corpus.sha256 if corpus else tags.get("evalpipe.corpus_sha256", ""),
        split,
        "saved run",
        tags.get("evalpipe.fixture_version", ""),
    )
    key = FixtureKey(fixture_name(tags, params, fx.name if fx else ""), split)
    return FixtureRun(key, data, cases, dict(saved.metrics)), saved


def saved_side(path: Path) -> Side:
    """A saved run's output directory (or a multirun/suite directory of them)."""
    # lazy: evalpipe.reporting.local, ~5 ms
    from evalpipe.reporting.local import find_saved_runs

    dirs = find_saved_runs([path])
    if not dirs:
        raise GateError(f"{path}: no saved run (run_info.json) in this directory")
    loaded = [_saved_fixture_run(d) for d in dirs]
    runs = [run for run, _ in loaded]
    first_info = loaded[0][1].info
    run_id = str(first_info.get("run_id") or "") if len(loaded) == 1 else ""
    uri = str(first_info.get("tracking_uri") or "") if first_info.get("upload") == "complete" else ""
    label = f"{runs[0].cases.name or 'run'} ({path})" if len(runs) == 1 else f"saved runs in {path}"
    return Side(
        label=label,
        run_id=run_id,
        runs=runs,
        origin="saved run",
        tracking_uri=uri if "***" not in uri else "",
        reference=str(path),
        extra={"run_ids": [r.run_id for r in runs]},
    )


# --- any reference -------------------------------------------------------------------------------


def resolve(ref: str, tracker_for: Any, role: str, names: bool = True, uri: str = "") -> Side:
    """`ref` as a baseline file, a saved run dir, a run ID/prefix, or (baselines) a named baseline.

    `tracker_for()` opens the tracking store only when a store is needed (a file needs none)."""
    path = Path(ref)
    if path.is_file():
        # lazy: evalpipe.gate.baseline_file, ~2 ms
        from evalpipe.gate.baseline_file import read_baseline

        return read_baseline(path)
    if path.is_dir():
        return saved_side(path)
    if ref.endswith(".json") or "/" in ref:
        raise GateError(f"{role} {ref!r}: no such file or directory")
    tracker = tracker_for()
    if looks_like_run_id(ref):
        return store_side(tracker.client, get_run(tracker.client, ref), tracker.uri)
    if names:
        # lazy: evalpipe.gate.baseline_store, ~4 ms
        from evalpipe.gate.baseline_store import lookup

        run_id = lookup(tracker.client, ref)
        return store_side(tracker.client, get_run(tracker.client, run_id), tracker.uri, reference=ref)
    raise GateError(
        f"{role} {ref!r} is neither a run ID (or a prefix of 6+ hex digits), a saved run directory "
        "nor an exported baseline file"
    )


def all_run_ids(side: Side) -> Sequence[str]:
    return [r.run_id for r in side.runs]
