"""A run being recorded: saved locally first, then (when online) uploaded to MLflow.

`evaluate` measures; this module decides where the outcome goes. The MLflow run is
opened when the run starts (so a sweep's parent and the UI see it RUNNING), the
outcome is always saved to the output directory first (`reporting.local`), then
uploaded with the same code `evalpipe sync` uses. When the upload fails, the
local copy is named in one line and left for `evalpipe sync`, which marks the
half-logged run FAILED and uploads a complete one.

The MLflow side runs either in this process (`tracker`) or in the warm upload worker
(`worker`, `tracking.upload_worker`), which opens the run and uploads it while this
process measures; the steps, their order and what a failure leaves are the same.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalpipe.reporting.local import load_run, new_local_id, save_run, update_info
from evalpipe.safety.secrets import mask_mapping, mask_text


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Recording:
    """Where one run goes: its output dir (always) and an MLflow run (when online)."""

    out_dir: Path | None
    experiment: str
    run_name: str
    tracker: Any = None
    experiment_id: str | None = None
    run_id: str | None = None
    local_id: str = field(default_factory=new_local_id)
    start_ms: int = field(default_factory=now_ms)
    #: the fixture and corpus the run measures (`tracking.datasets`), saved and logged as inputs
    datasets: list[dict[str, Any]] | None = None
    #: the upload worker doing the MLflow side (instead of `tracker`), and the store it opened
    worker: Any = None
    uri: str | None = None
    #: why the worker could not open the store or the run (the upload then fails with it)
    store_error: str | None = None
    _start_request: int | None = None

    def describe_data(self, fixture: Any) -> None:
        """Record what the run is measured on; every upload logs it as MLflow dataset inputs."""
        # lazy: evalpipe.tracking.datasets, ~3 ms
        from evalpipe.tracking.datasets import describe

        self.datasets = describe(fixture)

    @property
    def online(self) -> bool:
        return self.tracker is not None or self.worker is not None

    def start(self, tags: Mapping[str, str]) -> None:
        """Open the MLflow run (online only); it is RUNNING until `finish` or `abandon`.

        With a worker the request is only sent: `started` waits for the run ID."""
        # lazy: evalpipe.tracking.sync, ~5 ms
        from evalpipe.tracking.sync import LOCAL_ID_TAG

        if self.worker is not None:
            self.worker.holds_run = True
            tags = {**tags, LOCAL_ID_TAG: self.local_id}
            self._start_request = self.worker.send(
                "start", start_ms=self.start_ms, run_name=self.run_name, tags=tags
            )
            return
        if self.tracker is None:
            return
        run = self.tracker.client.create_run(
            self.experiment_id,
            start_time=self.start_ms,
            run_name=self.run_name,
            tags={**tags, LOCAL_ID_TAG: self.local_id},
        )
        self.run_id = run.info.run_id

    def started(self) -> str | None:
        """The run ID, once the worker has created the run (blocks until it has; raises its
        WorkerError or WorkerGone)."""
        if self.worker is not None and self.run_id is None and self._start_request is not None:
            self.run_id = str(self.worker.reply(self._start_request)["run_id"])
        return self.run_id

    def abandon(self, status: str = "FAILED") -> None:
        """End the MLflow run without results (bad input found late); never raises."""
        if self.worker is not None:
            with contextlib.suppress(Exception):
                if self.started() is not None:
                    self.worker.reply(self.worker.send("abandon", run_id=self.run_id, status=status))
            return
        if self.tracker is None or self.run_id is None:
            return
        with contextlib.suppress(Exception):
            self.tracker.client.set_terminated(self.run_id, status=status)

    def save(
        self,
        files: Mapping[str, str],
        metrics: Mapping[str, float],
        params: Mapping[str, str],
        tags: Mapping[str, str],
        status: str,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        """Write the run to its output dir (masked), with run_info.json saying its status."""
        if self.out_dir is None:
            return
        uri = self.tracker.uri if self.tracker is not None else self.uri if self.worker is not None else None
        info = {
            "local_id": self.local_id,
            "experiment": self.experiment,
            "run_name": self.run_name,
            "status": status,
            "start_time_ms": self.start_ms,
            "end_time_ms": now_ms(),
            "tracking_uri": mask_text(uri) if uri else None,
            "run_id": self.run_id,
            "upload": "pending" if self.online else "offline",
            "uploads": {},
            **(extra or {}),
        }
        if self.datasets is not None:
            # lazy: evalpipe.tracking.datasets, ~3 ms
            from evalpipe.tracking.datasets import INFO_KEY

            info[INFO_KEY] = self.datasets
        if uri is None and extra is not None and extra.get("intended_uri"):
            info["tracking_uri"] = mask_text(str(extra["intended_uri"]))
        masked_files = {name: mask_text(text) for name, text in files.items()}
        masked_tags = mask_mapping(tags)
        masked_params = mask_mapping(params)
        save_run(self.out_dir, masked_files, metrics, masked_params, masked_tags, info)

    def upload(
        self,
        log_extra: Any = None,
        figures: Callable[[], Mapping[str, str | bytes]] | None = None,
    ) -> str | None:
        """Upload the saved run into the open MLflow run; None on success, else one line saying
        what failed and where the results are.

        `figures()` gives the plots (logged under `plots/`), drawn while the worker uploads;
        `log_extra(tracker, run_id)` logs what is not saved locally (in-process only)."""
        if self.worker is not None:
            return self._upload_by_worker(figures)
        if self.tracker is None or self.run_id is None or self.out_dir is None:
            return None
        # lazy: evalpipe.tracking, evalpipe.tracking.sync, ~14 ms
        from evalpipe.tracking import mlflow_store
        from evalpipe.tracking.sync import finish_upload, upload_saved

        saved = load_run(self.out_dir)
        try:
            upload_saved(self.tracker, self.run_id, saved)
            files = figures() if figures is not None else {}
            if files:
                mlflow_store.log_artifact_files(self.tracker, self.run_id, files, subdir="plots")
            if log_extra is not None:
                log_extra(self.tracker, self.run_id)
            finish_upload(self.tracker, self.run_id, saved)
        except Exception as exc:
            return self._failed(exc)
        update_info(self.out_dir, upload="complete", uploads={mask_text(self.tracker.uri): self.run_id})
        return None

    def _upload_by_worker(self, figures: Callable[[], Mapping[str, str | bytes]] | None) -> str | None:
        if self.out_dir is None:
            return None
        if self.store_error is not None or self.run_id is None:
            return self._failed(RuntimeError(self.store_error or "the MLflow run was not created"))
        worker, where = self.worker, str(self.out_dir)
        plots_dir = None
        try:
            sent = [worker.send("upload", run_id=self.run_id, dir=where)]
            files = figures() if figures is not None else {}  # drawn while the worker uploads
            if files:
                plots_dir = tempfile.mkdtemp(prefix="evalpipe-plots-")
                write_files(Path(plots_dir), files)
                sent.append(worker.send("files", run_id=self.run_id, dir=plots_dir, subdir="plots"))
            sent.append(worker.send("finish", run_id=self.run_id, dir=where))
            for number in sent:
                worker.reply(number)
        except Exception as exc:
            return self._failed(exc)
        finally:
            if plots_dir is not None:
                shutil.rmtree(plots_dir, ignore_errors=True)
        update_info(self.out_dir, upload="complete", uploads={mask_text(str(self.uri)): self.run_id})
        return None

    def _failed(self, exc: Exception) -> str:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        kind = type(exc).__name__
        head, sep, rest = first.partition(": ")
        if kind in ("WorkerError", "RuntimeError") and sep and head.isidentifier():
            kind, first = head, rest  # the worker's own "Type: message"
        self.abandon("FAILED")  # works if the store came back; else `sync` marks it FAILED
        with contextlib.suppress(OSError):
            update_info(self.out_dir, upload="failed")
        half = f" (it marks the half-logged run {self.run_id} FAILED)" if self.run_id else ""
        return mask_text(
            f"logging to MLflow failed ({kind}: {first[:160]}); the results are saved "
            f"in {self.out_dir}: upload them with `evalpipe sync {self.out_dir}` once the store is back{half}"
        )


def write_files(directory: Path, files: Mapping[str, str | bytes]) -> None:
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
