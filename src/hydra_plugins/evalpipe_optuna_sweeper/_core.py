"""Optuna side of the sweeper: search space from Hydra's override grammar, ask / launch / tell.

Decisions:
- `n_trials` is the study's target, not this process's quota: each batch asks only for the
  trials the study still lacks (finished + running; FAIL ones do not count), so processes
  sharing a storage split the trials, and a later `-m` on the same study continues it (after a
  killed process, the missing trials; with a larger n_trials, more).
- Storage-backed trials beat a heartbeat from a thread of this process; Optuna marks trials
  whose beat stopped (their process was killed) FAIL, which `fail_stale_trials` does before
  every batch. An interrupted batch (Ctrl-C, SIGTERM, a job's SystemExit) tells its own
  trials FAIL before the exception goes on.
- With a storage, a seeded sampler is re-seeded from the seed and this process's identity:
  processes with one seed would otherwise draw the same trials. A study in memory keeps
  the seed as given, so the same command suggests the same trials.
- A NaN result (evalpipe's failed or skipped point) is a FAIL trial; a job that raised is a
  FAIL trial counted against `max_failure_rate`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import socket
import sys
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep, Transformer
from hydra.core.utils import JobStatus
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from evalpipe.safety.errors import fail

#: Trial states that count towards the study's n_trials.
LIVE = ("COMPLETE", "PRUNED", "RUNNING", "WAITING")


def _range_values(sweep: RangeSweep) -> list[Any]:
    start, stop, step = sweep.start, sweep.stop, sweep.step if sweep.step is not None else 1
    out, x, i = [], start, 0
    while (step > 0 and x < stop) or (step < 0 and x > stop):
        out.append(x)
        i += 1
        x = start + i * step
    return out


def distribution(override: Override) -> Any:
    """An Optuna distribution for a sweep override, or the fixed value (a str) for a plain one.

    `range(a, b, s)` means what it means in a grid (b excluded), as an int or float step grid."""
    # lazy: optuna, numpy, ~143 ms
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if not override.is_sweep_override():
        return override.get_value_element_as_str()
    value = override.value()
    if override.is_choice_sweep():
        assert isinstance(value, ChoiceSweep)
        return CategoricalDistribution(list(override.sweep_iterator(transformer=Transformer.encode)))
    if override.is_range_sweep():
        assert isinstance(value, RangeSweep)
        values = _range_values(value)
        if value.shuffle or not values:
            return CategoricalDistribution(values or [value.start])
        step = value.step if value.step is not None else 1
        if all(isinstance(v, int) for v in (value.start, value.stop, step)):
            return (
                IntDistribution(values[0], values[-1], step=abs(int(step)))
                if step > 0
                else (CategoricalDistribution(values))
            )
        return FloatDistribution(min(values), max(values), step=abs(float(step)))
    if override.is_interval_sweep():
        assert isinstance(value, IntervalSweep)
        log = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(int(value.start), int(value.end), log=log)
        return FloatDistribution(float(value.start), float(value.end), log=log)
    raise ValueError(f"{override.input_line}: this sweep is not supported by the Optuna sweeper")


def search_space(
    params: Mapping[str, Any] | None, arguments: Sequence[str]
) -> tuple[dict[str, Any], list[str]]:
    """({key: distribution}, fixed overrides) from `hydra.sweeper.params`, then the command line
    (a key given on the command line replaces the preset's axis, or fixes it with one value)."""
    parser = OverridesParser.create()
    items = [f"{k}={v}" for k, v in (params or {}).items()] + list(arguments)
    dists: dict[str, Any] = {}
    fixed: dict[str, str] = {}
    for item in items:
        try:
            (override,) = parser.parse_overrides([item])
        except Exception as exc:
            fail(f"Optuna sweeper: cannot parse {item!r}: {str(exc).splitlines()[0]}")
        key = item.partition("=")[0].strip()  # with its +/++ prefix, as the job's override needs it
        for seen in [k for k in (*dists, *fixed) if k.lstrip("+~") == key.lstrip("+~")]:
            dists.pop(seen, None)
            fixed.pop(seen, None)
        try:
            dist = distribution(override)
        except ValueError as exc:
            fail(str(exc))
        if isinstance(dist, str):
            fixed[key] = f"{key}={dist}"
        else:
            dists[key] = dist
    return dists, list(fixed.values())


def _sampler(sweeper: Any, shared: bool) -> Any:
    """The configured sampler (Hydra instantiated it with the sweeper); re-seeded for a shared study."""
    # lazy: optuna, numpy, ~146 ms
    import optuna

    sampler = sweeper.settings.get("sampler")
    cfg = sweeper.config.hydra.sweeper.get("sampler") if sweeper.config is not None else None
    if shared and isinstance(cfg, DictConfig) and cfg.get("seed") is not None:
        who = f"{cfg.seed}:{socket.gethostname()}:{os.getpid()}:{time.time_ns()}"
        cfg = OmegaConf.to_container(cfg, resolve=True)
        cfg["seed"] = int(hashlib.sha256(who.encode()).hexdigest()[:8], 16)
        return instantiate(cfg)
    if isinstance(sampler, optuna.samplers.BaseSampler):
        return sampler
    if isinstance(sampler, DictConfig | dict) and sampler:
        return instantiate(sampler)
    return optuna.samplers.TPESampler()


def _storage(url: str | None, settings: Mapping[str, Any]) -> Any:
    if not url:
        return None
    # lazy: optuna, numpy, hydra_plugins.evalpipe_optuna_sweeper._urls, ~145 ms
    from optuna.storages import RDBStorage

    from hydra_plugins.evalpipe_optuna_sweeper._urls import masked

    # Processes started together on a fresh database race to create Optuna's tables (PostgreSQL:
    # UniqueViolation on pg_type): whoever loses retries and finds them made.
    last: Exception | None = None
    for attempt in range(6):
        try:
            return RDBStorage(
                str(url),
                heartbeat_interval=int(settings.get("heartbeat_interval") or 10),
                grace_period=settings.get("grace_period"),
            )
        except Exception as exc:
            last = exc
            time.sleep(0.5 + attempt * 0.5 + (os.getpid() % 7) / 10)
    first = str(last).strip().splitlines()[0] if str(last).strip() else type(last).__name__
    fail(f"cannot open the Optuna storage {masked(str(url))}: {first} (set hydra.sweeper.storage)")


def _directions(direction: Any) -> list[str]:
    if isinstance(direction, str):
        return [direction]
    directions = [str(d) for d in direction]
    if len(directions) != 1:
        fail(f"Optuna sweeper: one direction expected (the task returns one value), got {directions}")
    return directions


class Heartbeat:
    """Records a heartbeat for the running trials of this process every `interval` seconds."""

    def __init__(self, storage: Any, trial_ids: list[int], interval: float) -> None:
        self.storage, self.trial_ids, self.interval = storage, trial_ids, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="optuna-heartbeat", daemon=True)

    def _beat(self) -> None:
        for trial_id in self.trial_ids:
            with contextlib.suppress(Exception):  # a transient database error: the next beat retries
                self.storage.record_heartbeat(trial_id)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._beat()

    def __enter__(self) -> Heartbeat:
        self._beat()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def live_count(study: Any, before: int | None = None) -> int:
    trials = study.get_trials(deepcopy=False)
    return sum(t.state.name in LIVE and (before is None or t.number < before) for t in trials)


