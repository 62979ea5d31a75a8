"""An on-disk cache of corpus embeddings, so a re-run or a sweep over other settings skips the model pass.

Embedding a corpus is by far the slowest step of a dense run and its result depends
only on the texts fed to the model and on the model itself, so it is keyed by a
sha256 over exactly those inputs (see `EmbeddingCache.key`). Entries are plain
`.npy` files with a `.json` sidecar that records what went into the key, which
makes the cache inspectable and safe to delete at any time.

Writers never leave a half-written file under the final name: each write goes to a
temporary file in the same directory and is moved into place with `os.replace`
(atomic on POSIX and Windows), so concurrent runs of a sweep can share one cache.
A file that still fails to load (truncated by a full disk, edited by hand) is
treated as a miss and overwritten by the next save.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalpipe.atomic import write_atomic

#: Bumped when the key recipe or file layout changes, so old entries simply miss.
CACHE_FORMAT = 1


def _feed(h: Any, value: Any) -> None:
    """Hash `value` unambiguously: every item is length-prefixed, so ["ab"] and ["a", "b"] differ."""
    if isinstance(value, str | bytes):
        data = value.encode("utf-8") if isinstance(value, str) else value
        h.update(b"s%d:" % len(data))
        h.update(data)
    elif isinstance(value, Sequence):
        h.update(b"l%d:" % len(value))
        for item in value:
            _feed(h, item)
    else:
        data = json.dumps(value, sort_keys=True, default=str).encode("utf-8")
        h.update(b"j%d:" % len(data))
        h.update(data)


def texts_sha256(texts: Sequence[str]) -> str:
    """Digest of an ordered list of texts (what the sidecar records instead of the texts themselves)."""
    h = hashlib.sha256()
    _feed(h, list(texts))
    return h.hexdigest()


def model_fingerprint(model_dir: str | Path) -> str:
    """A cheap content fingerprint of a local model directory.

    Hashes the small config/tokenizer files in full and, for weight files, their
    size plus the first and last MiB: a fine-tuned copy saved over the same path
    changes it, while hashing the whole multi-hundred-MB weights on every run would
    cost more than a cache hit saves. Paths are not included, so a moved venv or a
    reinstalled package still hits.
    """
    root = Path(model_dir)
    h = hashlib.sha256()
    weight_suffixes = {".safetensors", ".bin", ".onnx", ".pt", ".pth", ".h5", ".msgpack"}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".") or path.suffix == ".md":
            continue
        _feed(h, rel)
        size = path.stat().st_size
        with path.open("rb") as fh:
            if path.suffix in weight_suffixes and size > (2 << 20):
                _feed(h, str(size))
                h.update(fh.read(1 << 20))
                fh.seek(size - (1 << 20))
                h.update(fh.read(1 << 20))
            else:
                h.update(fh.read())
    return h.hexdigest()


class EmbeddingCache:
    """A directory of `<key>.npy` (float32 matrix) + `<key>.json` (what the key was made of)."""

    def __init__(self, dir: str | Path):
        self.dir = Path(dir)

    @staticmethod
    def key(**parts: Any) -> str:
        """sha256 over the named parts (order-independent in the names, order-dependent within lists).

        Callers pass every input that changes the embeddings, e.g. `corpus_sha256`,
        `texts` (the list of unit texts after templating), `model`, `model_fingerprint`,
        `template`, `max_seq_length`, `normalize`.
        """
        h = hashlib.sha256()
        _feed(h, f"evalpipe-embeddings-v{CACHE_FORMAT}")
        for name in sorted(parts):
            _feed(h, name)
            _feed(h, parts[name])
        return h.hexdigest()

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.npy"

    def meta_path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def load(self, key: str) -> np.ndarray | None:
        """The cached matrix, or None on a miss; an unreadable or inconsistent entry is a miss."""
        path = self.path(key)
        if not path.is_file():
            return None
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        if array.ndim != 2 or array.dtype != np.float32 or not np.isfinite(array).all():
            return None
        try:
            meta = json.loads(self.meta_path(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            meta = None
        if isinstance(meta, dict) and "shape" in meta and list(meta["shape"]) != list(array.shape):
            return None
        return array

    def save(self, key: str, array: np.ndarray, meta: Mapping[str, Any] | None = None) -> Path:
        """Store `array` under `key` atomically and return the `.npy` path.

        Raises OSError when the directory is not writable; callers decide whether that matters.
        """
        array = np.ascontiguousarray(array, dtype=np.float32)
        if array.ndim != 2:
            raise ValueError(f"embedding cache expects a 2-D matrix, got shape {array.shape}")
        self.dir.mkdir(parents=True, exist_ok=True)
        sidecar = {
            **(meta or {}),
            "key": key,
            "format": CACHE_FORMAT,
            "shape": list(array.shape),
            "dtype": "float32",
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        write_atomic(self.path(key), lambda fh: np.save(fh, array, allow_pickle=False))
        payload = json.dumps(sidecar, indent=2, sort_keys=True, default=str).encode("utf-8")
        write_atomic(self.meta_path(key), lambda fh: fh.write(payload))
        return self.path(key)
