"""Opening the user's input files (fixtures, corpora, queries, qrels, run files) with errors that say
which file and which line, whatever is wrong with it.

Every loader goes through these helpers so the same mistakes (a directory where a
file belongs, an unreadable or empty file, a broken gzip, Latin-1 bytes, a BOM left
by a Windows editor, CRLF line ends) are reported the same way everywhere, as one
line naming the file and line, instead of a UnicodeDecodeError traceback.
"""

from __future__ import annotations

import errno
import gzip
import os
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from evalpipe.safety.errors import EvalpipeError

BOM = "\ufeff"


class InputFileError(EvalpipeError, ValueError):
    """An input file that cannot be read as text; the message names the file (and line)."""


class MissingInputError(EvalpipeError, FileNotFoundError):
    """An input path that does not exist (or is a directory where a file belongs)."""


def require_file(path: Path, what: str, hint: str = "") -> Path:
    """`path` if it is a readable regular file, else a one-line error (`hint` says how to fix it)."""
    tail = f" ({hint})" if hint else ""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise MissingInputError(
                f"{what} {path} is a symbolic link loop (it points back at itself){tail}"
            ) from None
        if path.is_symlink():
            target = os.readlink(path)
            raise MissingInputError(
                f"{what} {path} is a broken symbolic link (to {target!r}){tail}"
            ) from None
        if exc.errno == errno.EACCES:
            raise InputFileError(f"{what} {path} cannot be reached (permission denied)") from None
    if path.is_dir():
        raise MissingInputError(f"{what} {path} is a directory, not a file{tail}")
    if not path.exists():
        raise MissingInputError(f"{what} not found: {path}{tail}")
    if not os.access(path, os.R_OK):
        raise InputFileError(f"{what} {path} is not readable (permission denied)")
    return path


def decode_line(raw: bytes, where: str) -> str:
    """UTF-8 text of one line (`where` is "file:line"); a stray byte names its column."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
            "save the file as UTF-8"
        ) from None


def decode_text(data: bytes, path: Path) -> str:
    """A whole file as UTF-8 (a leading BOM dropped); a bad byte is reported with its line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputFileError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column}); "
            "save the file as UTF-8"
        ) from None
    return text[1:] if text.startswith(BOM) else text


def read_text(path: Path) -> str:
    """The whole (optionally gzipped) file as text."""
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputFileError(f"{path}: not a valid gzip file ({exc})") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return decode_text(data, path)


def binary_lines(path: Path, raw: Iterable[bytes]) -> Iterator[tuple[int, str]]:
    """(line number, text without the line end) of every line of `raw`, decoded strictly.

    Blank lines are yielded too (callers skip them) so numbers match what an editor shows.
    """
    it = iter(raw)
    lineno = 0
    while True:
        try:
            line = next(it)
        except StopIteration:
            return
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            raise InputFileError(f"{path}: not a valid gzip file ({exc})") from None
        except OSError as exc:
            raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
        lineno += 1
        text = decode_line(line, f"{path}:{lineno}")
        if lineno == 1 and text.startswith(BOM):
            text = text[1:]
        yield lineno, text.rstrip("\r\n")


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a (optionally gzipped) text file."""
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as fh:
            yield from binary_lines(path, fh)
    except OSError as exc:  # opening; read errors are reported by binary_lines
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