def _value(ret: Any) -> tuple[float | None, BaseException | None]:
    if ret.status == JobStatus.FAILED:
        return None, ret._return_value
    value = ret.return_value
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None, None
    return (None, None) if math.isnan(value) else (value, None)


def _run_id(ret: Any) -> str | None:
    """The MLflow run of an evalpipe job, from its output dir (measured or reused)."""
    try:
        out_dir = Path(str(ret.hydra_cfg.hydra.runtime.output_dir))
    except Exception:  # no Hydra config (a launcher's placeholder for a lost job)
        return None
    for name, key in (("run_info.json", "run_id"), ("reused_run.json", "child_run_id")):
        try:
            return str(json.loads((out_dir / name).read_text(encoding="utf-8"))[key])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def sweep(sweeper: Any, arguments: list[str]) -> None:
    # lazy: optuna, numpy, hydra_plugins.evalpipe_optuna_sweeper._urls, ~296 ms
    import optuna
    from optuna.trial import TrialState

    from hydra_plugins.evalpipe_optuna_sweeper._urls import masked

    s = sweeper.settings
    assert sweeper.config is not None
    params = s.get("params")
    if isinstance(params, DictConfig):
        params = OmegaConf.to_container(params, resolve=True)
    dists, fixed = search_space(params, arguments)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # Heartbeats are beaten here (Heartbeat), not by Study.optimize, and fail_stale_trials is the
    # documented way to use them with ask/tell: Optuna's warnings about both are noise here.
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    storage_url = s.get("storage")
    storage = _storage(storage_url, s)
    n_trials, n_jobs = int(s.get("n_trials") or 0), max(1, int(s.get("n_jobs") or 1))
    try:
        study = optuna.create_study(
            study_name=s.get("study_name"),
            storage=storage,
            sampler=_sampler(sweeper, shared=storage is not None),
            directions=_directions(s.get("direction", "minimize")),
            load_if_exists=True,
        )
    except ValueError as exc:  # e.g. the stored study optimises the other direction
        fail(f"Optuna study {s.get('study_name')!r} in {masked(str(storage_url))}: {exc}")
    where = f"in {masked(str(storage_url))}" if storage is not None else "in memory"
    print(
        f"[optuna] study {study.study_name!r} {where}: {live_count(study)} of {n_trials} trials there",
        file=sys.stderr,
    )
    sweep_dir = Path(str(sweeper.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    failures = done = 0
    while True:
        if storage is not None:
            optuna.storages.fail_stale_trials(study)
        missing = n_trials - live_count(study)
        if missing <= 0:
            break
        trials = []
        for _ in range(min(n_jobs, missing)):
            trial = study.ask(fixed_distributions=dists)
            if storage is not None and live_count(study, before=trial.number) >= n_trials:
                # Another process asked first: the study already has its n_trials.
                trial.set_user_attr("evalpipe.not_run", "surplus: the study already had n_trials trials")
                study.tell(trial, state=TrialState.FAIL)
                continue
            trials.append(trial)
        if not trials:
            continue
        overrides = [[*fixed, *(f"{key}={value}" for key, value in trial.params.items())] for trial in trials]
        interval = float(s.get("heartbeat_interval") or 10)
        try:
            if storage is not None:
                with Heartbeat(storage, [t._trial_id for t in trials], interval):
                    returns = sweeper.launcher.launch(overrides, initial_job_idx=sweeper.job_idx)
            else:
                returns = sweeper.launcher.launch(overrides, initial_job_idx=sweeper.job_idx)
        except BaseException:  # Ctrl-C, SIGTERM, a job's SystemExit: these trials did not finish
            for trial in trials:
                try:
                    study.tell(trial, state=TrialState.FAIL)
                except Exception:
                    continue
            raise
        sweeper.job_idx += len(trials)
        raised: BaseException | None = None
        for trial, ret in zip(trials, returns, strict=True):
            value, error = _value(ret)
            run_id = _run_id(ret)
            if run_id:
                trial.set_user_attr("mlflow_run_id", run_id)
            done += 1
            if value is None:
                study.tell(trial, state=TrialState.FAIL)
                if error is not None:
                    failures += 1
                    raised = raised or error
            else:
                study.tell(trial, value)
        if raised is not None and failures / done > float(s.get("max_failure_rate") or 0.0):
            raise raised
    _write_results(study, sweep_dir)


def _write_results(study: Any, sweep_dir: Path) -> None:
    """optimization_results.yaml (hydra-optuna-sweeper's file, logged on the sweep's parent run)."""

    try:
        best = study.best_trial
    except ValueError:  # no COMPLETE trial
        return
    results = {
        "name": "optuna",
        "study_name": study.study_name,
        "best_params": dict(best.params),
        "best_value": best.value,
        "best_trial": best.number,
    }
    (sweep_dir / "optimization_results.yaml").write_text(yaml.safe_dump(results, sort_keys=False))
    print(f"[optuna] best of study {study.study_name!r}: {best.value} with {best.params}", file=sys.stderr)
