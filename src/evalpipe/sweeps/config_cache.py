"""Parse each config file of a sweep once, not once per job.

Hydra composes every job of a sweep from scratch: for each one it reads and parses the
primary config and every file of its defaults list again (about 17 YAML files here, 1.8 ms
each through PyYAML), most of what composing a job costs. `install()` keeps what a file
source parsed, keyed by the file's path, size and modification time (an edited file is
parsed again), and hands each caller its own deep copy (about 0.3 ms), because Hydra edits
the configs it loads while composing. Package sources (Hydra's own `pkg://` configs) do
not change while a process runs and are kept by path.
"""

from __future__ import annotations

import copy
import os
from typing import Any

#: At most this many parsed files are kept (a sweep reads a few dozen).
KEEP = 512

_parsed: dict[tuple[Any, ...], Any] = {}


def _copy(result: Any) -> Any:
    # lazy: standard library, ~11 ms
    from dataclasses import replace

    return replace(result, config=copy.deepcopy(result.config), header=dict(result.header))


def _cached(load: Any, key_of: Any) -> Any:
    def load_config(self: Any, config_path: str) -> Any:
        key = key_of(self, config_path)
        if key is None:
            return load(self, config_path)
        kept = _parsed.get(key)
        if kept is None:
            kept = load(self, config_path)  # raises as Hydra's does (not found, bad YAML)
            if len(_parsed) >= KEEP:
                _parsed.clear()
            _parsed[key] = kept
        return _copy(kept)

    load_config._evalpipe_cached = True  # type: ignore[attr-defined]
    return load_config


def _file_key(source: Any, config_path: str) -> tuple[Any, ...] | None:
    path = os.path.realpath(os.path.join(source.path, source._normalize_file_name(config_path)))
    try:
        stat = os.stat(path)
    except OSError:
        return None  # Hydra's own load says what is missing
    return ("file", path, stat.st_size, stat.st_mtime_ns)


def _package_key(source: Any, config_path: str) -> tuple[Any, ...]:
    return ("pkg", source.path, source._normalize_file_name(config_path))


def install() -> None:
    """Patch Hydra's file and package config sources (once per process)."""
    # lazy: hydra, omegaconf, yaml, ~286 ms
    from hydra._internal.core_plugins.file_config_source import FileConfigSource
    from hydra._internal.core_plugins.importlib_resources_config_source import (
        ImportlibResourcesConfigSource,
    )

    for source, key_of in ((FileConfigSource, _file_key), (ImportlibResourcesConfigSource, _package_key)):
        if not getattr(source.load_config, "_evalpipe_cached", False):
            source.load_config = _cached(source.load_config, key_of)  # type: ignore[method-assign]
