"""The environment variables evalpipe reads: each declared once here, read only through `value`.

A limit read with a bare `int(os.environ[...])` ended in a traceback on a typo, and a negative
limit was taken without a word (every file "too large"). Each setting now says its name, type,
allowed range, default and what it does; `value(name)` returns the typed, checked value or raises
an `EnvSettingError` whose one line names the variable, the value given and the allowed range.
`check_all()` runs at the entry (`evalpipe.__main__`), so a bad value stops every command before
it reads anything (exit 2). docs/failures.md's table of them is generated from `SETTINGS`
(`markdown_table`; tests/test_env_settings.py keeps the page and the declarations equal).

`EVALPIPE_SECRET_KEYS` is declared here and read by `safety.secrets` itself (any text is a valid
list of words; the error line masks with it, so it sits below this module).

Variables evalpipe sets for its own child processes (a sweep's parent run ID, the links a suite
or hold-out member is given) are listed in `INTERNAL`: not settings, never validated here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from evalpipe.safety.errors import EvalpipeError

#: The words a switch accepts, as what they mean.
SWITCH_WORDS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def _plain(x: float) -> str:
    """A bound as written by hand: 1048576, 0.000001, 10 (not 1.04858e+06)."""
    if x == int(x):
        return str(int(x))
    return format(x, "f").rstrip("0").rstrip(".")


class EnvSettingError(EvalpipeError):
    """An environment variable set to a value evalpipe cannot use; the message names it."""


@dataclass(frozen=True)
class EnvSetting:
    """One environment variable: `kind` is number (a float), integer, switch or words (a
    comma-separated list); numbers must lie in [low, high]."""

    name: str
    kind: str
    default: float | int | bool | str
    what: str
    low: float | None = None
    high: float | None = None
    unit: str = ""

    def allowed(self) -> str:
        """The allowed values in words, as the error line and the docs table say them."""
        if self.kind == "switch":
            return "1/true/yes/on or 0/false/no/off"
        if self.kind == "words":
            return "comma-separated words"
        noun = "an integer" if self.kind == "integer" else "a number"
        assert self.low is not None and self.high is not None
        return f"{noun} from {_plain(self.low)} to {_plain(self.high)}{self._unit()}"

    def _unit(self) -> str:
        return f" {self.unit}" if self.unit else ""

    def shown_default(self) -> str:
        """The default as the docs and the error line say it (`2048 MB`, `on`, `(none)`)."""
        if self.kind == "switch":
            return "on" if self.default else "off"
        if self.kind == "words":
            return str(self.default) or "(none)"
        return f"{_plain(float(self.default))}{self._unit()}"

    def parse(self, raw: str) -> float | int | bool | str:
        """`raw` as this setting's type, or an EnvSettingError naming the variable and the range."""
        text = raw.strip()
        if self.kind == "words":
            return ",".join(w.strip() for w in text.split(",") if w.strip())
        if self.kind == "switch":
            if text.lower() not in SWITCH_WORDS:
                raise self._bad(raw)
            return SWITCH_WORDS[text.lower()]
        try:
            number = float(text)
        except ValueError:
            raise self._bad(raw) from None
        if not math.isfinite(number):
            raise self._bad(raw)
        if self.kind == "integer":
            if number != int(number):
                raise self._bad(raw)
            number = int(number)
        assert self.low is not None and self.high is not None
        if not self.low <= number <= self.high:
            raise self._bad(raw)
        return number

    def _bad(self, raw: str) -> EnvSettingError:
        return EnvSettingError(
            f"environment variable {self.name}={raw!r} is not {self.allowed()} (default "
            f"{self.shown_default()}): fix it or unset it (unset {self.name})"
        )


SETTINGS: tuple[EnvSetting, ...] = (
    EnvSetting(
        "EVALPIPE_MAX_FILE_MB",
        "number",
        2048,
        "largest input file read whole (fixture, qrels, run_info.json, baseline), and a gzip's size unpacked",
        low=0.000001,
        high=1048576,
        unit="MB",
    ),
    EnvSetting(
        "EVALPIPE_MAX_LINE_MB",
        "number",
        64,
        "longest line a line reader accepts (a corpus unit, a run-file or qrels line)",
        low=0.000001,
        high=1048576,
        unit="MB",
    ),
    EnvSetting(
        "EVALPIPE_MAX_YAML_DEPTH",
        "integer",
        100,
        "deepest nesting of mappings and lists in a YAML input (PyYAML recurses; deeper than 300 "
        "hits Python's recursion limit)",
        low=1,
        high=300,
        unit="levels",
    ),
    EnvSetting(
        "EVALPIPE_STORE_LOCK_WAIT_S",
        "number",
        10,
        "how long a run waits for a SQLite tracking store locked by another writer before exit 2",
        low=0,
        high=3600,
        unit="s",
    ),
    EnvSetting(
        "EVALPIPE_UPLOAD_WORKER",
        "switch",
        True,
        "start the warm upload worker (imports MLflow and uploads on the other core); off: this process",
    ),
    EnvSetting(
        "EVALPIPE_SECRET_KEYS",
        "words",
        "",
        "extra key-name words whose values are masked everywhere (as config secret_keys)",
    ),
)

BY_NAME: dict[str, EnvSetting] = {s.name: s for s in SETTINGS}

#: Set by evalpipe for its own child processes (sweep jobs, suite and hold-out members, Ray
#: workers): not user settings, not validated here (tracking.sweep_job reads them).
INTERNAL: tuple[str, ...] = (
    "EVALPIPE_PARENT_RUN_ID",
    "EVALPIPE_SWEEP_ID",
    "EVALPIPE_SWEPT_KEYS",
    "EVALPIPE_LINK_PARENT",
    "EVALPIPE_LINK_SWEEP",
    "EVALPIPE_LINK_ROLE",
    "EVALPIPE_LINK_TAGS",
)


def value(name: str, environ: Mapping[str, str] | None = None) -> float | int | bool | str:
    """The setting `name` from the environment (its default when unset or empty), checked."""
    setting = BY_NAME[name]
    raw = (os.environ if environ is None else environ).get(name)
    if raw is None or raw.strip() == "":
        return setting.default
    return setting.parse(raw)


def number(name: str) -> float:
    """A number or integer setting as a float (raises EnvSettingError when it is bad)."""
    return float(value(name))  # type: ignore[arg-type]


def switch(name: str) -> bool:
    return bool(value(name))


def check_all(environ: Mapping[str, str] | None = None) -> None:
    """Every declared setting that is set, checked: the first bad one raises EnvSettingError."""
    for setting in SETTINGS:
        value(setting.name, environ)


def markdown_table() -> list[str]:
    """The table docs/failures.md shows (tests/test_env_settings.py compares the page with it)."""
    out = ["| variable | allowed | default | what it does |", "|---|---|---|---|"]
    for s in SETTINGS:
        out.append(f"| `{s.name}` | {s.allowed()} | {s.shown_default()} | {s.what} |")
    return out
