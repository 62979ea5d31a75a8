"""Everything that talks to MLflow: the store, experiments, runs, batched logging.

Uses an explicit `MlflowClient` bound to one tracking URI; the global URI is also
set, because `mlflow.log_table` only logs through it. SQLite schema creation and
migration run under an exclusive file lock (`<db>.lock` beside the database),
because several processes creating a fresh SQLite store at the same time fail
(`duplicate column name`) or corrupt it: two single runs started together are as
safe as a sweep.

A store that cannot be reached fails fast: a server is probed with a short
timeout before any client is made, and MLflow's own HTTP retries are bounded
(`MLFLOW_HTTP_REQUEST_*` defaults below), so a dead server costs seconds, not the
minutes of MLflow's defaults.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from evalpipe.paths import PROJECT_ROOT
from evalpipe.safety.secrets import mask_text
from evalpipe.safety.signals import Interrupted
from evalpipe.tracking import store_check

DEFAULT_URI = "sqlite:///mlruns/mlflow.db"
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# MLflow's defaults retry a dead server for minutes (7 retries, backoff factor 2, 120 s timeout).
# These keep a failure to seconds; set the variables yourself to change them.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    # MLflow prints "View run at <server URL>" itself, user:password included; evalpipe prints its own.
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
for _name, _value in HTTP_DEFAULTS.items():
    os.environ.setdefault(_name, _value)
PROBE_SECONDS = 8.0  # total budget for reaching a server at start (it may be starting up)


@dataclass(frozen=True)
class Tracker:
    """A tracking URI plus the client bound to it."""

    uri: str
    client: Any

    @property
    def ui_command(self) -> str:
        # lazy: evalpipe.safety.secrets, ~2 ms
        from evalpipe.safety.secrets import mask_text

        if self.uri.startswith(("http://", "https://")):
            return f"open {mask_text(self.uri)} (the tracking server's own UI)"
        return f"mlflow ui --backend-store-uri {mask_text(self.uri)}"


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
    if "://" not in uri:
        # lazy: evalpipe.safety.errors, ~2 ms
        from evalpipe.safety.errors import EvalpipeError

        scheme = re.match(r"[A-Za-z][A-Za-z0-9+.-]+:", uri)
        if scheme:  # `sqlite:/x`, `http:host`: a scheme without `//`, not a folder
            raise EvalpipeError(
                f"tracking.uri={uri!r} is not a URI: {scheme.group(0)} must be followed by '//' "
                "(e.g. sqlite:///mlruns/mlflow.db for a relative path, sqlite:////abs/mlflow.db, http://host:5000)"
            )
        raise EvalpipeError(
            f"tracking.uri={uri!r} is a file-store path, which MLflow no longer supports; "
            f"use sqlite:///{uri.rstrip('/')}/mlflow.db or an http(s):// server"
        )
    store_check.check_grammar(uri)
    db = sqlite_path(uri)
    if db is not None:
        return "sqlite:///" + str(db.expanduser().resolve())
    return uri


class StoreUnavailable(Exception):
    """The tracking store cannot be used (unreachable, read-only); the message says which and why."""


def check_writable(db: Path) -> None:
    """A read-only store (directory or database file), said in those words, before MLflow retries.

    Probes by writing (a temp file beside the database, opening the database for writing), as
    permission bits say nothing for root, immutable files or read-only mounts.
    """

    # lazy: evalpipe.safety.secrets, ~2 ms
    from evalpipe.safety.secrets import mask_text

    target = db.parent
    try:
        db.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".evalpipe-write-check-", dir=db.parent)
        os.close(fd)
        os.unlink(tmp)
        if db.exists():
            target = db
            os.close(os.open(db, os.O_WRONLY))
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        what = "database file" if target == db else "directory"
        raise StoreUnavailable(
            f"tracking store {mask_text(str(db))} is read-only: the {what} {target} is not writable "
            f"({exc.strerror}); fix its permissions, pick another tracking.uri, or run with "
            "tracking.offline=true"
        ) from None


def probe_server(uri: str, budget: float = PROBE_SECONDS) -> None:
    """GET <server>/health with short timeouts for at most `budget` seconds, or StoreUnavailable."""
    # lazy: evalpipe.safety.secrets, ~32 ms
    import base64
    import socket
    import urllib.error
    import urllib.parse
    import urllib.request

    from evalpipe.safety.secrets import mask_text

    deadline = time.monotonic() + budget
    parts = urllib.parse.urlsplit(uri.rstrip("/") + "/health")
    request = urllib.request.Request(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl())
    if parts.username is not None:  # urllib does not read user:password from the URL (MLflow does)
        pair = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        request.add_header("Authorization", "Basic " + base64.b64encode(pair.encode()).decode())
    reason = ""
    while True:
        left = deadline - time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=max(0.5, min(4.0, left))) as resp:
                if resp.status < 500:
                    return
                reason = f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            if exc.code < 500:  # the server answers (e.g. 401/404 behind a proxy): reachable
                return
            reason = f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:
            reason = str(getattr(exc, "reason", None) or exc)
            if isinstance(getattr(exc, "reason", exc), socket.gaierror | ValueError):
                break  # an unknown host name or a malformed URL does not get better by waiting
        if deadline - time.monotonic() < 1.5:
            break
        time.sleep(1.0)
    waited = budget - max(0.0, deadline - time.monotonic())
    raise StoreUnavailable(
        f"tracking server {mask_text(uri)} is unreachable ({mask_text(reason)}; gave up after "
        f"{waited:.0f} s): start it, fix tracking.uri, or run with tracking.offline=true "
        "and upload later with `evalpipe sync <output dir>`"
    )


@contextmanager
def schema_lock(db: Path) -> Iterator[None]:
    """Exclusive lock on `<db>.lock` while the schema is created or migrated (one process at a time)."""

    lock_path = db.with_name(db.name + ".lock")
    with open(lock_path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


#: SQLite stores this process has opened, by URI: a sweep's jobs in one process open it once.
_opened: dict[str, Tracker] = {}


def ensure_store(uri: str | None = None) -> Tracker:
    """Create the store (SQLite schema) if needed and return a client bound to it.

    A SQLite store is opened once per process (the next sweep point gets the same client, as
    MLflow keeps one store object per URI), though checked for writing every time; a server is
    probed every time."""
    # lazy: mlflow, pandas, scipy, ..., ~2508 ms
    import mlflow
    from mlflow.tracking import MlflowClient

    uri = normalise_uri(uri)
    db = sqlite_path(uri)
    if db is not None:
        store_check.check_sqlite_path(db, uri)
        check_writable(db)  # the file's schema and lock: `check_store` (before the first case), MLflow here
        if uri in _opened and db.exists():
            mlflow.set_tracking_uri(uri)
            return _opened[uri]
    elif uri.split("+", 1)[0].split(":", 1)[0] in store_check.DATABASE_SCHEMES:
        store_check.check_database_server(uri)
    elif uri.startswith(("http://", "https://")):
        # lazy: standard library, ~6 ms
        import logging

        # urllib3 logs each retry as a WARNING (on the console): the failure is said once, by evalpipe.
        logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
        probe_server(uri)
    mlflow.set_tracking_uri(uri)
    if db is None:
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
        return Tracker(uri, client)
    with schema_lock(db):  # the store object creates/migrates the schema: one process at a time
        client = MlflowClient(tracking_uri=uri)
        client.search_experiments(max_results=1)
    _opened[uri] = Tracker(uri, client)
    return _opened[uri]


def ensure_experiment(tracker: Tracker, name: str) -> str:
    """Get or create an experiment; SQLite stores keep artifacts beside the database."""
    exp = tracker.client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":  # it cannot take runs, and its name cannot be reused
            raise store_check.deleted_experiment(name, str(exp.experiment_id), mask_text(tracker.uri))
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


def check_store(uri: str | None, experiment: str | None = None) -> str:
    """The checks of a store that need no MLflow (`store_check`: the URI's grammar and scheme, a
    read-only, locked, foreign or other-version SQLite store, a server that does not answer, a
    deleted experiment), as `open_experiment` words them; returns the normalised URI.

    A run whose store is opened by the upload worker makes these checks itself before any
    case, so those failures still stop it first, with exit 2."""
    # lazy: evalpipe.safety.errors, evalpipe.safety.secrets, ~4 ms
    from evalpipe.safety.errors import EvalpipeError
    from evalpipe.safety.secrets import mask_text

    try:
        uri = normalise_uri(uri)
        db = sqlite_path(uri)
        if db is not None:
            store_check.check_sqlite_path(db, uri)
            check_writable(db)
            store_check.check_sqlite(db, uri, experiment)
        elif uri.startswith(("http://", "https://")):
            # lazy: standard library, ~6 ms (in a try)
            import logging

            logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
            probe_server(uri)
            if experiment:
                store_check.check_server_experiment(uri, experiment)
        elif uri.split("+", 1)[0].split(":", 1)[0] in store_check.DATABASE_SCHEMES:
            store_check.check_database_server(uri)
    except EvalpipeError:
        raise
    except StoreUnavailable as exc:
        raise EvalpipeError(str(exc)) from None
    except Exception as exc:
        first = mask_text(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        raise EvalpipeError(
            f"cannot open MLflow store {mask_text(str(uri))!r}: {type(exc).__name__}: {first}"
        ) from None
    return uri


def open_experiment(uri: str | None, name: str) -> tuple[Tracker, str]:
    """Store + experiment, or an EvalpipeError saying which store could not be opened."""
    # lazy: evalpipe.safety.errors, evalpipe.safety.secrets, ~4 ms
    from evalpipe.safety.errors import EvalpipeError
    from evalpipe.safety.secrets import mask_text

    try:
        tracker = ensure_store(uri)
        return tracker, ensure_experiment(tracker, name)
    except EvalpipeError:
        raise
    except StoreUnavailable as exc:
        raise EvalpipeError(str(exc)) from None
    except Exception as exc:  # unwritable path, corrupt database, a server that fails requests
        first = mask_text(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        raise EvalpipeError(
            f"cannot open MLflow store {mask_text(str(uri))!r}: {type(exc).__name__}: {first}"
        ) from None


@lru_cache(maxsize=4)
def git_revision(root: Path = PROJECT_ROOT) -> str:
    """The checkout's commit (+ "-dirty"), once per process (as `code_fingerprint`)."""
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


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Flatten a nested mapping into dotted keys with string values (MLflow params)."""
    out: dict[str, str] = {}
    for key, value in values.items():
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
    timestamp_ms: int | None = None,
) -> None:
    """Log in as few calls as MLflow's batch limits allow (100 params/tags, 1000 metrics).

    `timestamp_ms` dates the metrics (a synced run keeps the time it was measured)."""
    # lazy: mlflow, pandas, scipy, ..., ~1249 ms
    from mlflow.entities import Metric, Param, RunTag

    now = int(timestamp_ms) if timestamp_ms else int(time.time() * 1000)
    m = [Metric(k, float(v), now, 0) for k, v in sorted((metrics or {}).items())]
    p = [Param(k, str(v)) for k, v in sorted((params or {}).items())]
    t = [RunTag(k, str(v)) for k, v in sorted((tags or {}).items())]
    if len(p) <= 100 and len(t) <= 100 and len(m) + len(p) + len(t) <= 1000:  # one request
        tracker.client.log_batch(run_id, metrics=m, params=p, tags=t)
        return
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
    except (KeyboardInterrupt, Interrupted):
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
    # lazy: mlflow, pandas, scipy, ..., ~1240 ms
    import mlflow

    mlflow.set_tracking_uri(tracker.uri)
    mlflow.log_table(data=dict(table), artifact_file=name, run_id=run_id)
