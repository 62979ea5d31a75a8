"""Ray side of the launcher: start or join Ray, run each job as a task, collect or cancel.

Decisions (each a failure seen with hydra-ray-launcher or a plain `ray.get` loop):
- Joining a running cluster drops the ray.init options that only size a new instance
  (Ray raises "When connecting to an existing cluster, object_store_memory must not be
  provided"); a local instance gets no dashboard unless asked (it costs a core here).
- `max_retries` defaults to 0: Ray's default retries a task whose worker died, which
  measures the point again while its first MLflow run is left behind.
- A point whose worker died (or node, or whose task could not start) does not stop the
  sweep: one line names the point and why, the job returns NaN like any failed point, and
  the sweep's parent ends that point's still-RUNNING run FAILED. The next `-m` measures it.
- Ctrl-C / SIGTERM on the driver cancels every task (queued ones never start; running ones
  get KeyboardInterrupt, so evalpipe saves them KILLED), waits `cancel_grace_s` for them,
  then lets the interrupt go on to Hydra and evalpipe's one-line exit.
- The sweep dir is made absolute and a task runs in the driver's working directory when that
  exists on its node, so relative paths mean the same on every worker of one machine.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from omegaconf import DictConfig, open_dict

from evalpipe.safety.errors import fail, print_error

log = logging.getLogger(__name__)

#: ray.init options that size or configure a new instance; Ray refuses them for a running cluster.
NEW_INSTANCE_ONLY = (
    "num_cpus",
    "num_gpus",
    "resources",
    "labels",
    "object_store_memory",
    "_system_config",
    "_enable_object_reconstruction",
    "include_dashboard",
    "dashboard_host",
    "dashboard_port",
)


def joins_cluster(init_kwargs: dict[str, Any]) -> bool:
    """True when ray.init will connect to a running cluster rather than start one."""
    address = init_kwargs.get("address")
    if address == "local":  # Ray's word for "start a new local instance"
        return False
    return bool(address) or bool(os.environ.get("RAY_ADDRESS"))


def init_options(init_kwargs: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(kwargs for ray.init, keys dropped because they only apply to a new instance)."""
    kwargs = {k: v for k, v in init_kwargs.items() if v is not None or k == "address"}
    if not kwargs.get("address") or kwargs.get("address") == "local":
        kwargs.pop("address", None)
    if joins_cluster(kwargs):
        dropped = [k for k in NEW_INSTANCE_ONLY if k in kwargs]
        for key in dropped:
            kwargs.pop(key)
        return kwargs, dropped
    kwargs.setdefault("include_dashboard", False)
    # ray.init() without an address joins the cluster recorded by the last `ray start`
    # (/tmp/ray/ray_current_cluster), even one long gone; "local" always starts a new instance.
    kwargs["address"] = "local"
    return kwargs, []


def recorded_cluster() -> str | None:
    """The address the last `ray start` on this machine recorded (what address=auto joins), if any."""
    try:
        # lazy: ray, requests, ~283 ms (in a try)
        from ray._private.services import find_bootstrap_address

        return find_bootstrap_address(None)
    except Exception:
        return None


def cluster_named(kwargs: dict[str, Any]) -> str:
    """The cluster a joining ray.init goes to, in words: the address, RAY_ADDRESS, or the recorded one."""
    address = kwargs.get("address")
    if os.environ.get("RAY_ADDRESS") and address in (None, "auto"):
        return f"{os.environ['RAY_ADDRESS']} (from RAY_ADDRESS)"
    if address == "auto":
        recorded = recorded_cluster()
        where = f"{recorded} " if recorded else ""
        return f"the cluster {where}recorded by the last `ray start` (/tmp/ray/ray_current_cluster)"
    return str(address)


