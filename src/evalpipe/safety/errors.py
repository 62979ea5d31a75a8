"""User-facing errors: bad input that should stop a run with exit code 2 and one clear line.

Every error line evalpipe prints goes through `print_error` (or `fail`, which also exits): one
place that masks secrets (URL credentials, `secret_key=value` pairs, registered secret values,
and the values of secret-looking keys given on the command line) and writes
`evalpipe: error: <message>` (`evalpipe compare: error: ...` for a command's own `prog`) to stderr.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

from evalpipe.safety.secrets import MASK, is_secret_key, mask_text

#: Bad input: the exit code of every one-line error that is the user's to fix.
EXIT_BAD_INPUT = 2


class EvalpipeError(Exception):
    """Bad input (fixture, corpus, config). The message says where and how to fix it."""


class FixtureError(EvalpipeError):
    """An invalid fixture: the message names the fixture file, line and case ID."""


def shown(text: object) -> str:
    """User data as it should appear in a message: as is when every character is visible, else
    quoted with Python's escapes, so an ID with a trailing space, a tab, a zero-width or
    non-breaking space does not look identical to the ID it fails to match."""
    value = str(text)
    plain = value.isprintable() and value == value.strip() and "  " not in value
    return value if plain and value else repr(value)


def masked(message: object, argv: Sequence[str] = ()) -> str:
    """`message` with secrets masked: `mask_text`, and the values of secret-looking keys in `argv`.

    Hydra quotes overrides back (`... use +ranker.api_key=SEKRET`), so the values of secret-looking
    keys given on the command line are masked too when the caller passes its command line.
    """
    text = str(message)
    for arg in argv:
        key, eq, value = arg.lstrip("+~").partition("=")
        if eq and value and is_secret_key(key.rsplit(".", 1)[-1]):
            text = text.replace(value, MASK)
    return mask_text(text)


def error_line(message: object, prog: str = "evalpipe", argv: Sequence[str] = ()) -> str:
    """`<prog>: error: <message>`, secrets masked (see `masked`)."""
    return f"{prog}: error: {masked(message, argv)}"


def print_error(
    message: object, prog: str = "evalpipe", argv: Sequence[str] = (), more: Sequence[str] = ()
) -> None:
    """Print the error line to stderr; `more` lines follow as `<prog>: <line>` (masked too)."""
    print(error_line(message, prog, argv), file=sys.stderr)
    for line in more:
        print(f"{prog}: {masked(line, argv)}", file=sys.stderr)


def fail(
    message: object, code: int = EXIT_BAD_INPUT, prog: str = "evalpipe", argv: Sequence[str] = ()
) -> NoReturn:
    """Print the error line and exit with `code` (2: bad input), never a traceback."""
    print_error(message, prog, argv)
    raise SystemExit(code) from None  # the cause was told in the line
