"""The gate as an MLflow run (role `gate`), beside the candidate it judged, linked to both runs.

The gate run sits in the candidate's experiment, with tags naming the candidate and baseline
runs (`evalpipe.gate.candidate`, `evalpipe.gate.baseline`) and the verdict, the Markdown table
as its description (with links to both run pages when the baseline is in the same store), and
gate.md / gate.json as artifacts. The candidate run gets `evalpipe.gate.run` and
`evalpipe.gate.verdict`, so its page says it was gated and how that went.
"""

from __future__ import annotations

import contextlib
from typing import Any

from evalpipe.gate.verdict import GateResult

ROLE = "gate"


def _links(tracker: Any, result: GateResult) -> list[str]:
    # lazy: evalpipe.tracking.links, ~2 ms
    from evalpipe.tracking.links import run_url

    lines = []
    for what, side in (("candidate", result.candidate), ("baseline", result.baseline)):
        if not side.run_id:
            continue
        url = None
        if side.origin == "store" and side.tracking_uri == tracker.uri and side.experiment_id:
            url = run_url(tracker.uri, side.experiment_id, side.run_id)
        where = f" ({side.origin}: {side.reference})" if side.origin != "store" and side.reference else ""
        lines.append(
            f"- {what}: [{side.run_id}]({url}){where}" if url else f"- {what}: `{side.run_id}`{where}"
        )
    return lines


def log_gate(tracker: Any, experiment_id: str, result: GateResult, text: str, json_text: str) -> str:
    """Record the gate run; returns its run ID."""
    # lazy: evalpipe.reporting.headline, yaml, evalpipe.tracking, ~59 ms
    from evalpipe.reporting.headline import NOTE_TAG, clip
    from evalpipe.tracking import mlflow_store

    verdict = "pass" if result.passed else "fail"
    base = result.baseline
    tags = {
        "evalpipe.role": ROLE,
        "evalpipe.gate.verdict": verdict,
        "evalpipe.gate.candidate": result.candidate.run_id,
        "evalpipe.gate.baseline": base.run_id,
        "evalpipe.gate.baseline_source": base.origin + (f": {base.reference}" if base.reference else ""),
        "evalpipe.gate.candidate_runs": ",".join(f.candidate.run_id for f in result.fixtures)[:5000],
        "evalpipe.gate.baseline_runs": ",".join(f.baseline.run_id for f in result.fixtures)[:5000],
        NOTE_TAG: clip("\n".join(_links(tracker, result)) + "\n\n" + text),
    }
    if result.different_data:
        tags["evalpipe.gate.different_data"] = "true"
    name = f"gate {verdict}: {result.candidate.label} vs {base.reference or base.label}"[:250]
    metrics = {
        "gate/regressions": float(len(result.regressions)),
        "gate/rows": float(len(result.rows)),
        "gate/passed": float(result.passed),
    }
    with mlflow_store.tracked_run(tracker, experiment_id, name, tags) as run_id:
        mlflow_store.log_batch(tracker, run_id, metrics=metrics, params={
            k: str(v) for k, v in result.rules.to_json().items()
        })  # fmt: skip
        mlflow_store.log_artifact_files(tracker, run_id, {"gate.md": text, "gate.json": json_text})
        if result.candidate.origin in ("store", "saved run"):  # the data it gated on, in the runs table
            # lazy: evalpipe.tracking.datasets, ~4 ms
            from evalpipe.tracking.datasets import copy_inputs

            for fixture in result.fixtures:
                with contextlib.suppress(Exception):
                    copy_inputs(tracker, tracker.client.get_run(fixture.candidate.run_id), run_id)
    if result.candidate.run_id and result.candidate.origin in ("store", "saved run"):
        with contextlib.suppress(Exception):  # the candidate is in another store (a copy elsewhere)
            tracker.client.set_tag(result.candidate.run_id, "evalpipe.gate.run", run_id)
            tracker.client.set_tag(result.candidate.run_id, "evalpipe.gate.verdict", verdict)
    return run_id
