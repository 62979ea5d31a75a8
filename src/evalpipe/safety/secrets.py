"""The one rule for what is secret, and the masking of it wherever evalpipe writes.

Why one module: a secret leaks through the one writer that forgot to mask, so every
writer (MLflow params/tags/run names, config files, Hydra's own `.hydra/` files,
report.md, run.trec, sweep summaries, the terminal) goes through `mask_config` or
`mask_text` here.

The rule:
- A config key is secret when the last word of its name (split on `.`, `_`, `-`
  and camelCase) is a secret word (`key`, `token`, `secret`, `password`, `passwd`,
  `credential(s)`, `auth`, `authorization`, `apikey`, ...), or any word of it is
  one of the strong words (`secret`, `password`, `auth`, ...). So `ranker.api_key`,
  `tracking.token`, `ranker.headers.Authorization` and `auth_header` are secret but
  `ks`, `keywords` and `token_encoding` are not. Its value is written as `***`.
- The `user:password@` part of any URL in any string value is written as `***@`.
- `${oc.env:VAR}` interpolations are written unresolved (the environment is where
  secrets are meant to live, so its values never reach a file).
- Values of secret keys (4 characters or more) are remembered by `register` and
  replaced by `***` in any text written afterwards (run names, reports, messages).

Extend it with more key-name words: the `secret_keys` config list
(`secret_keys=[tenant,sig]`) or the `EVALPIPE_SECRET_KEYS` environment variable
(comma-separated); both add to the built-in words.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "bearer",
        "cookie",
    }
)
# Words that make a key secret wherever they appear in it (`auth_header`, `password_file`...);
# the others only as the key's last word (`api_key`, `hf_token`, but not `token_encoding`).
STRONG_WORDS = frozenset(
    {"secret", "password", "passwd", "credential", "credentials", "auth", "authorization"}
)
ENV_WORDS = "EVALPIPE_SECRET_KEYS"
MIN_VALUE_LEN = 4  # shorter values are masked under their key only (replacing "1" everywhere is noise)

# `\\?` : Hydra writes overrides escaped (`http\\://user\\:pass@host`) in overrides.yaml and logs.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*\\?://)(?P<userinfo>[^/@\s'\"]+)@")
_ENV_INTERP = re.compile(r"\$\{oc\.env:")
_registered: set[str] = set()
_extra_words: set[str] = set()


def _words() -> frozenset[str]:
    env = {w.strip().lower() for w in os.environ.get(ENV_WORDS, "").split(",") if w.strip()}
    return SECRET_WORDS | env | _extra_words


def key_parts(key: str) -> list[str]:
    """`ranker.headers.apiKey` -> [ranker, headers, api, key]; `x-auth-token` -> [x, auth, token]."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", str(key))
    return [p.lower() for p in re.split(r"[^A-Za-z0-9]+", spaced) if p]


def is_secret_key(key: str) -> bool:
    """Whether a (dotted) config key names a secret (see the module docstring for the rule)."""
    parts = key_parts(str(key).rsplit(".", 1)[-1])
    if not parts:
        return False
    words = _words()
    return parts[-1] in words or "".join(parts) in words or any(p in STRONG_WORDS for p in parts)


def add_secret_words(words: Iterable[str]) -> None:
    """Extra key-name words (the `secret_keys` config list)."""
    _extra_words.update(str(w).strip().lower() for w in words if str(w).strip())


def register(values: Iterable[Any]) -> None:
    """Remember secret values so `mask_text` hides them in any later text."""
    for v in values:
        text = str(v) if v is not None else ""
        if len(text) >= MIN_VALUE_LEN:
            _registered.add(text)


_KEY_VALUE = re.compile(r"(?<![\w.])(?P<key>[+~]?[A-Za-z_][\w.-]*)=(?P<value>[^\s,;'\"]+)")


def _mask_pair(m: re.Match[str]) -> str:
    if is_secret_key(m.group("key").lstrip("+~")) and not m.group("value").startswith("${oc.env:"):
        return f"{m.group('key')}={MASK}"
    return m.group(0)


def mask_text(text: str) -> str:
    """Mask URL credentials, `secret_key=value` pairs (command-line overrides) and every
    registered secret value in free text."""
    if not text:
        return text
    out = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", str(text))
    if "=" in out:
        out = _KEY_VALUE.sub(_mask_pair, out)
    for value in sorted(_registered, key=len, reverse=True):
        if value in out:
            out = out.replace(value, MASK)
    return out


def _mask_value(key: str, value: Any, raw: Any) -> Any:
    if is_secret_key(key) and value is not None and value != "":
        return MASK
    if isinstance(raw, str) and _ENV_INTERP.search(raw):
        return mask_text(raw)  # logged unresolved
    if isinstance(value, str):
        return mask_text(value)
    return value


