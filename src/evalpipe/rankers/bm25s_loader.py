"""Import bm25s without numba: a third of a second off every BM25 run.

bm25s imports numba at import time when it is installed (0.35 s, most of bm25s's
import cost) only to offer its optional numba backend and JIT scorer. evalpipe uses
bm25s's default numpy backend and asks it for full score vectors
(`get_scores_from_ids`), so numba is never called. Hiding numba while bm25s
imports makes bm25s take its documented no-numba path; numba stays importable for
everything else (ranx imports it normally later in the same process).
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


def import_bm25s() -> ModuleType:
    """The bm25s package, imported (the first time) with numba hidden unless already loaded."""
    loaded = sys.modules.get("bm25s")
    if loaded is not None:
        return loaded
    hide = "numba" not in sys.modules
    if hide:
        sys.modules["numba"] = None  # type: ignore[assignment]  # `import numba` -> ImportError
    try:
        return importlib.import_module("bm25s")
    finally:
        if hide and sys.modules.get("numba", 0) is None:
            del sys.modules["numba"]
