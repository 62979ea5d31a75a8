"""`python -m evalpipe.corpus ROOT -o OUT.jsonl`: build a corpus from a source tree."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from evalpipe.corpus.build import (
    CODE_LANGUAGES,
    DEFAULT_EXCLUDE,
    DEFAULT_INCLUDE,
    DEFAULT_MAX_FILE_BYTES,
    SkippedFileWarning,
    build_corpus,
)
from evalpipe.corpus.markdown import DEFAULT_SECTION_CHARS
from evalpipe.corpus.model import CorpusError, load_jsonl_corpus, write_jsonl_corpus
from evalpipe.corpus.python_src import DEFAULT_EXCERPT_CHARS
from evalpipe.corpus.stats import corpus_stats, write_corpus_stats
from evalpipe.safety.cli_parser import CommandParser

EPILOG = """\
unit IDs:
  src/pkg/mod.py                 Python module      src/pkg/mod.py::Class.method  method
  src/pkg/mod.py::func           function           cmd/main.go::Server.Run       Go method
  web/app.ts::Widget.render      TS method          docs/guide.md#install          Markdown section
  docs/guide.md#install~2        2nd chunk of a long section;  docs/guide.md#  text before the first heading

Go/TypeScript/JavaScript need the optional extra: pip install 'evalpipe[treesitter]'.

examples:
  python -m evalpipe.corpus . -o outputs/corpus/self.jsonl --include 'src/**/*.py' '**/*.md'
  python -m evalpipe.corpus fixtures/gold_corpus.jsonl        # statistics of an existing corpus
"""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def make_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m evalpipe.corpus",
        description="Build a JSONL corpus of code symbols (Python, Go, TS/JS) and Markdown sections "
        "from a source tree, with contains/calls/imports/inherits/implements/references/subcommands "
        "relations, and print its statistics.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "root",
        type=Path,
        metavar="ROOT",
        help="directory to index (unit paths are relative to it), or an existing corpus "
        "(.jsonl/.jsonl.gz) whose statistics to print",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="OUT.jsonl",
        help="JSONL file to write (required for a directory)",
    )
    parser.add_argument(
        "--include",
        nargs="+",
        metavar="GLOB",
        help=f"files to index, replacing the defaults ({' '.join(DEFAULT_INCLUDE)})",
    )
    parser.add_argument(
        "--exclude",
        nargs="+",
        default=[],
        metavar="GLOB",
        help="more paths to skip, added to the defaults; a GLOB without '/' matches any path component "
        f"(defaults: {' '.join(DEFAULT_EXCLUDE)})",
    )
    parser.add_argument("--no-default-excludes", action="store_true", help="use only the --exclude globs")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--markdown-only", action="store_true", help="index Markdown sections only")
    only.add_argument("--code-only", action="store_true", help="index code symbols only")
    parser.add_argument(
        "--excerpt-chars",
        type=_positive,
        default=DEFAULT_EXCERPT_CHARS,
        metavar="N",
        help=f"max characters of a symbol's body kept in its text (default {DEFAULT_EXCERPT_CHARS})",
    )
    parser.add_argument(
        "--section-chars",
        type=_positive,
        default=DEFAULT_SECTION_CHARS,
        metavar="N",
        help=f"Markdown sections longer than this are split into chunks (default {DEFAULT_SECTION_CHARS})",
    )
    parser.add_argument(
        "--max-file-kb",
        type=_positive,
        default=DEFAULT_MAX_FILE_BYTES // 1024,
        metavar="KB",
        help="skip source files larger than this, with a warning naming each "
        f"(default {DEFAULT_MAX_FILE_BYTES // 1024} KB)",
    )
    parser.add_argument(
        "--stats",
        type=Path,
        metavar="STATS.json",
        help="also write the corpus statistics (units by kind, tests, overloads, merged "
        "declarations, relations by kind) as JSON",
    )
    return parser


def _summarize(path: Path, stats_path: Path | None) -> int:
    """Statistics of an existing corpus (corpora built before `is_test` derive it from paths)."""

    try:
        corpus = load_jsonl_corpus(path)
    except CorpusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stats = corpus_stats(corpus)
    print(f"{path}: {stats.units} units")
    print(f"  files:     {stats.files}")
    for line in stats.lines():
        print(line)
    if stats_path is not None:
        write_corpus_stats(corpus, stats_path)
        print(f"  stats:     {stats_path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.root.is_file() and args.root.name.endswith((".jsonl", ".jsonl.gz")):
        return _summarize(args.root, args.stats)
    if not args.root.is_dir():
        parser.error(f"ROOT {args.root} is not a directory (nor a .jsonl corpus to summarize)")
    if args.output is None:
        parser.error("the -o/--output OUT.jsonl argument is required when ROOT is a directory")
    if args.output.exists() and args.output.is_dir():
        parser.error(
            f"-o {args.output} is a directory; give a file name such as {args.output / 'corpus.jsonl'}"
        )
    exclude = list(args.exclude) + ([] if args.no_default_excludes else list(DEFAULT_EXCLUDE))
    languages = ["markdown"] if args.markdown_only else list(CODE_LANGUAGES) if args.code_only else None

    # lazy: evalpipe.corpus.treesitter_src, ~6 ms
    from evalpipe.corpus.treesitter_src import TreeSitterUnavailable

    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedFileWarning)
        try:
            units = build_corpus(
                args.root.resolve(),
                include=args.include,
                exclude=exclude,
                excerpt_chars=args.excerpt_chars,
                section_chars=args.section_chars,
                languages=languages,
                max_file_bytes=args.max_file_kb * 1024,
            )
        except TreeSitterUnavailable as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    skipped = [w for w in caught if issubclass(w.category, SkippedFileWarning)]
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    n = write_jsonl_corpus(units, args.output)
    elapsed = time.perf_counter() - started

    stats = corpus_stats(units)
    print(f"wrote {n} units to {args.output} ({args.output.stat().st_size / 1024:.1f} KiB) in {elapsed:.2f}s")
    print(f"  files:     {stats.files} ({len(skipped)} skipped)")
    for line in stats.lines():
        print(line)
    if args.stats is not None:
        write_corpus_stats(units, args.stats)
        print(f"  stats:     {args.stats}")
    if n == 0:
        print("note: no units; check ROOT and --include (globs are relative to ROOT)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
