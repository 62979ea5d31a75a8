"""What can be known about a tracking store without importing MLflow, checked before the first case.

A single run hands the store to the upload worker, which opens it while the cases run; a
store problem the worker finds is found only after every case was measured. So the parent
checks, in a few milliseconds and with the standard library only, what MLflow would refuse:

* the URI's grammar and scheme (`sqlite:///path`, http(s), a database server URL);
* a SQLite store's path (not a directory, its folder there) and file (an SQLite database
  that MLflow made, with the schema version this MLflow expects, not locked by a writer);
* a database server that does not answer (a TCP connect with a short timeout);
* the experiment: one in the deleted state cannot take runs.

Each problem is a `StoreProblem` whose message names the store (secrets masked) and says how
to fix it; none of them is "the store is down, sync later", which fits only an unreachable store.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import importlib.util
import json
import os
import re
import socket
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from evalpipe.safety import env_settings
from evalpipe.safety.errors import EvalpipeError

#: URI schemes MLflow's tracking client accepts here (a database URL may name a driver: `+psycopg`).
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")
SCHEMES = ("sqlite", "http", "https", "databricks", *DATABASE_SCHEMES)


#: How long a SQLite store may be held by another writer before the run gives up (MLflow waits too).
def lock_wait_s() -> float:
    """EVALPIPE_STORE_LOCK_WAIT_S, read when used and checked (`safety.env_settings`)."""
    return env_settings.number("EVALPIPE_STORE_LOCK_WAIT_S")


#: Budget for a database server to accept a TCP connection.
CONNECT_WAIT_S = 5.0
SQLITE_HEADER = b"SQLite format 3\x00"


class StoreProblem(EvalpipeError):
    """A tracking store that cannot take this run; the message says which and how to fix it."""


def _masked(uri: str) -> str:
    # lazy: evalpipe.safety.secrets, ~2 ms
    from evalpipe.safety.secrets import mask_text  # as tracking does: secrets loads on first use

    return mask_text(uri)


def check_grammar(uri: str) -> None:
    """A URI MLflow can open: a known scheme, and `sqlite:///<path>` (three slashes) for SQLite."""
    shown = _masked(uri)
    scheme, sep, rest = uri.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        raise StoreProblem(
            f"tracking.uri={shown!r} is not a URI (scheme://...): use sqlite:///path/to/mlflow.db "
            "or an http(s):// server"
        )
    base = scheme.lower().split("+", 1)[0]
    if base == "file":
        raise StoreProblem(
            f"tracking.uri={shown!r} is a file store, which MLflow no longer supports; use "
            f"sqlite:///{rest.rstrip('/')}/mlflow.db or an http(s):// server"
        )
    if base not in SCHEMES:
        raise StoreProblem(
            f"tracking.uri={shown!r}: unsupported scheme {scheme!r}; use one of "
            f"{', '.join(s + '://' for s in SCHEMES)} (e.g. sqlite:///mlruns/mlflow.db)"
        )
    if base == "sqlite":
        if scheme.lower() != "sqlite":
            raise StoreProblem(f"tracking.uri={shown!r}: write sqlite:///path (no driver after sqlite)")
        if not rest.startswith("/"):
            raise StoreProblem(
                f"tracking.uri={shown!r} is not an SQLite URI MLflow can open: write three slashes "
                f"and the path, sqlite:///{rest} (relative) or sqlite:////abs/path/mlflow.db (absolute)"
            )
        path = rest[1:].partition("?")[0]
        if not path or path.endswith("/") or path == ":memory:":
            raise StoreProblem(
                f"tracking.uri={shown!r} names no database file: give one, e.g. sqlite:///mlruns/mlflow.db"
            )
        return
    parts = urllib.parse.urlsplit(uri)
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:  # a port that is not a number
        raise StoreProblem(f"tracking.uri={shown!r} is malformed ({exc}): fix tracking.uri") from None
    if base in ("http", "https", *DATABASE_SCHEMES) and not host:
        raise StoreProblem(f"tracking.uri={shown!r} names no host: e.g. http://127.0.0.1:5000")
    del port


def check_sqlite_path(db: Path, uri: str) -> None:
    """The database's path: a file (or nothing yet) in a folder that exists or can be made beside
    an existing one (`sqlite:///mlruns/mlflow.db` makes `mlruns/`; a typo two levels up is refused)."""
    shown = _masked(uri)
    if db.is_dir():
        raise StoreProblem(
            f"tracking store {shown}: {db} is a directory, not a database file: use sqlite:///{db}/mlflow.db"
        )
    if not db.parent.exists() and not db.parent.parent.is_dir():
        raise StoreProblem(
            f"tracking store {shown}: the folder {db.parent.parent} does not exist (a typo in "
            "tracking.uri?): create it, or fix tracking.uri"
        )
    if db.parent.exists() and not db.parent.is_dir():
        raise StoreProblem(f"tracking store {shown}: {db.parent} is a file, not a folder: fix tracking.uri")
    if db.exists() and not db.is_file():
        raise StoreProblem(f"tracking store {shown}: {db} is not a regular file (a device or pipe?)")


def check_sqlite(db: Path, uri: str, experiment: str | None) -> None:
    """A SQLite database MLflow can open and write now (see the module docstring)."""
    shown = _masked(uri)
    if not db.exists() or db.stat().st_size == 0:
        return
    with open(db, "rb") as fh:
        header = fh.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise StoreProblem(
            f"tracking store {shown}: {db} is not an SQLite database: point tracking.uri at an "
            "MLflow store, or move the file away"
        )
    try:
        con = sqlite3.connect(f"file:{db}?mode=rw", uri=True, timeout=lock_wait_s(), isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreProblem(f"tracking store {shown}: cannot open {db} ({exc})") from None
    try:
        with _no_migration(db):  # a first run creating the schema passes through older versions
            _check_tables(con, db, shown, experiment)
        _check_lock(con, db, shown)
    finally:
        con.close()


@contextlib.contextmanager
def _no_migration(db: Path) -> Iterator[None]:
    """Shared lock on `<db>.lock` (`tracking.schema_lock` holds it exclusively while it creates or
    migrates the schema): the version read is the finished one."""
    try:
        fh = open(db.with_name(db.name + ".lock"), "a+")  # noqa: SIM115 (held across the yield)
    except OSError:  # a read-only folder: nobody can be migrating through it
        yield
        return
    with fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _check_tables(con: sqlite3.Connection, db: Path, shown: str, experiment: str | None) -> None:
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc):
            raise _locked(db, shown) from None
        raise StoreProblem(f"tracking store {shown}: {db} is damaged or not a database ({exc})") from None
    if not tables:
        return  # a new, empty database: MLflow creates the schema
    if "alembic_version" not in tables or "experiments" not in tables:
        raise StoreProblem(
            f"tracking store {shown}: {db} is an SQLite database but not an MLflow store (no "
            "alembic_version/experiments tables): point tracking.uri at another file"
        )
    rows = con.execute("SELECT version_num FROM alembic_version").fetchall()
    found = rows[0][0] if rows else None
    expected = head_revision()
    if expected is not None and found != expected:
        known = found in known_revisions()
        why = (
            f"older than this MLflow's: back the file up, then run `mlflow db upgrade {shown}`"
            if known
            else "from a newer MLflow than this one: use that MLflow version, or another tracking.uri"
        )
        raise StoreProblem(
            f"tracking store {shown}: schema version {found} is {why} (this MLflow expects {expected})"
        )
    if experiment:
        row = con.execute(
            "SELECT experiment_id, lifecycle_stage FROM experiments WHERE name = ?", (experiment,)
        ).fetchone()
        if row is not None and row[1] == "deleted":
            raise deleted_experiment(experiment, str(row[0]), shown)


def deleted_experiment(name: str, experiment_id: str, shown: str) -> StoreProblem:
    return StoreProblem(
        f"experiment {name!r} (id {experiment_id}) is deleted in the tracking store {shown}: restore it "
        f"(mlflow experiments restore --experiment-id {experiment_id}), remove it for good (mlflow gc), "
        "or choose another tracking.experiment=..."
    )


def _locked(db: Path, shown: str) -> StoreProblem:
    return StoreProblem(
        f"tracking store {shown} is locked by another writer (waited {lock_wait_s():g} s for {db}): "
        "let the other process finish or stop it, or run with tracking.offline=true and upload "
        "later with `evalpipe sync <output dir>`"
    )


def _check_lock(con: sqlite3.Connection, db: Path, shown: str) -> None:
    """Take and drop the write lock: a writer holding it past lock_wait_s() would fail MLflow later."""
    try:
        con.execute("BEGIN IMMEDIATE")
        con.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise _locked(db, shown) from None
        if "readonly" in str(exc) or "read-only" in str(exc):
            raise StoreProblem(
                f"tracking store {shown} is read-only ({exc}): fix its permissions, pick another "
                "tracking.uri, or run with tracking.offline=true"
            ) from None
        raise StoreProblem(f"tracking store {shown}: {db}: {exc}") from None


def _migrations_dir() -> Path | None:
    """MLflow's migration scripts, found without importing MLflow."""
    try:
        spec = importlib.util.find_spec("mlflow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "store" / "db_migrations" / "versions"
    return path if path.is_dir() else None


@lru_cache(maxsize=1)
def _graph() -> tuple[frozenset[str], frozenset[str]]:
    directory = _migrations_dir()
    revs: set[str] = set()
    downs: set[str] = set()
    if directory is None:
        return frozenset(), frozenset()
    pattern = re.compile(r"^(down_revision|revision)\s*=\s*(.+)$", re.M)
    for script in directory.glob("*.py"):
        for key, value in pattern.findall(script.read_text(encoding="utf-8", errors="replace")):
            ids = set(re.findall(r"['\"]([0-9a-zA-Z_]+)['\"]", value))
            (revs if key == "revision" else downs).update(ids)
    return frozenset(revs), frozenset(downs)


def known_revisions() -> frozenset[str]:
    return _graph()[0]


def head_revision() -> str | None:
    """The schema version this MLflow expects (the migration no other one follows), or None."""
    revs, downs = _graph()
    heads = revs - downs
    return next(iter(heads)) if len(heads) == 1 else None


def check_database_server(uri: str) -> None:
    """A PostgreSQL/MySQL/MSSQL server that accepts a TCP connection within CONNECT_WAIT_S."""
    parts = urllib.parse.urlsplit(uri)
    base = parts.scheme.split("+", 1)[0]
    port = parts.port or {"postgresql": 5432, "mysql": 3306, "mssql": 1433}.get(base, 0)
    host = parts.hostname or "localhost"
    deadline = time.monotonic() + CONNECT_WAIT_S
    reason = ""
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.5, deadline - time.monotonic())):
                return
        except socket.gaierror as exc:
            reason = f"unknown host: {exc.strerror or exc}"
            break
        except OSError as exc:
            reason = exc.strerror or str(exc)
        if deadline - time.monotonic() < 1.0:
            break
        time.sleep(0.5)
    raise StoreProblem(
        f"tracking store {_masked(uri)} is unreachable ({reason}; gave up after {CONNECT_WAIT_S:.0f} s): "
        "start it, fix tracking.uri, or run with tracking.offline=true and upload later with "
        "`evalpipe sync <output dir>`"
    )


def check_server_experiment(uri: str, experiment: str) -> None:
    """An MLflow server's experiment `experiment` is not in the deleted state (one REST call)."""
    # lazy: standard library, ~24 ms
    import urllib.request  # 0.37 s of imports (http.client, email, ssl): only for a server's store

    parts = urllib.parse.urlsplit(uri.rstrip("/"))
    query = urllib.parse.urlencode({"experiment_name": experiment})
    url = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    request = urllib.request.Request(f"{url}/api/2.0/mlflow/experiments/get-by-name?{query}")
    user = parts.username or os.environ.get("MLFLOW_TRACKING_USERNAME")
    if user is not None:
        password = (
            parts.password if parts.username is not None else os.environ.get("MLFLOW_TRACKING_PASSWORD")
        )
        pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password or '')}"
        request.add_header("Authorization", "Basic " + base64.b64encode(pair.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=4.0) as resp:
            data = json.loads(resp.read() or b"{}")
    except Exception:  # absent (404), no permission, an older server: MLflow itself says later
        return
    exp = data.get("experiment") if isinstance(data, dict) else None
    if isinstance(exp, dict) and exp.get("lifecycle_stage") == "deleted":
        raise deleted_experiment(experiment, str(exp.get("experiment_id")), _masked(uri))