def start_ray(init_kwargs: dict[str, Any]) -> None:
    """Start a local Ray instance or join a cluster (once per process); a local one stops at exit."""
    # lazy: ray, requests, ~318 ms
    import ray

    if ray.is_initialized():
        return
    kwargs, dropped = init_options(init_kwargs)
    joining = joins_cluster(kwargs)
    cluster = cluster_named(kwargs) if joining else None
    if joining:
        print(f"[ray] joining {cluster}", file=sys.stderr)
    for key in dropped:
        print(
            f"[ray] hydra.launcher.ray.init.{key} ignored: it sizes a new Ray instance, "
            f"and this sweep joins the running cluster at {cluster}",
            file=sys.stderr,
        )
    kwargs.setdefault("log_to_driver", True)
    # ray.init installs a C-level failure handler for SIGTERM that aborts the driver (exit -6,
    # a stack dump): the Python handlers in place before it (evalpipe's: cancel, save, one line,
    # exit 143) are put back after it.
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.init(**kwargs)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = cluster or "a new local instance"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        fail(f"cannot start Ray ({where}): {first}")
    finally:
        _restore_signals(saved)
    if not joins_cluster(kwargs):
        atexit.register(ray.shutdown)


def _restore_signals(saved: dict[int, Any]) -> None:
    for signum, handler in saved.items():
        if handler is not None:
            signal.signal(signum, handler)


def run_in_worker(
    idx: int,
    sweep_config: DictConfig,
    shared: dict[str, Any],
) -> dict[str, Any]:
    """The body of every task: run one Hydra job, return its JobReturn (or its SystemExit code).

    A job's SystemExit (evalpipe's "bad input, exit 2", an interrupted point's 130) is returned,
    not raised: raised in a Ray task it would end the worker and look like a crash.
    """
    # lazy: ray, requests, ~314 ms
    import ray

    setup_globals()
    Singleton.set_state(shared["singleton_state"])
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    cwd = os.getcwd()
    if os.path.isdir(shared["cwd"]):
        os.chdir(shared["cwd"])
    node = ray.get_runtime_context().get_node_id()
    out: dict[str, Any] = {"node_id": node, "pid": os.getpid(), "exit_code": None, "job_return": None}
    try:
        HydraConfig.instance().set_config(sweep_config)
        out["job_return"] = run_job(
            hydra_context=shared["hydra_context"],
            config=sweep_config,
            task_function=shared["task_function"],
            job_dir_key="hydra.sweep.dir",
            job_subdir_key="hydra.sweep.subdir",
        )
    except SystemExit as exc:
        out["exit_code"] = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:  # cancelled before the job's own handling started
        out["exit_code"] = 130
    finally:
        _restore_signals(saved)  # a reused worker must keep Ray's own handlers between tasks
        os.chdir(cwd)
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "ray::")):
            return f"{type(exc).__name__}: {line}"
    return type(exc).__name__


def point_label(overrides: Sequence[str], batch: Sequence[Sequence[str]]) -> str:
    """The overrides that make this point what it is: the swept keys (EVALPIPE_SWEPT_KEYS, set by
    evalpipe's sweep callback), else those whose value differs within the batch, else all."""

    def key(item: str) -> str:
        return item.partition("=")[0].lstrip("+~")

    swept = set(filter(None, os.environ.get("EVALPIPE_SWEPT_KEYS", "").split(",")))
    if not swept and len(batch) > 1:
        values: dict[str, set[str]] = {}
        for job in batch:
            for item in job:
                values.setdefault(key(item), set()).add(item)
        swept = {k for k, v in values.items() if len(v) > 1}
    chosen = [o for o in filter_overrides(overrides) if not swept or key(o) in swept]
    return " ".join(chosen) or "no overrides"


def _sweep_config(launcher: Any, idx: int, overrides: Sequence[str]) -> DictConfig:
    cfg = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
    with open_dict(cfg):
        cfg.hydra.job.id = f"{cfg.hydra.job.name}_{idx}"
        cfg.hydra.job.num = idx
        cfg.hydra.sweep.dir = os.path.abspath(str(cfg.hydra.sweep.dir))
    return cfg


def lost_return(cfg: DictConfig, overrides: Sequence[str]) -> JobReturn:
    """What the sweeper gets for a point whose task never returned: NaN, like a failed point."""
    ret = JobReturn(overrides=list(overrides), cfg=cfg, hydra_cfg=None, status=JobStatus.COMPLETED)
    ret.return_value = float("nan")
    return ret


