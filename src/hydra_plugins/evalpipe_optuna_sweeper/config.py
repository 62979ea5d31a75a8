"""`hydra/sweeper=evalpipe_optuna` and its samplers (`hydra/sweeper/sampler=tpe|random|cmaes|grid`).

No `from __future__ import annotations` here: Hydra's plugin scan executes this module before
it is in sys.modules, where dataclasses cannot resolve string annotations (and OmegaConf needs
the real types).
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional  # noqa: UP035 (OmegaConf reads these)

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class TPESamplerConf:
    _target_: str = "optuna.samplers.TPESampler"
    seed: Optional[int] = None  # noqa: UP045


@dataclass
class RandomSamplerConf:
    _target_: str = "optuna.samplers.RandomSampler"
    seed: Optional[int] = None  # noqa: UP045


@dataclass
class CmaEsSamplerConf:
    _target_: str = "optuna.samplers.CmaEsSampler"
    seed: Optional[int] = None  # noqa: UP045


@dataclass
class OptunaSweeperConf:
    defaults: List[Any] = field(default_factory=lambda: [{"sampler": "tpe"}])  # noqa: UP006
    _target_: str = "hydra_plugins.evalpipe_optuna_sweeper.sweeper.OptunaSweeper"
    sampler: Any = MISSING
    # maximize | minimize: what the task's return value (evalpipe: `objective`) should do.
    direction: Any = "minimize"
    # null: the study lives in this process's memory. A database URL (sqlite:////abs/optuna.db,
    # postgresql://user@host/db with the password in PGPASSWORD or ~/.pgpass): processes that give
    # the same storage and study_name share one study, and a later `-m` continues it.
    storage: Optional[str] = None  # noqa: UP045
    study_name: Optional[str] = None  # noqa: UP045
    # The study's target number of trials (finished + running, failed ones not counted): every
    # process asks for trials until the study has this many.
    n_trials: int = 20
    # Trials asked and launched at a time by this process (use a parallel launcher for > 1).
    n_jobs: int = 2
    # {key: "interval(a, b)" | "int(interval(a, b))" | "tag(log, interval(a, b))" | "choice(a, b)" |
    #  "a,b" | "range(a, b[, step])" | a fixed value}; command-line overrides of a key win.
    params: Optional[Dict[str, Any]] = None  # noqa: UP006, UP045
    # Share of failed trials (a job that raised) above which the sweep stops; evalpipe's failed
    # points (NaN) are FAIL trials and never stop it.
    max_failure_rate: float = 0.0
    # Optuna heartbeat for storage-backed studies: a trial whose process stops beating for
    # grace_period seconds (killed) is marked FAIL by the next process that looks at the study.
    heartbeat_interval: int = 10
    grace_period: Optional[int] = None  # noqa: UP045  (null: 2 x heartbeat_interval)


store = ConfigStore.instance()
store.store(group="hydra/sweeper", name="evalpipe_optuna", node=OptunaSweeperConf, provider="evalpipe")
store.store(group="hydra/sweeper/sampler", name="tpe", node=TPESamplerConf, provider="evalpipe")
store.store(group="hydra/sweeper/sampler", name="random", node=RandomSamplerConf, provider="evalpipe")
store.store(group="hydra/sweeper/sampler", name="cmaes", node=CmaEsSamplerConf, provider="evalpipe")
