"""The Launcher class Hydra discovers; the Ray work is in `_core` (imported only when a sweep launches,
so a single run never pays for importing Ray)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from evalpipe.safety.errors import fail


class RayLauncher(Launcher):
    """Runs each sweep job as a Ray task, on a local instance or on a running cluster."""

    def __init__(
        self,
        ray: DictConfig | dict[str, Any] | None = None,
        forward_env: Sequence[str] = (),
        cancel_grace_s: float = 30.0,
    ) -> None:
        plain = OmegaConf.to_container(ray, resolve=True) if isinstance(ray, DictConfig) else (ray or {})
        self.init_kwargs: dict[str, Any] = dict(plain.get("init") or {})
        self.remote_kwargs: dict[str, Any] = dict(plain.get("remote") or {})
        self.forward_env = [str(name) for name in forward_env]
        self.cancel_grace_s = float(cancel_grace_s)
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.task_function = task_function
        self.hydra_context = hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:

        if importlib.util.find_spec("ray") is None:
            fail("hydra/launcher=ray needs Ray: pip install -e '.[ray]'")
        # lazy: hydra_plugins.evalpipe_ray_launcher, ~3 ms
        from hydra_plugins.evalpipe_ray_launcher import _core

        return _core.launch(self, job_overrides, initial_job_idx)
