"""The judge's configuration (the `judge` config group), as one frozen dataclass.

The group is flat (`judge.model=...`, `judge.pool=true`) because that is what users
type; Hydra instantiates this class from it, and the class checks the values once,
before any MLflow run exists, so a bad setting exits with code 2 and nothing half-done.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalpipe.safety.errors import EvalpipeError

BACKENDS = ("openai", "anthropic")


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "evalpipe" / "judge"


@dataclass(frozen=True)
class JudgeSettings:
    """Which model judges, with which prompt, how much, and where verdicts are cached."""

    backend: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    api_key: str | None = field(default=None, repr=False)  # prefer api_key_env; never logged by us
    prompt: str = "relevance_v1"
    excerpt_tokens: int = 400
    pool: bool = False
    max_calls: int = 500
    concurrency: int = 4
    timeout: float = 60.0
    max_retries: int = 4
    max_tokens: int = 200
    temperature: float = 0.0
    cache_dir: str | None = None
    calibrate: bool = False
    calibration_pairs: int = 40
    seed: int = 0

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise EvalpipeError(f"judge.backend={self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if not str(self.model or "").strip():
            raise EvalpipeError("judge.model is empty: give the model name, e.g. judge.model=gpt-4o-mini")
        for name in ("excerpt_tokens", "concurrency", "max_tokens", "calibration_pairs"):
            self._check_int(name, 1)
        for name in ("max_calls", "max_retries", "seed"):
            self._check_int(name, 0)
        for name in ("pool", "calibrate"):
            if not isinstance(getattr(self, name), bool):
                raise EvalpipeError(f"judge.{name} must be true or false, got {getattr(self, name)!r}")
        if not isinstance(self.timeout, int | float) or isinstance(self.timeout, bool) or self.timeout <= 0:
            raise EvalpipeError(f"judge.timeout must be a positive number of seconds, got {self.timeout!r}")

    def _check_int(self, name: str, minimum: int) -> None:
        value: Any = getattr(self, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise EvalpipeError(f"judge.{name} must be an integer >= {minimum}, got {value!r}")

    @property
    def cache_path(self) -> Path:
        root = Path(self.cache_dir).expanduser() if self.cache_dir else default_cache_dir()
        return root / "judgements.sqlite"

    def resolved_api_key(self) -> str:
        """The key from `api_key_env` (or `api_key`); a local server without keys gets a placeholder.

        The client libraries refuse to start without some key, while vLLM or Ollama
        ignore it; a hosted API (no base_url) without a key is a configuration error
        better reported now than as a 401 on every pair.
        """
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        key = key or self.api_key
        if key:
            return key
        if self.base_url:
            return "no-key"
        var = self.api_key_env or f"{self.backend.upper()}_API_KEY"
        raise EvalpipeError(
            f"judge={self.backend} needs an API key: export {var}=... "
            f"(judge.api_key_env names the variable), or point judge.base_url at a local server"
        )
