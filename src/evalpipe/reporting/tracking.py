"""Everything that talks to MLflow: the store, experiments, runs, batched logging.

Uses an explicit `MlflowClient` bound to one tracking URI; the global URI is also
set, because `mlflow.log_table` only logs through it. SQLite stores are created once, by
whoever calls `ensure_store` first (the parent of a sweep), because several
processes creating a fresh SQLite store at the same time corrupt it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalpipe.paths import PROJECT_ROOT

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


@dataclass(frozen=True)
class Tracker:
    """A tracking URI plus the client bound to it."""

    uri: str
    client: Any

    @property
    def ui_command(self) -> str:
        if self.uri.startswith(("http://", "https://")):
            return f"open {self.uri} (the tracking server's own UI)"
        return f"mlflow ui --backend-store-uri {self.uri}"


def sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///") :])


def normalise_uri(uri: str | None) -> str:
    """Resolve the URI (config > MLFLOW_TRACKING_URI > default); make SQLite paths absolute.

    An absolute path keeps the store in one place even when Hydra changes the
    working directory of a job. A bare directory (the old file store) is refused
    with a hint, because MLflow's file store now raises.
    """
    uri = uri or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI
    db = sqlite_path(uri)
    if db is not None:
        return "sqlite:///" + str(db.expanduser().resolve())
    if "://" not in uri:
        from evalpipe.errors import EvalpipeError

        raise EvalpipeError(
            f"tracking.uri={uri!r} is a file-store path, which MLflow no longer supports; "
            f"use sqlite:///{uri.rstrip('/')}/mlflow.db or an http(s):// server"
        )
    return uri


def ensure_store(uri: str | None = None) -> Tracker:
    """Create the store (SQLite schema) if needed and return a client bound to it."""
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = normalise_uri(uri)
    db = sqlite_path(uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    client.search_experiments(max_results=1)  # creates/migrates the schema now, in this process
    return Tracker(uri, client)


def ensure_experiment(tracker: Tracker, name: str) -> str:
    """Get or create an experiment; SQLite stores keep artifacts beside the database."""
    exp = tracker.client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    db = sqlite_path(tracker.uri)
    location = None
    if db is not None:
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")
        location = (db.parent / "artifacts" / slug).resolve().as_uri()
    try:
        return tracker.client.create_experiment(name, artifact_location=location)
    except Exception:
        exp = tracker.client.get_experiment_by_name(name)  # created concurrently by another job
        if exp is None:
            raise
        return exp.experiment_id


def open_experiment(uri: str | None, name: str) -> tuple[Tracker, str]:
    """Store + experiment, or an EvalpipeError saying which store could not be opened."""
    from evalpipe.errors import EvalpipeError

    try:
        tracker = ensure_store(uri)
        return tracker, ensure_experiment(tracker, name)
    except EvalpipeError:
        raise
    except Exception as exc:  # unreachable server, unwritable path, corrupt database
        raise EvalpipeError(f"cannot open MLflow store {uri!r}: {type(exc).__name__}: {exc}") from None


PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the evalpipe package


def code_fingerprint(package_dir: Path = PACKAGE_DIR) -> str:
    """Hash of evalpipe's own source: what resume compares, instead of a commit ID (which changes
    on a docs-only commit and stays the same under uncommitted edits)."""
    h = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        h.update(path.relative_to(package_dir).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def git_revision(root: Path = PROJECT_ROOT) -> str:
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if not rev:
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a nested config into dotted keys with string values (MLflow params)."""
    out: dict[str, str] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            text = json.dumps(value) if isinstance(value, list | tuple | dict) else str(value)
            out[name] = text[:6000]
    return out


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def log_batch(
    tracker: Tracker,
    run_id: str,
    metrics: Mapping[str, float] | None = None,
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> None:
    """Log in as few calls as MLflow's batch limits allow (100 params/tags, 1000 metrics)."""
    from mlflow.entities import Metric, Param, RunTag

    now = int(time.time() * 1000)
    m = [Metric(k, float(v), now, 0) for k, v in sorted((metrics or {}).items())]
    p = [Param(k, str(v)) for k, v in sorted((params or {}).items())]
    t = [RunTag(k, str(v)) for k, v in sorted((tags or {}).items())]
    for chunk in _chunks(p, 100):
        tracker.client.log_batch(run_id, params=list(chunk))
    for chunk in _chunks(t, 100):
        tracker.client.log_batch(run_id, tags=list(chunk))
    for chunk in _chunks(m, 1000):
        tracker.client.log_batch(run_id, metrics=list(chunk))


@contextmanager
def tracked_run(
    tracker: Tracker, experiment_id: str, run_name: str, tags: Mapping[str, str] | None = None
) -> Iterator[str]:
    """Open a run; it ends FINISHED on success, FAILED on error and KILLED on Ctrl-C, never RUNNING."""
    run = tracker.client.create_run(experiment_id, run_name=run_name, tags=dict(tags or {}))
    run_id = run.info.run_id
    try:
        yield run_id
    except KeyboardInterrupt:
        tracker.client.set_terminated(run_id, status="KILLED")
        raise
    except BaseException:
        tracker.client.set_terminated(run_id, status="FAILED")
        raise
    tracker.client.set_terminated(run_id, status="FINISHED")


def log_artifact_files(
    tracker: Tracker, run_id: str, files: Mapping[str, str | bytes], subdir: str = ""
) -> None:
    """Write {name: content} into a temp dir and upload it in one call."""
    with tempfile.TemporaryDirectory(prefix="evalpipe-") as tmp:
        for name, content in files.items():
            path = Path(tmp) / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        tracker.client.log_artifacts(run_id, tmp, artifact_path=subdir or None)


def log_table(tracker: Tracker, run_id: str, table: Mapping[str, Sequence[Any]], name: str) -> None:
    import mlflow

    mlflow.set_tracking_uri(tracker.uri)
    mlflow.log_table(data=dict(table), artifact_file=name, run_id=run_id)
