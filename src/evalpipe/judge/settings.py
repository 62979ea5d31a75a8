"""The judge's configuration (the `judge` config group), as one frozen dataclass.

The group is flat (`judge.model=...`, `judge.pool=true`) because that is what users
type; Hydra instantiates this class from it, and the class checks the values once,
before any MLflow run exists, so a bad setting exits with code 2 and nothing half-done.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from evalpipe.safety import secrets
from evalpipe.safety.errors import EvalpipeError
from evalpipe.safety.secrets import mask_text

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
    headers: dict[str, str] | None = field(default=None, repr=False)  # extra HTTP headers (gateways)
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
    # false: a judge that cannot be reached before the first case degrades to strict-only figures.
    required: bool = True
    # true: a sweep may optimise a judged figure below full coverage (a lower bound).
    allow_partial: bool = False
    # Consecutive failed questions after which judging stops (the circuit breaker).
    max_failures: int = 5
    # Seconds the up-front probe (one tiny request, no retries) may take.
    probe_timeout: float = 5.0
    # Seconds to wait for another writer's lock on the cache before judging is given up.
    cache_timeout: float = 30.0
    # The judge's agreement with people (the JSON `evalpipe judge-batch` writes): judged figures of
    # a judge below the stated kappa floor are marked as such in the terminal, report.md and MLflow.
    agreement_file: str | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise EvalpipeError(f"judge.backend={self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if not str(self.model or "").strip():
            raise EvalpipeError("judge.model is empty: give the model name, e.g. judge.model=gpt-4o-mini")
        for name in ("excerpt_tokens", "concurrency", "max_tokens", "calibration_pairs", "max_failures"):
            self._check_int(name, 1)
        for name in ("max_calls", "max_retries", "seed"):
            self._check_int(name, 0)
        for name in ("pool", "calibrate", "required", "allow_partial"):
            if not isinstance(getattr(self, name), bool):
                raise EvalpipeError(f"judge.{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("timeout", "probe_timeout", "cache_timeout"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not value > 0:
                raise EvalpipeError(f"judge.{name} must be a positive number of seconds, got {value!r}")
        if isinstance(self.headers, Mapping) and not isinstance(self.headers, dict):  # a DictConfig
            object.__setattr__(self, "headers", {str(k): v for k, v in self.headers.items()})
        if self.headers is not None and not (
            isinstance(self.headers, dict) and all(isinstance(v, str) for v in self.headers.values())
        ):
            raise EvalpipeError("judge.headers must map header names to text, e.g. {X-Team: search}")

    def _check_int(self, name: str, minimum: int) -> None:
        value: Any = getattr(self, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise EvalpipeError(f"judge.{name} must be an integer >= {minimum}, got {value!r}")

    @property
    def cache_path(self) -> Path:
        root = Path(self.cache_dir).expanduser() if self.cache_dir else default_cache_dir()
        return root / "judgements.sqlite"

    @property
    def server(self) -> str:
        """The server as shown and keyed: the base URL with any credential masked, or the vendor's API."""

        return mask_text(str(self.base_url).rstrip("/")) if self.base_url else f"{self.backend}-api"

    def register_secrets(self) -> None:
        """Register every credential this judge may send, before the first request, so no text
        evalpipe writes (terminal, report, judgements.jsonl, MLflow, the cache) can carry one back.

        The key from `api_key_env` or `api_key`; the values of the environment variables the
        client libraries read on their own (OPENAI_*, ANTHROPIC_* with a secret name, e.g.
        ANTHROPIC_AUTH_TOKEN, and ANTHROPIC_CUSTOM_HEADERS); the values of secret-named `headers`; and the
        user:password of the base URL, and its base64 (HTTP Basic auth).
        """

        values: list[str] = [self.api_key or ""]
        if self.api_key_env:
            values.append(os.environ.get(self.api_key_env, ""))
        for name, value in os.environ.items():
            if name.startswith(("OPENAI_", "ANTHROPIC_")) and secrets.is_secret_key(name):
                values.append(value)
        custom = os.environ.get("ANTHROPIC_CUSTOM_HEADERS", "")
        for raw in [*custom.splitlines(), *(f"{k}: {v}" for k, v in (self.headers or {}).items())]:
            name, _, value = raw.partition(":")
            if secrets.is_secret_key(name.strip()):  # Authorization, X-Api-Key, Cookie, ...
                values += [value.strip(), *value.split()[1:]]  # "Bearer <token>": the token alone too
        for url in (self.base_url, os.environ.get("OPENAI_BASE_URL"), os.environ.get("ANTHROPIC_BASE_URL")):
            userinfo = str(url or "").partition("://")[2].partition("/")[0].rpartition("@")[0]
            if userinfo:  # sent as "Authorization: Basic base64(user:password)", which servers echo too
                plain = unquote(userinfo)
                values += [userinfo, *userinfo.split(":")[1:], *plain.split(":")[1:]]
                values.append(base64.b64encode(plain.encode()).decode())
        secrets.register(v for v in values if v)

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
