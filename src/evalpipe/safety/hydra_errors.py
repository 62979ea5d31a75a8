"""Hydra's own command-line errors as one line with the valid choices, and exit code 2.

Hydra reports an unknown config option (`ranker=nope`), an unknown key without `+`
(`foo=1`) or broken override syntax (`ks=[1,2`) in several lines followed by a hint
about HYDRA_FULL_ERROR, and exits 1 like a crash. These are bad input: the same
wording, compacted to one line naming what is valid, exit 2. Setting
HYDRA_FULL_ERROR=1 yourself still gets Hydra's full output.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from evalpipe.safety.errors import EXIT_BAD_INPUT, fail


def _parse_error_override(overrides: Sequence[str]) -> str | None:
    """The first command-line override Hydra's grammar rejects."""
    # lazy: hydra, omegaconf, yaml, ~136 ms
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for item in overrides:
        try:
            parser.parse_override(item)
        except Exception:
            return item
    return None


def _valid_keys(full_key: str, config_dir: str, overrides: Sequence[str]) -> list[str]:
    """Keys that do exist beside `full_key`, from the config composed without the offending override."""
    # lazy: hydra, omegaconf, yaml, ~206 ms
    from hydra import compose, initialize_config_dir
    from omegaconf import DictConfig, OmegaConf

    parent = full_key.rpartition(".")[0]
    keep = [
        o for o in overrides if o.partition("=")[0].lstrip("+~") != full_key and not o.startswith("hydra")
    ]
    try:
        with initialize_config_dir(config_dir=config_dir, version_base="1.3"):
            cfg = compose(config_name="config", overrides=keep)
        node = OmegaConf.select(cfg, parent) if parent else cfg
    except Exception:
        return []
    return sorted(str(k) for k in node) if isinstance(node, DictConfig) else []


def one_line(exc: BaseException, config_dir: str, overrides: Sequence[str]) -> str:
    """Hydra's message for `exc`, on one line, with the valid choices where Hydra knows them."""
    # lazy: hydra, omegaconf, yaml, ~134 ms
    from hydra.errors import MissingConfigException, OverrideParseException

    text = str(exc)
    if isinstance(exc, MissingConfigException):
        head, _, rest = text.partition("\n")
        match = re.search(r"Available options in '([^']+)':\n((?:\t.*\n?)+)", rest)
        if match:
            options = ", ".join(o.strip() for o in match.group(2).splitlines() if o.strip())
            return f"{head.strip()}; available options in '{match.group(1)}': {options}"
        return head.strip()
    if isinstance(exc, OverrideParseException):
        bad = _parse_error_override(overrides)
        first = text.splitlines()[0] if text else "invalid override"
        where = f" in override {bad!r}" if bad else ""
        return f"bad override syntax{where}: {first} (see https://hydra.cc/docs/advanced/override_grammar/basic/)"
    cause = exc.__cause__
    match = re.search(r"full_key: (\S+)", str(cause)) if cause is not None else None
    if match and "not in struct" in str(cause):
        full_key = match.group(1)
        valid = _valid_keys(full_key, config_dir, overrides) if full_key else []
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        head = lines[0] if lines else f"unknown key {full_key!r}"
        hint = " ".join(lines[1:])
        where = f" under '{full_key.rpartition('.')[0]}'" if "." in full_key else ""
        choices = f"; valid keys{where}: {', '.join(valid)}" if valid else ""
        return f"{head} {hint}{choices}".strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if cause is not None:
        lines += [line.strip() for line in str(cause).splitlines()[:1] if line.strip()]
    return "; ".join(lines[:3]) or type(exc).__name__


#: Flags that print something and exit: Hydra handles them itself.
INFO_FLAGS = ("-h", "--help", "--hydra-help", "--version", "-i", "--info", "--shell-completion", "-sc")


class _UsageError(Exception):
    pass


def check_flags(argv: Sequence[str]) -> str | None:
    """The problem with Hydra's command-line flags (argparse's own wording), or None.

    argparse would print its whole usage block; this is the one line that matters, plus the
    usual cause of "unrecognized arguments": a flag such as -m given after the overrides.
    """
    if any(a.split("=", 1)[0] in INFO_FLAGS for a in argv):
        return None
    # lazy: hydra, omegaconf, yaml, ~135 ms
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()

    def error(message: str) -> None:
        raise _UsageError(message)

    parser.error = error  # type: ignore[method-assign]
    parser.exit_on_error = False
    try:
        _, extra = parser.parse_known_args(list(argv))
    except (_UsageError, argparse.ArgumentError) as exc:
        return f"{exc} (see --help)"
    if extra:
        return (
            f"unrecognized arguments: {' '.join(extra)} "
            "(options such as -m/--multirun or --cfg go before the overrides such as ks=[5,10])"
        )
    return None


def run(hydra_main: Callable[[], Any], config_dir: str, argv: Sequence[str]) -> None:
    """Call `hydra_main`; a Hydra/OmegaConf error from the command line ends as one line and exit 2."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        hydra_main()
        return
    problem = check_flags(argv)
    if problem:
        _fail(problem)
    # lazy: hydra, omegaconf, yaml, ~202 ms
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    os.environ["HYDRA_FULL_ERROR"] = "1"  # let the exception reach us instead of Hydra's printout
    try:
        hydra_main()
    except (HydraException, OmegaConfBaseException) as exc:
        overrides = [a for a in argv if not a.startswith("-")]
        _fail(one_line(exc, config_dir, overrides))
    except OSError as exc:
        if _raised_in_evalpipe(exc):  # not Hydra's: a bug of ours keeps its traceback
            raise
        _fail(os_error_line(exc))


def _raised_in_evalpipe(exc: BaseException) -> bool:
    """Whether the traceback passes through evalpipe's own code below this module's frame."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/evalpipe
    tb = exc.__traceback__
    frames = []
    while tb is not None:
        frames.append(os.path.abspath(tb.tb_frame.f_code.co_filename))
        tb = tb.tb_next
    mine = [f for f in frames[1:] if f.startswith(here + os.sep) and not f.endswith("__main__.py")]
    return bool(mine)


def os_error_line(exc: OSError) -> str:
    """Hydra failing to create or write its output folder, as one line saying how to fix it."""
    # lazy: standard library, ~3 ms
    import errno

    path = exc.filename or "the output directory"
    why = exc.strerror or type(exc).__name__
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        hint = "a file is in the way: remove it, or choose another hydra.run.dir=... (-m: hydra.sweep.dir)"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "choose a writable hydra.run.dir=... (hydra.sweep.dir=... for -m)"
    else:
        hint = "check hydra.run.dir / hydra.sweep.dir"
    return f"cannot write the run's output directory {path!r}: {why}; {hint}"


def _fail(message: str) -> NoReturn:
    fail(message, EXIT_BAD_INPUT, argv=sys.argv[1:])  # Hydra quotes the overrides back: mask them
