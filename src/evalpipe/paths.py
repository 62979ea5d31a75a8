"""Resolving user-given paths the same way from the CLI, tests and sweeps."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def resolve_path(path: str | Path, base: str | Path | None = None) -> Path:
    """Resolve `path`: absolute as is; else relative to `base`, the working directory, then the project root.

    The project-root fallback lets `fixture=gold` work from any directory in an
    editable install, where `fixtures/` lives beside `src/`.
    """
    p = Path(path).expanduser()
    if p.is_absolute():
        return p
    candidates = [Path(base) / p] if base is not None else []
    candidates += [Path.cwd() / p, PROJECT_ROOT / p]
    for c in candidates:
        try:
            if c.exists():
                return _resolved(c)
        except OSError:  # e.g. a name too long: the reader says what is wrong with it
            continue
    # Not there: the path as given, made absolute but not resolved, so that the error can say
    # what it is (a broken symbolic link, a link loop) rather than where a link pointed.
    return Path(os.path.abspath(candidates[0]))


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # a symbolic link loop: left for the reader's error to name
        return Path(os.path.abspath(path))
