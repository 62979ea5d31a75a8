"""User-facing errors: bad input that should stop a run with exit code 2 and one clear line."""


class EvalpipeError(Exception):
    """Bad input (fixture, corpus, config). The message says where and how to fix it."""


class FixtureError(EvalpipeError):
    """An invalid fixture: the message names the fixture file, line and case ID."""
