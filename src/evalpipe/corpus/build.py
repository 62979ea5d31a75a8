"""Walk a source tree and build a corpus of code-symbol and Markdown-section units.

The order is deterministic (files by POSIX path, then source order within a
file) so two builds of the same tree give byte-identical JSONL and the same
corpus hash. A file that cannot be read or parsed is skipped with a
`SkippedFileWarning` naming the file and line; one bad file never fails a build.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import warnings
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path, PurePosixPath

from evalpipe.core import Unit
from evalpipe.core.testpaths import is_test_path
from evalpipe.corpus.markdown import DEFAULT_SECTION_CHARS, parse_markdown
from evalpipe.corpus.python_src import DEFAULT_EXCERPT_CHARS, build_python_units

DEFAULT_INCLUDE: tuple[str, ...] = (
    "**/*.py",
    "**/*.md",
    "**/*.go",
    "**/*.ts",
    "**/*.tsx",
    "**/*.js",
    "**/*.jsx",
    "**/*.mjs",
    "**/*.cjs",
    "**/*.mts",
    "**/*.cts",
    "**/*.markdown",
)
#: A pattern without "/" matches any path component (like .gitignore), so
#: "build" skips every build/ directory and "*.egg-info" every egg-info.
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".venv",
    "venv",
    ".git",
    "node_modules",
    "mlruns",
    "outputs",
    "multirun",
    ".cache",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".tox",
    "*.egg-info",
)

LANGUAGES = ("python", "markdown", "go", "typescript", "javascript")
CODE_LANGUAGES = ("python", "go", "typescript", "javascript")
_EXT_LANGUAGE = {".py": "python", ".md": "markdown", ".markdown": "markdown"}


class SkippedFileWarning(UserWarning):
    """A file left out of the corpus (unreadable or unparsable); the message says where and why."""


def language_of(path: str) -> str | None:
    """Unit language for a file name, or None when no parser handles it."""
    ext = PurePosixPath(path).suffix.lower()
    if ext in _EXT_LANGUAGE:
        return _EXT_LANGUAGE[ext]
    # lazy: evalpipe.corpus.treesitter_src, ~6 ms
    from evalpipe.corpus.treesitter_src import EXTENSIONS  # no tree-sitter import happens here

    return EXTENSIONS[ext][0] if ext in EXTENSIONS else None


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Glob with `**` (any number of directories), `*`, `?` and `[...]`, matched on POSIX paths."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j]
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z")


def path_matches(path: str, pattern: str) -> bool:
    """True when relative POSIX `path` matches `pattern`.

    A pattern with a "/" is matched against the whole path ("docs/**" also
    matches the directory itself); one without matches any single component.
    """
    pattern = pattern.strip().removeprefix("./").rstrip("/")
    if not pattern:
        return False
    if "/" in pattern:
        rx = _glob_regex(pattern)
        return bool(rx.match(path)) or (
            pattern.endswith("/**") and _glob_regex(pattern[:-3]).match(path) is not None
        )
    rx = _glob_regex(pattern)
    return any(rx.match(part) for part in path.split("/"))


def collect_files(root: Path, include: Sequence[str], exclude: Sequence[str]) -> list[str]:
    """Relative POSIX paths under `root` matching `include` and not `exclude`, sorted.

    Excluded directories are pruned during the walk, so a large .venv costs nothing.
    """
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        kept = []
        for d in sorted(dirnames):
            rel = f"{rel_dir}/{d}" if rel_dir else d
            if not any(path_matches(rel, p) for p in exclude):
                kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if any(path_matches(rel, p) for p in include) and not any(path_matches(rel, p) for p in exclude):
                found.append(rel)
    return sorted(found)


def _warn(path: str, line: int, message: str) -> None:
    warnings.warn(f"{path}:{line}: skipped ({message})", SkippedFileWarning, stacklevel=3)


#: Source files larger than this are skipped with a warning (generated code, minified bundles,
#: data saved as .py): a 50 MB one-line file would make a 50 MB unit, twice over with its
#: signature. `build_corpus(max_file_bytes=...)` / `--max-file-kb` raise it.
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024


def _read_bytes(root: Path, rel: str, max_file_bytes: int) -> bytes | None:
    """The file's bytes, or None (a warning naming it) for what is not a regular file (a FIFO
    would block the read for ever) or is larger than `max_file_bytes`."""

    try:
        st = os.stat(root / rel)
    except OSError as exc:
        _warn(rel, 1, f"cannot be read ({exc.strerror or exc})")
        return None
    if not stat.S_ISREG(st.st_mode):
        _warn(rel, 1, "not a regular file (a pipe, socket or device)")
        return None
    if st.st_size > max_file_bytes:
        _warn(
            rel,
            1,
            f"{st.st_size / 2**20:,.1f} MB is over the limit of {max_file_bytes / 2**20:,.1f} MB "
            "(generated or minified? --max-file-kb raises the limit)",
        )
        return None
    try:
        return (root / rel).read_bytes()
    except OSError as exc:
        _warn(rel, 1, f"cannot be read ({exc.strerror or exc})")
        return None


def _read_text(root: Path, rel: str, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES) -> str | None:
    data = _read_bytes(root, rel, max_file_bytes)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        _warn(rel, line, f"not UTF-8: byte {exc.start}; re-encode the file as UTF-8 or exclude it")
        return None


def go_module_path(root: Path) -> str:
    """The `module` line of `root/go.mod`, or "" (Go imports then stay unresolved)."""
    gomod = root / "go.mod"
    if not gomod.is_file():
        return ""
    for line in gomod.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split("//", 1)[0].split()
        if len(parts) >= 2 and parts[0] == "module":
            return parts[1].strip('"')
    return ""


def build_corpus(
    root: str | Path,
    include: Iterable[str] | None = None,
    exclude: Iterable[str] | None = None,
    excerpt_chars: int = DEFAULT_EXCERPT_CHARS,
    section_chars: int = DEFAULT_SECTION_CHARS,
    languages: Iterable[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> list[Unit]:
    """All units of the files under `root`, in deterministic order.

    Files over `max_file_bytes`, and paths that are not regular files, are skipped with a
    SkippedFileWarning naming them.

    `include`/`exclude` are glob lists (defaults DEFAULT_INCLUDE/DEFAULT_EXCLUDE;
    passing `exclude` replaces the defaults, so add to them explicitly when needed).
    `languages` restricts the parsers (subset of LANGUAGES). Every unit records `is_test`
    (the path conventions in `testpaths`). Go/TS/JS files need
    the `treesitter` extra; without it TreeSitterUnavailable says what to install.
    """
    root = Path(root)
    if not root.is_dir():
        raise NotADirectoryError(f"corpus root is not a directory: {root}")
    if excerpt_chars < 1 or section_chars < 1:
        raise ValueError(
            f"excerpt_chars and section_chars must be >= 1 (got {excerpt_chars}, {section_chars})"
        )
    wanted = set(LANGUAGES if languages is None else languages)
    unknown = wanted - set(LANGUAGES)
    if unknown:
        raise ValueError(f"unknown language(s) {sorted(unknown)}; choose from {', '.join(LANGUAGES)}")
    paths = collect_files(
        root,
        list(DEFAULT_INCLUDE if include is None else include),
        list(DEFAULT_EXCLUDE if exclude is None else exclude),
    )

    python_sources: list[tuple[str, str]] = []
    ts_sources: list[tuple[str, bytes]] = []
    per_path: dict[str, list[Unit]] = {}
    for rel in paths:
        lang = language_of(rel)
        if lang is None or lang not in wanted:
            continue
        if lang == "python":
            text = _read_text(root, rel, max_file_bytes)
            if text is not None:
                python_sources.append((rel, text))
        elif lang == "markdown":
            text = _read_text(root, rel, max_file_bytes)
            if text is not None:
                per_path[rel] = parse_markdown(text, rel, section_chars)
        else:
            data = _read_bytes(root, rel, max_file_bytes)
            if data is not None:
                ts_sources.append((rel, data))

    generated: list[Unit] = []
    if python_sources:
        # a root that is itself a package (indexing site-packages/foo) keeps its import name
        root_package = root.resolve().name if (root / "__init__.py").is_file() else ""
        generated += build_python_units(
            python_sources, excerpt_chars, on_error=_warn, root_package=root_package
        )
    if ts_sources:
        # lazy: evalpipe.corpus.treesitter_src, ~6 ms
        from evalpipe.corpus.treesitter_src import build_tree_sitter_units

        generated += build_tree_sitter_units(ts_sources, excerpt_chars, go_module_path(root), on_error=_warn)
    for unit in generated:
        per_path.setdefault(unit.path, []).append(unit)

    units: list[Unit] = []
    seen: set[str] = set()
    for rel in sorted(per_path):
        for unit in per_path[rel]:
            if unit.id in seen:  # cannot happen by construction; never emit a corpus Corpus() rejects
                _warn(rel, int(unit.get("line", 0) or 0), f"duplicate unit id {unit.id!r}")
                continue
            seen.add(unit.id)
            test = is_test_path(unit.path, unit.language)
            units.append(dataclasses.replace(unit, metadata={**unit.metadata, "is_test": test}))
    return units
