"""A fresh MLflow SQLite store without running MLflow's ~60 schema migrations again for every test.

MLflow builds a new SQLite store by creating its tables and then running every Alembic migration
in order (`mlflow.store.db.utils._initialize_tables`): 2-3 s of a test's time on a quiet machine,
most of a small run's. The result is the same file every time (the schema at the newest
revision, no rows; the Default experiment is added afterwards by the store that opens it, with
that store's own artifact root). So the migrations run for real once, into a template kept
under the temporary directory keyed by MLflow's version, and each fresh store is a copy of it
(SQLite's backup API, page for page). MLflow's own `_verify_schema` still checks the copy's
revision when the store opens it: a stale template fails loudly, it is never used silently.

`seed(path)` copies the template to a store file that does not exist yet (for a CLI run in a
real process); `initialized_from_template()` makes MLflow's table creation in this process copy
it (for in-process runs). Tests about creating a store (concurrent first opens, migrations of an
old store) do not use either.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

_built: dict[str, Path] = {}


def _mlflow_version() -> str:
    from importlib.metadata import version

    return version("mlflow")


def template() -> Path:
    """The migrated, empty store file for this MLflow version (built on first use, atomically)."""
    key = _mlflow_version()
    if key in _built and _built[key].is_file():
        return _built[key]
    path = Path(tempfile.gettempdir()) / f"evalpipe-tests-mlflow-{key}-schema.db"
    if not path.is_file():
        import sqlalchemy
        from mlflow.store.db import utils

        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        engine = sqlalchemy.create_engine(f"sqlite:///{tmp}")
        try:
            _ORIGINAL.get("init", utils._initialize_tables)(engine)
        finally:
            engine.dispose()
        os.replace(tmp, path)
    _built[key] = path
    return path


def _copy_into(target: sqlite3.Connection) -> None:
    with contextlib.closing(sqlite3.connect(template())) as source:
        source.backup(target)


def seed(db: Path | str) -> Path:
    """Copy the template to `db` (a SQLite store file, or a `sqlite:///` URI) unless it exists."""
    path = Path(unquote(str(db).removeprefix("sqlite:///"))) if str(db).startswith("sqlite:") else Path(db)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.closing(sqlite3.connect(path)) as target:
            _copy_into(target)
    return path


_ORIGINAL: dict[str, object] = {}


@contextlib.contextmanager
def initialized_from_template() -> Iterator[None]:
    """While inside: a SQLite store MLflow creates in this process is a copy of the template."""
    from mlflow.store.db import utils

    original = utils._initialize_tables
    _ORIGINAL.setdefault("init", original)

    def initialize(engine) -> None:
        if engine.dialect.name != "sqlite" or not engine.url.database or engine.url.database == ":memory:":
            return original(engine)
        template()
        raw = engine.raw_connection()
        try:
            _copy_into(raw.driver_connection)
        finally:
            raw.close()
        return None

    utils._initialize_tables = initialize
    try:
        yield
    finally:
        utils._initialize_tables = original
