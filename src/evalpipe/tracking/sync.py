"""Upload saved runs to a tracking store: `evalpipe sync <output dir>...`.

The same upload serves a live run (right after it saved itself locally) and a
later `sync` of a run saved offline or while the store was down, so both give the
same MLflow run: metrics, params, tags, artifacts, the per-case table, status and
start/end times. Each saved run carries a `evalpipe.local_id`; a run in the store
with that ID and `evalpipe.upload=complete` means "already there", which makes
`sync` idempotent (a second sync uploads nothing). A half-logged run with the same
ID (the store died mid-upload) is marked FAILED and replaced by a complete one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evalpipe.reporting.local import SavedRun, find_saved_runs, load_run, update_info
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import EvalpipeError, print_error
from evalpipe.safety.secrets import mask_text

LOCAL_ID_TAG = "evalpipe.local_id"
UPLOAD_TAG = "evalpipe.upload"
SUPERSEDED_TAG = "evalpipe.superseded_by"


def upload_saved(tracker: Any, run_id: str, saved: SavedRun) -> None:
    """Log a saved run's metrics, params, tags, dataset inputs (fixture, corpus), artifact files and
    case table into `run_id`."""
    # lazy: evalpipe.tracking, evalpipe.tracking.datasets, ~19 ms
    from evalpipe.tracking import mlflow_store
    from evalpipe.tracking.datasets import log_saved_inputs

    end_ms = saved.info.get("end_time_ms")
    mlflow_store.log_batch(
        tracker, run_id, metrics=saved.metrics, params=saved.params, tags=saved.tags, timestamp_ms=end_ms
    )
    log_saved_inputs(tracker, run_id, saved)
    files = saved.artifact_files()
    if files:
        mlflow_store.log_artifact_files(tracker, run_id, files)
    table = saved.case_table()
    if table is not None:
        mlflow_store.log_table(tracker, run_id, table, "cases.json")


def finish_upload(tracker: Any, run_id: str, saved: SavedRun) -> None:
    """Mark the upload complete and end the run with the saved status and end time."""
    tracker.client.set_tag(run_id, UPLOAD_TAG, "complete")
    tracker.client.set_terminated(
        run_id, status=str(saved.info.get("status") or "FINISHED"), end_time=saved.info.get("end_time_ms")
    )


def target_uri(saved: SavedRun, override: str | None) -> str | None:
    """--tracking-uri, else MLFLOW_TRACKING_URI, else the store the run was meant for (if not masked)."""
    if override:
        return override
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    recorded = str(saved.info.get("tracking_uri") or "")
    return recorded if recorded and "***" not in recorded else None


def _runs_with_local_id(tracker: Any, experiment_id: str, local_id: str) -> list[Any]:
    return tracker.client.search_runs([experiment_id], filter_string=f"tags.`{LOCAL_ID_TAG}` = '{local_id}'")


def sync_one(saved: SavedRun, uri: str | None, out=print) -> str:
    """Upload one saved run unless it is already there; return what happened (one line)."""
    # lazy: evalpipe.tracking, evalpipe.tracking.links, ~15 ms
    from evalpipe.tracking import mlflow_store
    from evalpipe.tracking.links import run_link_suffix

    info = saved.info
    local_id = str(info.get("local_id") or "")
    if not local_id or not info.get("experiment"):
        return (
            f"skipped {saved.directory}: run_info.json lacks local_id/experiment (not a saved evalpipe run)"
        )
    tracker, experiment_id = mlflow_store.open_experiment(uri, str(info["experiment"]))
    existing = _runs_with_local_id(tracker, experiment_id, local_id)
    done = [r for r in existing if r.data.tags.get(UPLOAD_TAG) == "complete"]
    if done:
        update_info(
            saved.directory,
            uploads={**(info.get("uploads") or {}), mask_text(tracker.uri): done[0].info.run_id},
        )
        link = run_link_suffix(tracker.uri, experiment_id, done[0].info.run_id)
        return f"already uploaded: {saved.directory} is run {done[0].info.run_id}{link}; nothing to do"
    tags = {k: v for k, v in saved.tags.items()}
    parent = tags.get("mlflow.parentRunId")
    if parent:
        try:
            tracker.client.get_run(parent)
        except Exception:  # synced into another store than its sweep's parent
            tags.pop("mlflow.parentRunId")
    run = tracker.client.create_run(
        experiment_id,
        start_time=info.get("start_time_ms"),
        tags={**tags, LOCAL_ID_TAG: local_id},
        run_name=str(info.get("run_name") or "") or None,
    )
    run_id = run.info.run_id
    for stale in existing:  # half-logged by a run whose store died: FAILED, pointing at the full copy
        tracker.client.set_tag(stale.info.run_id, SUPERSEDED_TAG, run_id)
        if stale.info.status == "RUNNING":
            tracker.client.set_terminated(stale.info.run_id, status="FAILED")
    try:
        upload_saved(tracker, run_id, saved)
    except BaseException:
        tracker.client.set_terminated(run_id, status="FAILED")
        raise
    finish_upload(tracker, run_id, saved)
    update_info(
        saved.directory,
        uploads={**(info.get("uploads") or {}), mask_text(tracker.uri): run_id},
        upload="complete",
    )
    stale_note = (
        f"; marked the half-logged run(s) {[r.info.run_id for r in existing]} FAILED" if existing else ""
    )
    page = run_link_suffix(tracker.uri, experiment_id, run_id).strip(" ()") or "(no UI for this store)"
    return (
        f"uploaded {saved.directory} -> run {run_id} ({info.get('status')}) in experiment "
        f"{info['experiment']!r}{stale_note}\n  run page: {page}"
    )


def main(argv: list[str]) -> int:
    """`evalpipe sync [--tracking-uri URI] DIR...`: 0 when every run is in the store, 1 if an upload
    failed, 2 for bad input (nothing saved there, store unavailable)."""

    parser = CommandParser(
        prog="evalpipe sync",
        description="Upload runs saved in output directories (offline, or while the store was down) "
        "to a tracking store, once: a run already uploaded is left alone.",
    )
    parser.add_argument("dirs", nargs="+", type=Path, help="run output dirs, or a multirun dir (searched)")
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="store to upload to (default: MLFLOW_TRACKING_URI, else the run's own tracking.uri)",
    )
    args = parser.parse_args(argv)
    runs = find_saved_runs(args.dirs)
    if not runs:
        names = " ".join(str(d) for d in args.dirs)
        print_error(f"no saved run (run_info.json) in {names}")
        return 2
    failed = bad = False
    for directory in runs:
        try:
            saved = load_run(directory)
        except EvalpipeError as exc:  # half-written or foreign files: named, the others still go up
            print_error(exc)
            bad = True
            continue
        uri = target_uri(saved, args.tracking_uri)
        try:
            print(sync_one(saved, uri))
        except EvalpipeError as exc:
            print_error(f"{directory}: {exc}")
            return 2
        except Exception as exc:
            line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            print_error(f"upload of {directory} failed: {type(exc).__name__}: {line}")
            failed = True
    return 2 if bad else 1 if failed else 0
