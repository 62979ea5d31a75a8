"""Hydra's run-or-multirun decision without composing the whole config a second time.

Before it runs anything, Hydra 1.3 composes the full config once only to read
`hydra.mode` (`Hydra.get_mode`), then composes it again for the run: about 0.1 s of a
BM25 run's wall time. `hydra.mode` can only come from an override or from a config file
that sets it, so when neither can, the answer is known without composing: None, which
makes Hydra follow `-m` as usual. Anything else asks Hydra as before: an override that
names `hydra.mode` or `hydra.searchpath`, a YAML file with a `mode: RUN|MULTIRUN` line
in any of the config sources (the app's `conf/`, Hydra's own package configs, search
path plugins), or a source that cannot be read as files.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

_SETS_MODE = re.compile(r"\bmode\s*:\s*['\"]?(multirun|run)\b", re.IGNORECASE)
_ASKS_HYDRA = ("hydra.mode", "hydra.searchpath")


@lru_cache(maxsize=16)
def folder_sets_mode(folder: str) -> bool:
    """Whether any YAML file under `folder` could set `hydra.mode` (a `mode: RUN` line)."""
    for path in Path(folder).rglob("*.y*ml"):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return True  # cannot tell: let Hydra compose
        if _SETS_MODE.search(text):
            return True
    return False


def source_folders(sources: Iterable[Any]) -> list[str] | None:
    """The folders of Hydra's config sources; None when one is neither a folder nor empty."""
    folders = []
    for source in sources:
        scheme = source.scheme()
        if scheme == "structured":  # dataclasses registered in code: no files, and none of ours
            continue
        if scheme == "file":
            folders.append(source.path)
        elif scheme == "pkg":
            try:
                spec = importlib.util.find_spec(source.path.replace("/", "."))
            except (ImportError, ValueError):
                return None
            if spec is None or not spec.submodule_search_locations:
                return None
            folders.extend(spec.submodule_search_locations)
        else:
            return None
    return folders


def mode_is_unset(folders: Sequence[str] | None, overrides: Sequence[str]) -> bool:
    """True when neither the command line nor a config file can set `hydra.mode`."""
    if folders is None or any(a in o for o in overrides for a in _ASKS_HYDRA):
        return False
    return not any(folder_sets_mode(f) for f in folders)


def install() -> None:
    """Make `Hydra.get_mode` answer None without composing when `mode_is_unset`."""
    # lazy: hydra, omegaconf, yaml, ~141 ms
    from hydra._internal.hydra import Hydra

    original = Hydra.get_mode
    if getattr(original, "_evalpipe", False):
        return

    def get_mode(self: Any, config_name: str | None, overrides: list[str]) -> Any:
        try:
            folders = source_folders(self.config_loader.get_sources())
        except Exception:  # another Hydra's internals: ask it
            folders = None
        if mode_is_unset(folders, overrides):
            return None
        return original(self, config_name=config_name, overrides=overrides)

    get_mode._evalpipe = True  # type: ignore[attr-defined]
    Hydra.get_mode = get_mode  # type: ignore[method-assign]
