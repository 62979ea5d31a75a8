"""Entry points: `python -m evalpipe ...` and the `evalpipe` console script (Hydra apps).

`evalpipe compare ...`, `evalpipe check-fixture ...`, `evalpipe merge-judgements ...`,
`evalpipe sync ...`, `evalpipe gate ...` and `evalpipe baseline ...` are dispatched to their
commands before Hydra parses the command line.
SIGINT/SIGTERM that reach here (outside a run's own handling: while Hydra composes, in a
sweep's parent) end with one line and 130/143, never a traceback.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # `python -m evalpipe`: start the upload worker before importing Hydra
    from evalpipe.reporting import upload_worker

    upload_worker.spawn_early(sys.argv[1:])

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from evalpipe.paths import PROJECT_ROOT  # noqa: E402

CONF_DIR = str(PROJECT_ROOT / "conf")


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> float:
    from evalpipe.app import evaluate

    return evaluate(cfg)


def main() -> None:
    from evalpipe.safety import signals

    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        from evalpipe.sweeps.compare import main as compare_main

        sys.exit(compare_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "check-fixture":
        from evalpipe.fixture_check.cli import main as check_main

        sys.exit(check_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "merge-judgements":
        from evalpipe.judge.merge import main as merge_main

        sys.exit(merge_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "sync":
        from evalpipe.reporting.sync import main as sync_main

        sys.exit(sync_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "gate":
        from evalpipe.gate.cli import gate_main

        sys.exit(gate_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "baseline":
        from evalpipe.gate.cli import baseline_main

        sys.exit(baseline_main(sys.argv[2:]))
    from evalpipe.reporting import upload_worker

    upload_worker.spawn_early(sys.argv[1:])  # imports MLflow on the other core while this run measures
    from evalpipe.safety import hydra_errors

    signals.install()
    try:
        hydra_errors.run(hydra_main, CONF_DIR, sys.argv[1:])
    except (KeyboardInterrupt, signals.Interrupted) as exc:
        print(f"evalpipe: interrupted by {signals.name_of(exc)}", file=sys.stderr)
        sys.exit(signals.exit_code(exc))


if __name__ == "__main__":
    main()