def mask_config(resolved: Any, raw: Any = None, prefix: str = "") -> Any:
    """A copy of a config container with secrets masked.

    `resolved` is the resolved container; `raw` the same container unresolved
    (`OmegaConf.to_container(cfg, resolve=False)`), used to keep `${oc.env:...}`
    values unresolved. Lists are masked element by element under their key.
    """
    if isinstance(resolved, Mapping):
        raw_map = raw if isinstance(raw, Mapping) else {}
        out = {}
        for k, v in resolved.items():
            key = f"{prefix}{k}"
            if is_secret_key(key) and not isinstance(v, Mapping) and v not in (None, ""):
                out[k] = MASK
            else:
                out[k] = mask_config(v, raw_map.get(k), key + ".")
        return out
    if isinstance(resolved, list | tuple):
        raw_list = (
            raw if isinstance(raw, list | tuple) and len(raw) == len(resolved) else [None] * len(resolved)
        )
        return [mask_config(v, r, prefix) for v, r in zip(resolved, raw_list, strict=True)]
    return _mask_value(prefix.rstrip("."), resolved, raw)


def secret_values(resolved: Any, raw: Any = None, prefix: str = "") -> list[str]:
    """Values that must never be written: those of secret keys, and `${oc.env:...}` values."""
    out: list[str] = []
    if isinstance(resolved, Mapping):
        raw_map = raw if isinstance(raw, Mapping) else {}
        for k, v in resolved.items():
            key = f"{prefix}{k}"
            if is_secret_key(key) and not isinstance(v, Mapping):
                out += [str(x) for x in (v if isinstance(v, list) else [v]) if x not in (None, "")]
            else:
                out += secret_values(v, raw_map.get(k), key + ".")
    elif isinstance(resolved, list | tuple):
        for v in resolved:
            out += secret_values(v, None, prefix)
    elif isinstance(raw, str) and _ENV_INTERP.search(raw) and isinstance(resolved, str):
        name = raw.split("${oc.env:", 1)[1].split(",", 1)[0].split("}", 1)[0]
        if is_secret_key(name):  # e.g. ${oc.env:OPENAI_API_KEY} under any key name
            out.append(resolved)
    return out


def mask_mapping(values: Mapping[str, Any]) -> dict[str, str]:
    """Flat {name: value} (MLflow params or tags): secret names get `***`, other values `mask_text`."""
    return {
        k: MASK if is_secret_key(k) and v not in (None, "") else mask_text(str(v)) for k, v in values.items()
    }


def mask_override(item: str) -> str:
    """`ranker.api_key=abc` -> `ranker.api_key=***`; URLs and registered values masked in the rest."""
    key, sep, value = str(item).partition("=")
    if sep and is_secret_key(key.strip().lstrip("+~")) and value and not value.startswith("${oc.env:"):
        return f"{key}={MASK}"
    return mask_text(item)


class MaskingFilter:
    """Masks a log record's message (launcher lines such as `#0 : ranker.api_key=...`)."""

    def filter(self, record: Any) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        masked = mask_text(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


def mask_logging() -> None:
    """Mask every log record as it is made (a record factory: Hydra reconfigures the handlers for
    each job, a factory survives that), so no handler, console or file, sees a secret."""
    # lazy: standard library, ~11 ms
    import logging

    current = logging.getLogRecordFactory()
    if getattr(current, "evalpipe_masking", False):
        return
    masking = MaskingFilter()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = current(*args, **kwargs)
        masking.filter(record)
        return record

    factory.evalpipe_masking = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


def register_config(cfg: Any) -> tuple[Any, Any]:
    """Register the secrets of an OmegaConf config; return its (resolved, raw) containers, resolved
    None when an interpolation cannot resolve (the raw values are registered then).

    Also reads the `secret_keys` list of the config (extra key-name words). The one place the
    masking layer reads an OmegaConf config: the entry hands it the Hydra config once, and keeps
    the containers it returns (`preflight.check(..., containers=...)`).
    """
    from omegaconf import OmegaConf  # lazy: omegaconf, ~60 ms, for whoever masks without a config

    raw = OmegaConf.to_container(cfg, resolve=False)
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
    except Exception:
        resolved = None
    known = raw if resolved is None else resolved
    if isinstance(known, Mapping) and isinstance(known.get("secret_keys"), list):
        add_secret_words(known["secret_keys"])
    register(secret_values(known, raw))
    return resolved, raw


_ASSIGNMENT = re.compile(
    r"^(?P<lead>\s*(?:-\s+)?)(?P<key>[+~]?[A-Za-z_][\w.-]*)(?P<sep>\s*[:=]\s*)(?P<value>\S.*)$"
)


def mask_lines(text: str) -> str:
    """Mask a YAML file or a list of overrides as text: `key: value` / `- key=value` lines whose key
    is secret get `***`; then URLs and registered values everywhere (`mask_text`)."""
    out = []
    for line in str(text).splitlines(keepends=True):
        body = line.rstrip("\r\n")
        m = _ASSIGNMENT.match(body)
        if m and is_secret_key(m.group("key").lstrip("+~")):
            value = m.group("value").strip()
            if value not in ("null", "''", '""', "{}", "[]", "???") and not value.startswith("${oc.env:"):
                line = f"{m.group('lead')}{m.group('key')}{m.group('sep')}{MASK}" + line[len(body) :]
        out.append(line)
    return mask_text("".join(out))


def mask_file(path: Any) -> None:
    """Rewrite a text file with `mask_lines` (atomically; untouched if nothing changes)."""
    # lazy: standard library, ~7 ms
    from pathlib import Path

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    masked = mask_lines(text)
    if masked != text:
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        tmp.write_text(masked, encoding="utf-8")
        os.replace(tmp, p)
