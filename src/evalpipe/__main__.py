"""Entry points: `python -m evalpipe ...` and the `evalpipe` console script (Hydra apps).

`evalpipe compare ...`, `evalpipe check-fixture ...` and `evalpipe merge-judgements ...` are
dispatched to their commands before Hydra parses the command line.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from evalpipe.paths import PROJECT_ROOT

CONF_DIR = str(PROJECT_ROOT / "conf")


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def hydra_main(cfg: DictConfig) -> float:
    from evalpipe.app import evaluate

    return evaluate(cfg)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        from evalpipe.sweeps.compare import main as compare_main

        sys.exit(compare_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "check-fixture":
        from evalpipe.fixture_check.cli import main as check_main

        sys.exit(check_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "merge-judgements":
        from evalpipe.judge.merge import main as merge_main

        sys.exit(merge_main(sys.argv[2:]))
    hydra_main()


if __name__ == "__main__":
    main()
