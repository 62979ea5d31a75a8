"""`evalpipe label BATCH`: judge a pool in a local web page (docs/growing_fixtures.md).

    evalpipe label gold.pool.jsonl --assessor alice
    labelling page: http://127.0.0.1:43117/?token=...     (open it; Ctrl-C stops the server)

Checked before the server starts, each refused with one line and exit 2: the batch is
readable; the fixture it names (or `--fixture`) is the one it was pooled on, unedited; the
labels file beside it belongs to this batch; no other `evalpipe label` serves the batch (an
flock on `<batch>.lock`, which the kernel releases if the server is killed, so a restart
after `kill -9` is never locked out).
"""

from __future__ import annotations

import argparse
import fcntl
import getpass
import os
import secrets
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from evalpipe.inputs.fixture import load_fixture
from evalpipe.judge.batch import check_fixture, read_batch
from evalpipe.labelling.server import make_app
from evalpipe.labelling.session import Session
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import EvalpipeError, print_error

PROG = "evalpipe label"


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog=PROG, description="Label a judging batch (from `evalpipe pool`) in a local page.")
    p.add_argument("batch", type=Path, help="the batch JSONL written by evalpipe pool")
    p.add_argument("--assessor", default=None, help="your name, recorded with every verdict (default: $USER)")
    p.add_argument("--fixture", type=Path, help="the fixture YAML (default: the one the batch names)")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    p.add_argument(
        "--show-expected",
        action="store_true",
        help="show the case's listed answers (off by default: they anchor the assessor)",
    )
    return p


def take_lock(batch: Path) -> IO[str]:
    """An exclusive flock on `<batch>.lock` for the server's lifetime; refused when another holds it."""
    path = batch.with_name(batch.name + ".lock")
    try:
        fh = path.open("a+", encoding="utf-8")
    except OSError as exc:
        raise EvalpipeError(
            f"{path}: cannot create the lock beside the batch ({exc.strerror or exc}); the labels go "
            "there too: put the batch in a folder you can write"
        ) from None
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        holder = fh.read().strip() or "?"
        fh.close()
        raise EvalpipeError(
            f"{batch}: another evalpipe label (pid {holder}) is serving this batch; use its page or stop it"
        ) from None
    fh.seek(0)
    fh.truncate()
    fh.write(str(os.getpid()))
    fh.flush()
    return fh


def prepare(args: argparse.Namespace) -> Session:
    batch = read_batch(args.batch)
    named = args.fixture or Path(str(batch.header.get("fixture") or ""))
    if not str(named) or not named.is_file():
        raise EvalpipeError(f"{args.batch}: its fixture {str(named)!r} is not there; give --fixture PATH")
    try:
        fixture = load_fixture(named)
    except EvalpipeError:
        raise
    except Exception as exc:
        raise EvalpipeError(f"{named}: {exc}") from None
    check_fixture(batch, fixture.sha256, str(named))
    units = {u.id: u for u in fixture.corpus.units}
    expected = {c.id: tuple(c.expected) for c in fixture.cases}
    assessor = (args.assessor or os.environ.get("USER") or getpass.getuser() or "").strip()
    if not assessor:
        raise EvalpipeError("no assessor name: give --assessor NAME")
    return Session(batch, units, expected, assessor, blind=not args.show_expected)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        lock = take_lock(args.batch) if args.batch.is_file() else None
        session = prepare(args)
    except EvalpipeError as exc:
        print_error(exc, prog=PROG)
        return 2
    # lazy: werkzeug.serving, ~40 ms
    from werkzeug.serving import make_server

    token = secrets.token_urlsafe(24)
    try:
        server = make_server("127.0.0.1", args.port, make_app(session, token), threaded=True)
    except OSError as exc:
        print_error(f"--port {args.port}: cannot listen on 127.0.0.1: {exc.strerror or exc}", prog=PROG)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop: the finally below releases the lock
    p = session.progress()
    print(
        f"{args.batch}: {p['total']} items, {p['judged']} judged and {p['skipped']} skipped by "
        f"{session.assessor}"
        f"{' (others: ' + ', '.join(session.others) + ')' if session.others else ''}; verdicts go to "
        f"{session.path}",
        flush=True,
    )
    for line in session.agreement_lines():
        print(line, flush=True)
    print(f"labelling page: http://127.0.0.1:{server.server_port}/?token={token}", flush=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()
        if lock is not None:
            lock.close()
    return 0
