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
import io
import os
import stat
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from evalpipe.safety import env_settings
from evalpipe.safety.errors import EvalpipeError

BOM = "\ufeff"


def max_file_bytes() -> int:
    """Largest input file read whole (a fixture, a run_info.json, a baseline): EVALPIPE_MAX_FILE_MB,
    read when used and checked (`safety.env_settings`: a bad value is one line, never a default)."""
    return max(1, int(env_settings.number("EVALPIPE_MAX_FILE_MB") * 1024 * 1024))


def max_line_bytes() -> int:
    """Longest line a line reader accepts (a corpus unit, a run-file line): EVALPIPE_MAX_LINE_MB."""
    return max(1, int(env_settings.number("EVALPIPE_MAX_LINE_MB") * 1024 * 1024))


def __getattr__(name: str) -> int:
    """`MAX_FILE_BYTES` / `MAX_LINE_BYTES` as the module constants they were, read when asked."""
    if name == "MAX_FILE_BYTES":
        return max_file_bytes()
    if name == "MAX_LINE_BYTES":
        return max_line_bytes()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        if exc.errno == errno.ENOENT and path.is_symlink():
            target = os.readlink(path)
            raise MissingInputError(
                f"{what} {path} is a broken symbolic link (to {target!r}){tail}"
            ) from None
        if exc.errno == errno.EACCES:
            raise InputFileError(f"{what} {path} cannot be reached (permission denied)") from None
        if exc.errno != errno.ENOENT:  # a name too long, a file where a folder belongs, ...
            raise InputFileError(
                f"{what} {_clipped(path)} cannot be reached ({exc.strerror or exc}){tail}"
            ) from None
    if path.is_dir():
        raise MissingInputError(f"{what} {path} is a directory, not a file{tail}")
    if not path.exists():
        raise MissingInputError(f"{what} not found: {path}{tail}")
    check_regular(path, what, tail)
    if not os.access(path, os.R_OK):
        raise InputFileError(f"{what} {path} is not readable (permission denied)")
    return path


#: What a path that is not a regular file is, by its stat mode.
_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def size_text(n: float) -> str:
    """Bytes as the unit a reader would pick (the limits are stated in MB, tests shrink them)."""
    if n >= 2**20:
        return f"{n / 2**20:,.1f} MB"
    return f"{n / 1024:,.1f} KB" if n >= 1024 else f"{int(n)} bytes"


def _clipped(path: Path, limit: int = 300) -> str:
    """A path for a message: as is, or its first and last characters when it is absurdly long."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:200]}...{text[-80:]}"


def check_regular(path: Path, what: str = "input file", tail: str = "") -> os.stat_result:
    """The stat of `path` if it is a regular file, else one line saying what it is. Asked with
    os.stat, never by opening it: opening a FIFO with no writer blocks for ever."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise MissingInputError(f"{what} not found: {path}{tail}") from None
    except OSError as exc:
        raise InputFileError(f"{what} {path} cannot be reached ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise InputFileError(f"{what} {path} is {kind}, not a regular file: give the path of a file{tail}")
    return st


def check_size(path: Path, st: os.stat_result, what: str = "input file") -> None:
    limit = max_file_bytes()
    if st.st_size > limit:
        raise InputFileError(
            f"{path}: {what} of {size_text(st.st_size)} is larger than the limit of "
            f"{size_text(limit)} (EVALPIPE_MAX_FILE_MB=... raises it)"
        )


def read_bytes(path: Path, what: str = "input file") -> bytes:
    """The bytes of a regular file within the size limit (one line naming the file otherwise)."""
    st = check_regular(path, what)
    check_size(path, st, what)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None


def read_json_text(path: Path, what: str = "input file") -> str:
    """A whole file as UTF-8 text (a leading BOM dropped) for a JSON, TSV or prompt reader: a regular
    file (a FIFO is refused before it is opened), within the size limit."""
    return decode_text(read_bytes(path, what), path)


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
    data = read_bytes(path)
    try:
        if path.suffix == ".gz":
            data = _gunzip_capped(data, path)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise InputFileError(f"{path}: not a valid gzip file ({exc})") from None
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return decode_text(data, path)


def _gunzip_capped(data: bytes, path: Path) -> bytes:
    out = bytearray()
    limit = max_file_bytes()
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as fh:
        while chunk := fh.read(1 << 20):
            out += chunk
            if len(out) > limit:
                raise InputFileError(
                    f"{path}: decompresses to more than {size_text(limit)} "
                    "(EVALPIPE_MAX_FILE_MB=... raises the limit)"
                )
    return bytes(out)


def capped_lines(fh) -> Iterator[bytes]:
    """The lines of a binary file object, each at most `max_line_bytes()` (longer: an InputFileError
    raised by `binary_lines` with the line number), read without holding more than that."""
    limit = max_line_bytes()
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            raise _LongLine()
        yield line


class _LongLine(Exception):
    pass


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
        except _LongLine:
            raise InputFileError(
                f"{path}:{lineno + 1}: line longer than {size_text(max_line_bytes())} (the limit; "
                "EVALPIPE_MAX_LINE_MB=... raises it)"
            ) from None
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
    """(line number, text) of every line of a (optionally gzipped) regular file, each line capped."""
    check_regular(path)
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as fh:
            yield from binary_lines(path, capped_lines(fh))
    except OSError as exc:  # opening; read errors are reported by binary_lines
        raise InputFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
