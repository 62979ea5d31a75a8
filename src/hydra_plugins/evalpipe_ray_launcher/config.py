"""`hydra/launcher=ray`: the structured config, registered in Hydra's ConfigStore on discovery.

No `from __future__ import annotations` here: Hydra's plugin scan executes this module before
it is in sys.modules, where dataclasses cannot resolve string annotations (and OmegaConf needs
the real types).
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List  # noqa: UP035 (OmegaConf reads these)

from hydra.core.config_store import ConfigStore

#: The sweep's own environment (parent run, sweep ID, swept keys, tracking URI): a running
#: cluster's workers do not inherit the driver's environment, so the tasks get these
#: explicitly (Ray runtime_env env_vars). Never list credentials here: set them on the nodes.
FORWARDED_ENV = [
    "EVALPIPE_PARENT_RUN_ID",
    "EVALPIPE_SWEEP_ID",
    "EVALPIPE_SWEPT_KEYS",
    "MLFLOW_TRACKING_URI",
]


@dataclass
class RayConf:
    # Keyword arguments of ray.init(). address: null starts a local instance (stopped when the
    # sweep's process exits); an address (`auto`, `HOST:PORT`, `ray://HOST:PORT`) joins a running
    # cluster, and options that only size a new instance (num_cpus, object_store_memory, ...) are
    # then dropped with a warning.
    init: Dict[str, Any] = field(default_factory=lambda: {"address": None})  # noqa: UP006
    # Options of each job's Ray task (`num_cpus`, `memory`, `resources`, `max_retries`, ...).
    # max_retries defaults to 0: a point whose worker died is reported, not measured twice.
    remote: Dict[str, Any] = field(default_factory=dict)  # noqa: UP006


@dataclass
class RayLauncherConf:
    _target_: str = "hydra_plugins.evalpipe_ray_launcher.launcher.RayLauncher"
    ray: RayConf = field(default_factory=RayConf)
    # Environment variables of the sweep's process passed to every task (see FORWARDED_ENV).
    forward_env: List[str] = field(default_factory=lambda: list(FORWARDED_ENV))  # noqa: UP006
    # On Ctrl-C / SIGTERM: seconds the cancelled running jobs get to save what they measured.
    cancel_grace_s: float = 30.0


ConfigStore.instance().store(
    group="hydra/launcher", name="ray", node=RayLauncherConf, provider="evalpipe_ray_launcher"
)
