"""Writing a cache file so that no reader ever sees half of it.

The on-disk caches (embeddings, BM25 tokens, fixture difficulty, the tiktoken snapshot)
are shared by concurrent processes: the jobs of a joblib or Ray sweep, two runs in two
terminals. Each file is written to a temporary file in its own directory, synced, made
readable by others (mkstemp makes 0600; a shared cache must not be private to whoever
wrote it first) and moved into place with `os.replace`, atomic on POSIX and Windows. A
failed write leaves no temporary file behind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def write_atomic(final: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Call `write(fh)` on a binary temp file beside `final`, then put it at `final` in one step."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
