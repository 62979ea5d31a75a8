"""Shared test fixtures: isolated MLflow stores, a tiny corpus, the shared datasets."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest

from evalpipe.core import progress_bars

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "datasets"


def shared_dataset(name: str) -> Path:
    """Path of a BEIR dataset under ../shared, or skip the test saying why."""
    path = SHARED / name
    if not path.is_dir():
        pytest.skip(f"{path} not found: the shared BEIR datasets sit beside the repo in CI only")
    return path


TINY_UNITS = [
    {
        "id": "pkg/a.py",
        "kind": "module",
        "title": "pkg.a",
        "text": "module a helpers",
        "path": "pkg/a.py",
        "language": "python",
    },
    {
        "id": "pkg/a.py::merge_settings",
        "kind": "function",
        "title": "merge_settings",
        "text": "def merge_settings(base, override): combine two settings dicts",
        "path": "pkg/a.py",
        "language": "python",
        "name": "merge_settings",
        "qualname": "merge_settings",
    },
    {
        "id": "pkg/a.py::Session.merge",
        "kind": "method",
        "title": "Session.merge",
        "text": "def merge(self, other): merge another session into this one",
        "path": "pkg/a.py",
        "language": "python",
        "name": "merge",
        "qualname": "Session.merge",
    },
    {
        "id": "pkg/b.go::Open",
        "kind": "function",
        "title": "Open",
        "text": "func Open(path string) opens a file",
        "path": "pkg/b.go",
        "language": "go",
        "name": "Open",
        "qualname": "Open",
    },
    {
        "id": "docs/guide.md#install",
        "kind": "section",
        "title": "Install",
        "text": "Install with pip",
        "path": "docs/guide.md",
        "language": "markdown",
        "document_id": "docs/guide.md",
        "section": "install",
        "chunk_index": 0,
    },
]


WIDE_SCOPES = frozenset({"module", "class", "package"})


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook turns the marks into work units
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The suite runs on pytest-xdist workers with `--dist loadgroup` (pyproject's addopts): a test
    without an `xdist_group` mark is sent to whichever worker is free, one test at a time. A test
    that uses a module- or class-scoped fixture, or a session-scoped one defined in its own module
    (tests/test_corpus_fidelity.py's npm install into one cache directory), is grouped with the
    rest of its module here, so that fixture (a built store, a loaded fixture, a server) is set up
    once on one worker rather than once per worker, and never twice at the same time. Tests that
    share something beyond one module (Ray, a PostgreSQL server) name their own group
    (`pytest.mark.xdist_group`), which is kept as it is."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        defs = [d for ds in info.name2fixturedefs.values() for d in ds]
        if any(d.scope in WIDE_SCOPES or (d.scope == "session" and d.baseid.endswith(".py")) for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
    items.sort(key=_longest_first)


#: Work units that take longest, first: the "ray" group (Ray clusters and PostgreSQL, several
#: minutes on one worker: test_ray.py, test_team_postgres.py) must not be the last unit handed
#: out, or one worker runs it alone while the other idles. pyproject's addopts pass
#: `--no-loadscope-reorder`, so pytest-xdist hands out units in this order (by default it would
#: sort them by their number of tests, which says nothing about their time).
FIRST_GROUPS = ("ray",)


def _longest_first(item: pytest.Item) -> int:
    """0 for the long groups, 1 for other grouped or `slow` tests, 2 for the rest (a stable sort:
    collection order within each)."""
    mark = item.get_closest_marker("xdist_group")
    group = (mark.args[0] if mark.args else mark.kwargs.get("name")) if mark is not None else None
    if group in FIRST_GROUPS:
        return 0
    if group is not None or item.get_closest_marker("slow") is not None:
        return 1
    return 2


@pytest.fixture(autouse=True)
def _mlflow_store_template(request: pytest.FixtureRequest):
    """A SQLite store MLflow creates in the test's process is a copy of one it migrated for real
    (tests/store_template.py): 2-3 s of migrations saved per fresh store. A test about creating a
    store itself is marked `mlflow_migrations` and gets MLflow's own table creation."""
    if request.node.get_closest_marker("mlflow_migrations") is not None:
        yield
        return
    from store_template import initialized_from_template

    with initialized_from_template():
        yield


@pytest.fixture(autouse=True)
def _fresh_index_memo():
    """Each test builds its own indexes (the per-process index memo would hide builds)."""
    from evalpipe.rankers.base import clear_built_cache

    clear_built_cache()
    yield
    clear_built_cache()


@pytest.fixture
def tiny_corpus_path(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(u) + "\n" for u in TINY_UNITS), encoding="utf-8")
    return path


@pytest.fixture
def tracking_uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}"


@pytest.fixture(autouse=True)
def _progress_bars_allowed():
    """Each test starts with progress bars allowed: a run with progress=false in this process (an
    in-process CLI run, a stage called directly) says so process-wide (`core.progress_bars`)."""
    progress_bars.allow(True)
    yield
    progress_bars.allow(True)
    if gc.get_freeze_count():  # a CLI run in this process froze its heap before "exiting"
        gc.unfreeze()
    gc.enable()
