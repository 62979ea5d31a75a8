"""User-facing errors: bad input that should stop a run with exit code 2 and one clear line."""


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
