"""Asking a model one question, through the official client libraries.

Each backend turns a prompt into the model's text answer and the tokens it cost.
Retries with exponential backoff on 429, 5xx, timeouts and dropped connections are
the client libraries' own (`max_retries`, honouring Retry-After); what still fails
is raised to the caller, which records it against that one pair.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol

from evalpipe.judge.settings import JudgeSettings
from evalpipe.safety.errors import EvalpipeError

SYSTEM = "You are a careful relevance assessor. You answer with one JSON object and nothing else."
# Status codes after which no other pair can succeed either: stop asking instead of paying for errors.
FATAL_STATUS = (401, 403, 404)


@dataclass(frozen=True)
class Reply:
    text: str
    tokens_in: int
    tokens_out: int


class Backend(Protocol):
    name: str
    model: str

    def ask(self, prompt: str) -> Reply: ...


def _import(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError:
        raise EvalpipeError(
            f"judge={module} needs the {module!r} package: pip install -e '.[judge]'"
        ) from None


def is_fatal(exc: BaseException) -> bool:
    """An error no retry or other pair will fix: a bad key, no such model or endpoint, or a
    request the client library itself refuses (TypeError)."""
    return getattr(exc, "status_code", None) in FATAL_STATUS or isinstance(exc, TypeError)


class OpenAIChatBackend:
    """OpenAI-compatible chat completions: OpenAI, vLLM, llama.cpp server, Ollama, ..."""

    name = "openai"

    def __init__(self, settings: JudgeSettings):
        openai = _import("openai")
        self.model = settings.model
        self.max_tokens = settings.max_tokens
        self.temperature = settings.temperature
        self.client = openai.OpenAI(
            api_key=settings.resolved_api_key(),
            base_url=settings.base_url or None,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            default_headers=settings.headers or None,
        )

    def ask(self, prompt: str) -> Reply:
        resp = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
            max_tokens=self.max_tokens,
            temperature=self.temperature,
        )
        text = resp.choices[0].message.content if resp.choices else ""
        usage = resp.usage
        return Reply(
            text or "",
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
        )


class AnthropicBackend:
    """Anthropic's messages API."""

    name = "anthropic"

    def __init__(self, settings: JudgeSettings):
        anthropic = _import("anthropic")
        self.model = settings.model
        self.max_tokens = settings.max_tokens
        self.temperature = settings.temperature
        self.client = anthropic.Anthropic(
            api_key=settings.resolved_api_key(),
            base_url=settings.base_url or None,
            timeout=settings.timeout,
            max_retries=settings.max_retries,
            default_headers=settings.headers or None,
        )
        self.takes_temperature = "temperature" in inspect.signature(self.client.messages.create).parameters

    def ask(self, prompt: str) -> Reply:
        # Newer client releases dropped `temperature` from messages.create; send it only where accepted.
        extra = {"temperature": self.temperature} if self.takes_temperature else {}
        resp = self.client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=SYSTEM,
            messages=[{"role": "user", "content": prompt}],
            **extra,
        )
        text = "".join(getattr(block, "text", "") for block in resp.content or [])
        usage = resp.usage
        return Reply(
            text,
            int(getattr(usage, "input_tokens", 0) or 0),
            int(getattr(usage, "output_tokens", 0) or 0),
        )


BACKEND_CLASSES = {"openai": OpenAIChatBackend, "anthropic": AnthropicBackend}


def make_backend(settings: JudgeSettings) -> Backend:
    return BACKEND_CLASSES[settings.backend](settings)
