"""The Sweeper class Hydra discovers; the Optuna work is in `_core` (imported only when a sweep runs)."""

from __future__ import annotations

from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class OptunaSweeper(Sweeper):
    """Asks Optuna for trials, runs them as Hydra jobs on the configured launcher, tells the results."""

    def __init__(self, **settings: Any) -> None:
        self.settings = settings
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.launcher: Any = None
        self.job_idx = 0

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:

        self.config = config
        self.hydra_context = hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            config=config, hydra_context=hydra_context, task_function=task_function
        )

    def sweep(self, arguments: list[str]) -> None:
        # lazy: hydra_plugins.evalpipe_optuna_sweeper, ~4 ms
        from hydra_plugins.evalpipe_optuna_sweeper import _core

        _core.sweep(self, arguments)
