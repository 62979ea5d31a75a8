"""The config is read once, at the entry: below evaluation/ no module reads the Hydra config.

`evaluation.stages.check` hands the Hydra config to `safety.secrets.register_config` (the one
conversion into plain containers) and to `preflight.check`, which turns it into checked, frozen
values (`preflight.Checked`); everything below receives those values. This scans the source for
what reading the config looks like (`DictConfig`, `OmegaConf`, `cfg.`) below that line; the few
places that must touch Hydra's own objects are listed with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "evalpipe"
#: Packages and modules at or above evaluation/ (they may read the config; the entry's side).
ABOVE = ("__main__.py", "app.py", "preflight.py", "runner.py", "batching.py", "progress.py")
ABOVE_DIRS = ("evaluation", "compare", "gate", "suite", "sweeps")
JUSTIFIED = {
    # Hydra's own callback and error path: secrets masked in Hydra's files and messages.
    "safety/hydra_secrets.py": "Hydra callback: masks the config files Hydra writes",
    "safety/hydra_errors.py": "Hydra's errors turned into one line (names the valid keys)",
    "safety/secrets.py": "register_config: the entry's one conversion into containers",
    "fixture_check/cli.py": "the check-fixture command composes its own config (a command)",
    "rankers/fusion/rrf.py": "a comment: hydra.utils.instantiate hands nested components as a DictConfig",
    "inputs/fixture.py": "a type name in an error message (DictConfig reads as 'dict')",
    "judge/settings.py": "a comment: instantiate's headers mapping",
}
READS = re.compile(r"DictConfig|OmegaConf|\bcfg\.")


def below_evaluation(path: Path) -> bool:
    rel = path.relative_to(SRC)
    return rel.parts[0] not in ABOVE_DIRS and str(rel) not in ABOVE


def test_nothing_below_evaluation_reads_the_raw_config() -> None:
    found = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if below_evaluation(path) and READS.search(path.read_text(encoding="utf-8"))
    )
    assert [f for f in found if f not in JUSTIFIED] == []


def test_measuring_and_the_run_files_read_the_checked_values() -> None:
    for name in ("measure.py", "files.py"):
        text = (SRC / "evaluation" / name).read_text(encoding="utf-8")
        assert not re.search(r"\bcfg\b|DictConfig|to_container", text), name
