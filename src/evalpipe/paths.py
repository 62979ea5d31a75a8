"""Resolving user-given paths the same way from the CLI, tests and sweeps."""

from __future__ import annotations

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
        if c.exists():
            return c.resolve()
    return candidates[0].resolve()
