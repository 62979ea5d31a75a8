"""A reused sweep point as a child run of its sweep, so the parent lists every point.

Resume skips a point whose configuration already has a FINISHED run. Without a child the
sweep's parent in the MLflow UI would nest only the points that ran, and the reused ones
would sit elsewhere under their old names. The child records which run it stands for
(tag `evalpipe.reused_run_id`) and carries that run's params, metrics and description, so the
UI's table and charts of the sweep are complete; its artifacts stay with the original run.
"""

from __future__ import annotations

from typing import Any

REUSED_TAG = "evalpipe.reused_run_id"
#: The code fingerprint a run was measured with (part of its config hash), so a sweep can ask
#: the store once for every run it could reuse.
CODE_TAG = "evalpipe.code_fingerprint"
FIXTURE_TAG = "evalpipe.fixture_sha256"
#: Above this many candidates the sweep asks per point instead (as before the prefetch).
PREFETCH_MAX = 2000
#: Tags not copied from the reused run: its place in another sweep, and the hash that resume
#: searches (a reuse child must never itself be reused).
NOT_COPIED = (
    "mlflow.parentRunId",
    "mlflow.runName",
    "evalpipe.config_hash",
    "evalpipe.role",
    "evalpipe.sweep_id",
    "evalpipe.job_num",
)


_finished: dict[tuple[str, str, str, str], dict[str, Any] | None] = {}


def finished_by_hash(tracker: Any, experiment_id: str, fingerprint: str, fixture_sha: str):
    """{config hash: latest reusable FINISHED run} of this code on this fixture, fetched once per
    process and store: one query answers every point of a sweep (None: too many to fetch)."""
    # lazy: evalpipe.tracking.sweep_job, ~21 ms
    from evalpipe.tracking.sweep_job import HASH_TAG, reusable

    key = (tracker.uri, experiment_id, fingerprint, fixture_sha)
    if key not in _finished:
        query = (
            f"tags.`{CODE_TAG}` = '{fingerprint}' and tags.`{FIXTURE_TAG}` = '{fixture_sha}' "
            "and attributes.status = 'FINISHED'"
        )
        runs: list[Any] = []
        token = None
        while True:
            page = tracker.client.search_runs(
                [experiment_id],
                filter_string=query,
                order_by=["attributes.start_time DESC"],
                max_results=1000,
                page_token=token,
            )
            runs += list(page)
            token = page.token
            if not token or len(runs) >= PREFETCH_MAX:
                break
        index: dict[str, Any] = {}
        for run in runs:  # newest first: the first usable run of a hash is the one to reuse
            chash = run.data.tags.get(HASH_TAG)
            if chash and chash not in index and reusable(run):
                index[chash] = run
        _finished[key] = None if token else index
    return _finished[key]


def find_reusable(tracker: Any, experiment_id: str, config_hash: str, fingerprint: str, fixture_sha: str):
    """The run a sweep point can reuse: from the sweep's one query, else (a point this process
    has not seen measured, e.g. measured since) the point's own query, as `find_finished`."""
    # lazy: evalpipe.tracking.sweep_job, ~21 ms
    from evalpipe.tracking.sweep_job import find_finished

    index = finished_by_hash(tracker, experiment_id, fingerprint, fixture_sha)
    if index is not None and config_hash in index:
        return index[config_hash]
    return find_finished(tracker, experiment_id, config_hash)


def is_reuse(run: Any) -> bool:
    return REUSED_TAG in run.data.tags


def original_run_id(run: Any) -> str:
    """The run that measured this point: the reused one for a reuse child, else the run itself."""
    return run.data.tags.get(REUSED_TAG) or run.info.run_id


def reuse_name(run_name: str, reused_run_id: str) -> str:
    return f"{run_name} (reused {reused_run_id[:8]})"


def record_reuse(tracker: Any, experiment_id: str, done: Any, job_tags: dict[str, str], run_name: str) -> str:
    """Create the FINISHED child run for a reused point; returns its run ID."""
    # lazy: evalpipe.reporting.headline, numpy, yaml, ..., ~151 ms
    from evalpipe.reporting.headline import NOTE_TAG, clip
    from evalpipe.tracking import mlflow_store

    old = done.info.run_id
    tags = {
        k: v
        for k, v in done.data.tags.items()
        if k not in NOT_COPIED and not k.startswith("evalpipe.swept.") and not k.startswith("mlflow.source")
    }
    tags.update(job_tags)
    tags[REUSED_TAG] = old
    note = done.data.tags.get(NOTE_TAG, "")
    # lazy: evalpipe.tracking.links, ~3 ms
    from evalpipe.tracking.links import run_href

    tags[NOTE_TAG] = clip(
        f"_Reused: this point's configuration was already measured by run "
        f"[{old}]({run_href(done.info.experiment_id, old)}) "
        f"({done.info.run_name}); its figures are copied here and its artifacts stay there._\n\n{note}"
    )
    with mlflow_store.tracked_run(tracker, experiment_id, reuse_name(run_name, old), tags) as run_id:
        mlflow_store.log_batch(tracker, run_id, metrics=done.data.metrics, params=done.data.params)
        # lazy: evalpipe.tracking.datasets, ~19 ms
        from evalpipe.tracking.datasets import copy_inputs

        copy_inputs(tracker, done, run_id)  # the same fixture and corpus as the run it reuses
    return run_id


def reuse_point(
    console: Any,
    tracker: Any,
    experiment_id: str,
    done: Any,
    job: Any,
    run_name: str,
    out_dir,
    objective: str,
) -> float:
    """Resume: record the reused point as a child run, leave a marker for the summary, print one line."""
    # lazy: rich, evalpipe.reporting.run_end, evalpipe.scoring.names, ~50 ms
    import json

    from rich.markup import escape

    from evalpipe.reporting.run_end import point_line
    from evalpipe.scoring.names import lookup

    child = ""
    try:
        child = record_reuse(tracker, experiment_id, done, job.tags, run_name)
    except Exception as exc:  # the point's result is still returned to the sweeper
        console.print(
            f"[yellow]warning:[/] could not record the reused point as a child run: {escape(str(exc))}"
        )
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        marker = {"run_id": done.info.run_id, "child_run_id": child}
        (out_dir / "reused_run.json").write_text(json.dumps(marker), encoding="utf-8")
    line = point_line(job.job_num, run_name, done.data.metrics, done.info.run_id)
    console.print(f"{line} [green]reused[/] (force=true re-runs)", highlight=False)
    return float(lookup(done.data.metrics, objective) or 0.0)
