"""Hydra callback that masks secrets in the files Hydra writes itself.

Hydra saves `.hydra/config.yaml`, `hydra.yaml` and `overrides.yaml` in every job's
output directory, and `multirun.yaml` (and Optuna's `optimization_results.yaml`) in
a sweep's directory, with the command line in clear, and its launchers log each
job's overrides. `on_job_start` runs right after Hydra wrote a job's files and
before the task: it registers the config's secrets (`evalpipe.safety.secrets`), rewrites
those files masked and puts a masking filter on the log handlers
(`on_multirun_start` does the same for the sweep's parent). Registered in
conf/config.yaml under `hydra.callbacks.mask_secrets`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from evalpipe.safety import secrets

SWEEP_FILES = ("multirun.yaml", "optimization_results.yaml")


def register_job_secrets(config: DictConfig) -> None:
    """Register the secrets of the task config and of the command line (the `hydra` node aside)."""
    task = OmegaConf.masked_copy(config, [k for k in config if k != "hydra"]) if "hydra" in config else config
    secrets.register_config(task)
    try:
        overrides = [str(o) for o in config.hydra.overrides.task]
    except Exception:
        overrides = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and secrets.is_secret_key(key.strip().lstrip("+~")):
            secrets.register([value])


def mask_dir_files(directory: Path, names: tuple[str, ...]) -> None:
    for name in names:
        path = directory / name
        if path.is_file():
            secrets.mask_file(path)


class MaskSecretsCallback(Callback):
    """Rewrites Hydra's own config files with secrets masked (see the module docstring)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        register_job_secrets(config)
        secrets.mask_logging()  # the launcher logs each job's overrides

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        register_job_secrets(config)
        secrets.mask_logging()
        hydra_cfg = config.hydra
        out = Path(str(hydra_cfg.runtime.output_dir))
        if hydra_cfg.get("output_subdir") is not None:
            mask_dir_files(
                out / str(hydra_cfg.output_subdir), ("config.yaml", "hydra.yaml", "overrides.yaml")
            )
        if str(hydra_cfg.mode) == "RunMode.MULTIRUN":
            mask_dir_files(Path(str(hydra_cfg.sweep.dir)), SWEEP_FILES)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        register_job_secrets(config)
        mask_dir_files(Path(str(config.hydra.sweep.dir)), SWEEP_FILES)
