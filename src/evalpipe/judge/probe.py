"""Is the judge there? One tiny request before the first case, as the tracking server is checked.

Without it an unreachable, hung or misconfigured judge is found out question by
question after every case has run: each one retried for seconds (minutes against a
hung server), then judged figures that judged nothing. The probe sends one
request of a few tokens with no retries and a hard deadline (`judge.probe_timeout`):
a 200 means the server answers, the key is accepted and the model exists. Anything
else is one line naming the server (credentials masked) and the likely fix.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from evalpipe.safety.errors import EvalpipeError
from evalpipe.safety.secrets import mask_text

PING = 'Answer with the JSON object {"relevant": true, "reason": "ping"}.'


class JudgeUnavailable(EvalpipeError):
    """The judge's server did not answer the probe; the message names it and says what to check."""


def _explain(exc: BaseException, settings: Any) -> str:
    status = getattr(exc, "status_code", None)
    name = type(exc).__name__
    detail = " ".join(str(exc).split())[:200] or name
    if status in (401, 403):
        var = settings.api_key_env or f"{settings.backend.upper()}_API_KEY"
        return f"rejected the key (HTTP {status}): export {var}=... with a key this server accepts"
    if status == 404:
        hint = "…/v1 for an OpenAI-compatible server" if settings.backend == "openai" else "no /v1"
        return (
            f"has no model {settings.model!r} or no such endpoint (HTTP 404: {detail}): "
            f"check judge.model and judge.base_url ({hint})"
        )
    if status is not None:
        return f"answered HTTP {status}: {detail}"
    if "timeout" in name.lower() or "timed out" in detail.lower():
        return f"did not answer within {settings.probe_timeout:g} s (judge.probe_timeout)"
    if "connection" in name.lower():
        return f"cannot be reached ({detail}): is it running? check judge.base_url"
    return f"failed: {name}: {detail}"


def probe(settings: Any) -> None:
    """Raise `JudgeUnavailable` unless the judge answers one tiny request within `probe_timeout`."""
    # lazy: evalpipe.judge.backends, ~13 ms
    from evalpipe.judge.backends import make_backend

    quick = replace(settings, timeout=settings.probe_timeout, max_retries=0, max_tokens=16)
    backend = make_backend(quick)  # importing the client library is not the server's time
    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            backend.ask(PING)
            outcome.append(None)
        except BaseException as exc:  # reported below, in the caller's thread
            outcome.append(exc)

    worker = threading.Thread(target=ask, name="evalpipe-judge-probe", daemon=True)
    worker.start()
    worker.join(settings.probe_timeout + 1.0)  # a hard deadline, whatever the client's timeouts do
    where = f"judge server {settings.server} ({settings.backend}:{settings.model})"
    if not outcome:
        why = f"did not answer within {settings.probe_timeout:g} s (judge.probe_timeout)"
    elif outcome[0] is None:
        return
    elif isinstance(outcome[0], EvalpipeError):
        raise outcome[0]
    else:
        why = _explain(outcome[0], settings)
    raise JudgeUnavailable(mask_text(f"{where} {why}"))
