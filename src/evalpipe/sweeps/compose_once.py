"""Compose each sweep job's config once, not twice.

Hydra's sweepers check a batch before launching it (`Sweeper.validate_batch_is_legal`
composes every job's config, so a bad override fails before the first job runs), and the
launcher then composes each of them again. Composing is most of what a reused sweep point
costs (about 50-80 ms each here). `install()` keeps the config the check composed and hands
it to the launcher's request for the same job (same config loader, same overrides), once: the
launcher then sets the job's id and number on it, as on a fresh one. A launcher that composes
in another process (joblib, Ray) never asks here, so at most `KEEP` configs are kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

#: Validated configs kept for the launcher (a remote launcher never collects them).
KEEP = 256

_validated: OrderedDict[tuple[int, tuple[str, ...]], Any] = OrderedDict()
#: Called once a batch is composed and checked, before the launcher starts its jobs.
_after_check: list[Callable[[], None]] = []


def after_check(hook: Callable[[], None] | None) -> None:
    """Run `hook` after each batch is checked, before its jobs start (None: no hook). The sweep
    callback waits there for the parent run the upload worker was creating meanwhile."""
    _after_check.clear()
    if hook is not None:
        _after_check.append(hook)


def keep(loader: Any, overrides: Sequence[str], composed: Any) -> None:
    """Hand a config composed before the sweep started (`sweeps.points`, which checks every point
    before the parent run exists) to the sweeper's check and the launcher: not composed again."""
    _validated[(id(loader), tuple(overrides))] = composed
    while len(_validated) > KEEP:
        _validated.popitem(last=False)


def install() -> None:
    """Patch Hydra's sweeper check and config loader (once per process); each config file is
    parsed once too (`sweeps.config_cache`)."""
    # lazy: hydra, omegaconf, yaml, ..., ~280 ms
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.plugins.sweeper import Sweeper

    from evalpipe.sweeps import config_cache

    config_cache.install()

    if getattr(ConfigLoaderImpl.load_sweep_config, "_evalpipe_compose_once", False):
        return
    compose = ConfigLoaderImpl.load_sweep_config

    def load_sweep_config(self: Any, master_config: Any, sweep_overrides: list[str]) -> Any:
        kept = _validated.pop((id(self), tuple(sweep_overrides)), None)
        if kept is not None:
            return kept
        return compose(self, master_config, sweep_overrides)

    def validate_batch_is_legal(self: Any, batch: Any) -> None:
        loader = getattr(self, "hydra_context", None)
        loader = loader.config_loader if loader is not None else self.config_loader
        for overrides in batch:
            key = (id(loader), tuple(overrides))
            if key in _validated:  # composed (and checked) when the sweep started
                continue
            _validated[key] = compose(loader, self.config, list(overrides))  # raises as Hydra's does
            while len(_validated) > KEEP:
                _validated.popitem(last=False)
        for hook in list(_after_check):
            hook()

    load_sweep_config._evalpipe_compose_once = True  # type: ignore[attr-defined]
    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
    Sweeper.validate_batch_is_legal = validate_batch_is_legal  # type: ignore[method-assign]
