"""Entry points: `python -m evalpipe ...` and the `evalpipe` console script (Hydra apps).

`evalpipe compare ...`, `evalpipe check-fixture ...`, `evalpipe merge-judgements ...`,
`evalpipe sync ...`, `evalpipe gate ...` and `evalpipe baseline ...` are dispatched to their
commands (`SUBCOMMANDS`, listed once in `evalpipe.core.subcommands`) before Hydra parses the
command line; `evalpipe --help` lists them above Hydra's own help (the config groups), and
`evalpipe <command> --help` is each one's help.
SIGINT/SIGTERM that reach here (outside a run's own handling: while Hydra composes, in a
sweep's parent) end with one line and 130/143, never a traceback.
"""

from __future__ import annotations

import importlib
import sys

if __name__ == "__main__":  # `python -m evalpipe`: start the upload worker before importing Hydra
    from evalpipe.tracking import upload_worker

    upload_worker.spawn_early(sys.argv[1:])

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from evalpipe.core.subcommands import SUBCOMMANDS  # noqa: E402
from evalpipe.paths import PROJECT_ROOT  # noqa: E402

CONF_DIR = str(PROJECT_ROOT / "conf")


def usage() -> str:
    """The top of `evalpipe --help`: how to run an evaluation, and every subcommand in one line."""
    width = max(map(len, SUBCOMMANDS))
    lines = [
        "usage: python -m evalpipe [-m] [key=value ...]        run an evaluation (Hydra; options below)",
        "         e.g. python -m evalpipe ranker=bm25 fixture=gold",
        "       evalpipe <command> [options]                  (evalpipe <command> --help for each)",
        "",
        "commands:",
        *(f"  {name:<{width}}  {sub.summary}" for name, sub in SUBCOMMANDS.items()),
        "",
    ]
    return "\n".join(lines)


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> float:
    # lazy: evalpipe.app, numpy, ~128 ms
    from evalpipe.app import evaluate

    return evaluate(cfg)


def main() -> None:
    """`evalpipe ...`: a closed pipe (`evalpipe --help | head`) ends quietly, as for any Unix tool."""
    try:
        _main()
    except BrokenPipeError:
        # lazy: standard library, <1 ms (in a try)
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's exit flush would raise again
        sys.exit(0)
    except SystemExit as exc:
        exit_now(exc.code)
    exit_now(0)


def exit_now(code: object) -> None:
    """End the process with `code` once everything a normal exit does for others is done.

    Everything is finished and saved by now; what a normal interpreter exit still does
    after that is tear down every module and free the heap (Hydra, numpy, bm25s, the
    index): 0.15-0.2 s of a 1.8 s gold run, spent on nothing anyone can observe. So this
    does the observable part of an exit in the interpreter's own order (`threading._shutdown`:
    thread pools' exit hooks, then non-daemon threads joined; the atexit handlers: upload
    worker, logging, joblib/Ray shutdowns; stdout/stderr flushed) and then leaves with
    `os._exit`.
    """
    # lazy: standard library, ~1 ms
    import atexit
    import contextlib
    import os
    import threading

    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): printed, status 1, as Python does
        print(code, file=sys.stderr)
        status = 1
    shutdown = getattr(threading, "_shutdown", None)  # what the interpreter calls: the threading
    if shutdown is not None:  # atexit hooks (thread pools), then joins non-daemon threads
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _main() -> None:
    # lazy: evalpipe.safety, ~3 ms
    from evalpipe.safety import env_settings, signals
    from evalpipe.safety.errors import fail

    try:  # every environment setting checked before any command reads one (exit 2, one line)
        env_settings.check_all()
    except env_settings.EnvSettingError as exc:
        fail(exc)

    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        sub = SUBCOMMANDS[sys.argv[1]]
        run = getattr(importlib.import_module(sub.module), sub.function)
        sys.exit(run(sys.argv[2:]))
    if any(a in ("--help", "-h") for a in sys.argv[1:]):
        print(usage())
    # lazy: evalpipe.tracking, ~11 ms
    from evalpipe.tracking import upload_worker

    upload_worker.spawn_early(sys.argv[1:])  # imports MLflow on the other core while this run measures
    # lazy: evalpipe.evaluation, evalpipe.safety, ~5 ms
    from evalpipe.evaluation import hydra_mode
    from evalpipe.safety import hydra_errors

    hydra_mode.install()  # Hydra composes the config once, not twice
    signals.install()
    try:
        hydra_errors.run(hydra_main, CONF_DIR, sys.argv[1:])
    except (KeyboardInterrupt, signals.Interrupted) as exc:
        print(f"evalpipe: interrupted by {signals.name_of(exc)}", file=sys.stderr)
        sys.exit(signals.exit_code(exc))


if __name__ == "__main__":
    main()
