"""The one argument parser of every `evalpipe <command>` (and `python -m evalpipe.corpus`, ...).

argparse's own `error` prints the whole usage block (five lines for `evalpipe gate`) and then
the message; the rule everywhere else is one line. `CommandParser.error` prints only
`<prog>: error: <message> (see --help)` through `safety.errors.fail` (masked, exit 2). Subcommand
parsers (`evalpipe baseline set`) are built from the parser's own class, so they say it the same
way. `--help` is unchanged.
"""

from __future__ import annotations

import argparse
from typing import NoReturn

from evalpipe.safety.errors import fail


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line, exit 2 (tests/test_cli_one_line.py)."""

    def error(self, message: str) -> NoReturn:
        fail(f"{' '.join(message.split())} (see --help)", prog=self.prog)
