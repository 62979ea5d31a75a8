"""Fixtures loaded once per process, so the points of a sweep share one parsed fixture and corpus.

Every point of a Hydra multirun calls the app again with its own config; without
this each point re-read and re-parsed the fixture YAML and the corpus JSONL (the
largest per-point cost of a BM25 sweep on the gold fixture after MLflow itself).
An entry is reused only while the files it was read from are unchanged (path, size
and modification time of the fixture file, the corpus file, or every file of a
BEIR folder), so editing a fixture between two runs of one process is still seen.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

#: Fixtures kept (a sweep over fixtures alternates between a few; large corpora are big).
MEMO_SIZE = 2

_MEMO: OrderedDict[str, tuple[Any, tuple]] = OrderedDict()


def _files(paths: Iterable[str]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += sorted(f for f in path.rglob("*") if f.is_file())
        else:
            out.append(path)
    return out


def _stamp(files: list[Path]) -> tuple:
    stamp = []
    for f in files:
        try:
            st = f.stat()
            stamp.append((str(f), st.st_size, st.st_mtime_ns))
        except OSError:
            stamp.append((str(f), None, None))
    return tuple(stamp)


def sources(fixture: Any) -> list[str]:
    """The files and folders a loaded fixture was read from (its own source and its corpus's)."""
    found = [getattr(fixture, "source", ""), getattr(getattr(fixture, "corpus", None), "source", "")]
    return [s for s in found if s]


def load_once(config: Any, build: Callable[[], Any]) -> Any:
    """`build()`'s fixture for this fixture `config` (a plain, resolved mapping), reused while its
    files are unchanged. A fixture that names no source file is never memoised."""
    key = json.dumps([os.getcwd(), config], sort_keys=True, default=str)
    hit = _MEMO.get(key)
    if hit is not None:
        fixture, stamp = hit
        if _stamp(_files(sources(fixture))) == stamp:
            _MEMO.move_to_end(key)
            return fixture
        del _MEMO[key]
    fixture = build()
    files = _files(sources(fixture))
    if files:
        _MEMO[key] = (fixture, _stamp(files))
        while len(_MEMO) > MEMO_SIZE:
            _MEMO.popitem(last=False)
    return fixture


def clear() -> None:
    _MEMO.clear()