def launch(
    launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
) -> Sequence[JobReturn]:
    # lazy: ray, requests, ~310 ms
    import ray

    setup_globals()
    assert launcher.config is not None and launcher.task_function is not None
    assert launcher.hydra_context is not None
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    sweep_dir = Path(os.path.abspath(str(launcher.config.hydra.sweep.dir)))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    start_ray(launcher.init_kwargs)
    on_cluster = joins_cluster(launcher.init_kwargs)

    remote = {"max_retries": 0, **launcher.remote_kwargs}
    env = {k: os.environ[k] for k in launcher.forward_env if k in os.environ}
    if env:
        runtime_env = dict(remote.get("runtime_env") or {})
        runtime_env["env_vars"] = {**env, **dict(runtime_env.get("env_vars") or {})}
        remote["runtime_env"] = runtime_env
    task = ray.remote(run_in_worker).options(**remote)
    shared = ray.put(
        {
            "hydra_context": launcher.hydra_context,
            "task_function": launcher.task_function,
            "singleton_state": Singleton.get_state(),
            "cwd": os.getcwd(),
        }
    )
    log.info(f"Ray launcher: {len(job_overrides)} jobs, sweep output dir {sweep_dir}")
    configs, refs = [], {}
    for i, overrides in enumerate(job_overrides):
        idx = initial_job_idx + i
        log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        cfg = _sweep_config(launcher, idx, overrides)
        configs.append(cfg)
        refs[task.remote(idx, cfg, shared)] = i

    results: list[JobReturn | None] = [None] * len(job_overrides)
    exit_codes: list[int] = []
    pending = dict(refs)
    # A Python signal handler that raises inside ray.wait (C code) surfaces as a SystemError with a
    # traceback: while waiting, SIGINT/SIGTERM are only recorded; between waits the tasks are
    # cancelled and the signal is raised again for the handler that was in place (evalpipe's).
    caught: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        signal.signal(signum, lambda num, frame: caught.append(num))
    try:
        while pending and not caught:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                i = pending.pop(ref)
                results[i], code = _collect(
                    ref, initial_job_idx + i, job_overrides, i, configs[i], on_cluster
                )
                if code:
                    exit_codes.append(code)
    finally:
        _restore_signals(previous)
    if caught:
        _cancel(list(pending), launcher.cancel_grace_s)
        signal.raise_signal(caught[0])
    if exit_codes:  # as with the basic launcher, a job's exit ends the sweep (after the batch)
        raise SystemExit(exit_codes[0])
    return [r for r in results if r is not None]


def _collect(
    ref: Any, idx: int, batch: Sequence[Sequence[str]], i: int, cfg: DictConfig, on_cluster: bool
) -> tuple[JobReturn, int]:
    """(the job's JobReturn, its non-zero SystemExit code or 0); a lost task gets one line and NaN."""
    # lazy: ray, requests, ~305 ms
    import ray

    try:
        out = ray.get(ref)
    except ray.exceptions.RayError as exc:
        what, why = point_label(batch[i], batch), _one_line(exc).rstrip(".")
        print_error(
            f"sweep point #{idx} ({what}) lost on Ray: {why}; "
            "its run ends FAILED and running this sweep again measures it"
        )
        return lost_return(cfg, batch[i]), 0
    if on_cluster:  # where each point ran (all on this machine for a local instance)
        print(f"[ray] #{idx} ran on node {out['node_id']}", file=sys.stderr)
    if out["exit_code"] is not None:
        return lost_return(cfg, batch[i]), int(out["exit_code"])
    return out["job_return"], 0


def _cancel(refs: list[Any], grace_s: float) -> None:
    # lazy: ray, requests, ~306 ms
    import ray

    if not refs:
        return
    print(f"[ray] cancelling {len(refs)} unfinished sweep jobs", file=sys.stderr)
    for ref in refs:
        try:
            ray.cancel(ref, force=False)
        except Exception:  # already finished or gone
            continue
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:  # a second Ctrl-C must not cut the jobs' saving short
        signal.signal(signum, lambda num, frame: None)
    try:
        ray.wait(refs, num_returns=len(refs), timeout=grace_s)
    finally:
        _restore_signals(previous)
