"""The fingerprint of evalpipe's own source, which a run records and resume, the sweep store and
the token cache compare: below every one of them, so none has to import the MLflow layer for it."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the evalpipe package


def code_fingerprint(package_dir: Path = PACKAGE_DIR) -> str:
    """Hash of evalpipe's own source: what resume compares, instead of a commit ID (which changes
    on a docs-only commit and stays the same under uncommitted edits). evalpipe's own is hashed
    once per process: the code that runs is the code imported when it started."""
    if package_dir == PACKAGE_DIR:
        return _own_fingerprint()
    return _fingerprint(package_dir)


@lru_cache(maxsize=1)
def _own_fingerprint() -> str:
    return _fingerprint(PACKAGE_DIR)


def _fingerprint(package_dir: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        h.update(path.relative_to(package_dir).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]
