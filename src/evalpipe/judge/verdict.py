"""Reading a judge's answer: a small JSON object, found and checked robustly.

Models wrap JSON in code fences, add a sentence before it, or answer "Yes".
Anything that is not an object with a boolean-like `relevant` is a malformed
answer: an error for that pair (reported, retried on the next run), never a
guess and never a crash.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

TRUE = {"true", "yes", "relevant", "1"}
FALSE = {"false", "no", "not relevant", "irrelevant", "0"}
_DECODER = json.JSONDecoder()


class MalformedAnswer(ValueError):
    """The model answered, but not with the JSON the prompt asks for."""


@dataclass(frozen=True)
class Verdict:
    relevant: bool
    reason: str


def _flag(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in TRUE | FALSE:
        return value.strip().lower() in TRUE
    return None


def parse_answer(text: str) -> Verdict:
    """The first JSON object in `text` that has a boolean-like `relevant` field."""
    text = text or ""
    start = text.find("{")
    while start >= 0:
        try:
            data, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            data = None
        start = text.find("{", start + 1)
        if isinstance(data, dict) and "relevant" in data:
            flag = _flag(data["relevant"])
            if flag is None:
                break
            reason = " ".join(str(data.get("reason") or "").split())
            return Verdict(flag, reason[:500])
    snippet = " ".join(text.split())[:120]
    raise MalformedAnswer(f'expected {{"relevant": true|false, "reason": "..."}}, got {snippet!r}')
