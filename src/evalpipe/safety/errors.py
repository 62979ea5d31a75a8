"""User-facing errors: bad input that should stop a run with exit code 2 and one clear line."""

import unicodedata


class EvalpipeError(Exception):
    """Bad input (fixture, corpus, config). The message says where and how to fix it."""


class FixtureError(EvalpipeError):
    """An invalid fixture: the message names the fixture file, line and case ID."""


def shown(text: object) -> str:
    """User data as it should appear in a message: as is when every character is visible, else
    quoted with Python's escapes, so an ID with a trailing space, a tab, a zero-width or
    non-breaking space does not look identical to the ID it fails to match."""
    value = str(text)
    if unicodedata.normalize("NFC", value) != value:  # combining marks: é as e + U+0301
        return ascii(value)
    plain = value.isprintable() and value == value.strip() and "  " not in value
    return value if plain and value else repr(value)


def normalisation_hint(given: str, others: object) -> str:
    """A note when `given` equals one of `others` once both are NFC-normalised (they look the same
    on screen and are different strings), else ""."""
    nfc = unicodedata.normalize("NFC", given)
    for other in others:  # type: ignore[attr-defined]
        other = str(other)
        if other != given and unicodedata.normalize("NFC", other) == nfc:
            form_given = (
                "NFC" if given == nfc else "NFD" if unicodedata.is_normalized("NFD", given) else "mixed"
            )
            form_other = (
                "NFC" if other == nfc else "NFD" if unicodedata.is_normalized("NFD", other) else "mixed"
            )
            return (
                f"the IDs differ only in Unicode normalisation ({shown(given)} is {form_given}, "
                f"{shown(other)} is {form_other}): save both in one form, NFC"
            )
    return ""
