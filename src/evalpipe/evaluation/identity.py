"""What a run is: its config hash (resume key), Hydra context, experiment and default name.

Known from the config alone, so a sweep's parent can name the experiment before any job runs
and a resumed sweep can find a point it already measured.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalpipe.evaluation.naming import point_name, qualified_choice
from evalpipe.paths import PROJECT_ROOT

# Keys that change where/how a run is recorded, not what is measured.
NON_MEASURING_KEYS = (
    "tracking",
    "run_name",
    "force",
    "progress",
    "plots",
    "sweep",
    "objective",
    "traces",
    "secret_keys",
    "allow_skipped",
    "timeout_s",
    "objective_agg",
)
#: Split keys that mean nothing when the whole fixture is measured (fixture.split=all).
SPLIT_ONLY_KEYS = ("split_seed", "test_fraction")


def config_hash(cfg: Mapping[str, Any], *identity: str) -> str:
    """Identity of what a run measures: the config (less where it is logged) plus `identity`
    (fixture sha256, code fingerprint). A sweep resumes by skipping hashes already FINISHED."""
    measured = {k: v for k, v in cfg.items() if k not in NON_MEASURING_KEYS}
    if "ranker" in measured:  # batch size, cache dir, device: how fast, not what (reporting.params)
        # lazy: evalpipe.reporting.params, ~1 ms
        from evalpipe.reporting.params import without_execution_keys

        measured["ranker"] = without_execution_keys(measured["ranker"])
    fixture = measured.get("fixture")  # the split is measured; its seed only when a split is taken
    if isinstance(fixture, Mapping) and str(fixture.get("split") or "all") == "all":
        measured["fixture"] = {k: v for k, v in fixture.items() if k not in SPLIT_ONLY_KEYS}
    blob = json.dumps([measured, *identity], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def hydra_context() -> tuple[str, list[str], Path | None]:
    """(ranker choice, task overrides, output dir) of the current Hydra job, if any."""
    try:
        # lazy: hydra, ~74 ms (in a try)
        from hydra.core.hydra_config import HydraConfig

        hc = HydraConfig.get()
    except Exception:
        return "ranker", [], None
    # As typed: an override holding ${...} must not be resolved here (it may not resolve at all).
    overrides = [str(o) for o in OmegaConf.to_container(hc.overrides.task, resolve=False)]  # type: ignore[union-attr]
    choice = hc.runtime.choices.get("ranker")
    if choice:  # `graph(base=bm25f)` when a nested component is not its config's default
        choice = qualified_choice(dict(hc.runtime.choices), PROJECT_ROOT / "conf")
    if not choice:  # plug-in given as ranker._target_ without a config group option
        target = next((o.split("=", 1)[1] for o in overrides if "ranker._target_=" in o), "plugin")
        choice = target.rsplit(".", 1)[-1]
    return choice, overrides, Path(hc.runtime.output_dir)


def experiment_name(cfg: DictConfig) -> str:
    """`<prefix>/<fixture name>`, known from config alone so a sweep's parent can name it before any job."""
    if cfg.tracking.get("experiment"):
        return str(cfg.tracking.experiment)
    suite = cfg.get("suite")
    if suite and suite.get("name"):  # a suite run and its fixtures' runs sit together
        return f"{cfg.tracking.experiment_prefix}/suite-{suite.name}"
    source = cfg.fixture.get("path") or cfg.fixture.get("qrels") or "fixture"
    fixture = cfg.fixture.get("name") or Path(str(source)).stem
    return f"{cfg.tracking.experiment_prefix}/{fixture}"


def default_run_name(ranker_choice: str, overrides: list[str]) -> str:
    return point_name(ranker_choice, overrides)
