"""`python -m evalpipe suite=code ranker=bm25f`: every fixture of a suite under one suite run.

The suite run (MLflow, experiment `<prefix>/suite-<name>`) is opened first; each fixture is
then an ordinary run in its own process (`members`), a child of the suite run. The suite
run logs every fixture's figures (`suite/<fixture>/<metric>`), the macro mean and the
minimum of each (`suite/mean/...`, `suite/min/...`), the headline names themselves as the
`objective_agg` of the fixtures (mean by default), and the worst fixture; it returns that
objective, so a sweep over a suite optimises the macro average (or the worst case).
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalpipe import __version__
from evalpipe.reporting.local import unsynced
from evalpipe.safety import signals
from evalpipe.safety.errors import EvalpipeError, fail
from evalpipe.safety.secrets import mask_config, mask_mapping, mask_text, register_config

#: The suite run's ID and status in its output dir (what a sweep's hold-out re-run reads back).
SUITE_FILE = "suite_run.json"


def evaluate_suite(cfg: DictConfig) -> float:
    # lazy: rich, ~24 ms
    from rich.console import Console

    # lazy: evalpipe.evaluation.identity, evalpipe.inputs.split, ~16 ms
    from evalpipe.evaluation.identity import default_run_name, experiment_name, hydra_context
    from evalpipe.inputs.split import SPLIT_TAG, settings_from

    # lazy: evalpipe.suite.spec, evalpipe.sweeps, evalpipe.tracking, ~19 ms
    from evalpipe.suite.spec import check_suite, conf_dirs, fixture_options
    from evalpipe.tracking import mlflow_store
    from evalpipe.tracking import sweep_job as sweep_job
    from evalpipe.tracking.run_store import RunStore, StoreSettings

    signals.install()
    register_config(cfg)
    console = Console(width=None if sys.stdout.isatty() else 160)
    ranker_choice, overrides, out_dir = hydra_context()
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
        assert isinstance(resolved, dict)
        searchpath = _searchpath()
        suite = check_suite(
            resolved.get("suite"), resolved.get("objective_agg"), fixture_options(conf_dirs(searchpath))
        )
        split = settings_from(resolved.get("fixture"))
    except EvalpipeError as exc:
        fail(str(exc))
    except Exception as exc:  # an interpolation that cannot resolve
        fail(f"cannot resolve the config: {' '.join(str(exc).split())}")
    _check_members(suite, overrides)  # every fixture's run checked before the first one measures
    objective = str(resolved.get("objective") or "recall_at_5")
    if out_dir is not None:  # a member's folder holding an unsynced run: refused before the suite run
        for fixture in suite.fixtures:
            kept = unsynced(out_dir / fixture)
            if kept:
                fail(f"suite {suite.name}: fixture {fixture}: {kept}")
    out = out_dir or Path(tempfile.mkdtemp(prefix="evalpipe-suite-"))
    offline = bool(cfg.tracking.get("offline", False))
    experiment = experiment_name(cfg)
    settings = StoreSettings(
        uri=None if offline else str(cfg.tracking.uri),
        experiment=experiment,
        offline=offline,
        ks=tuple(int(k) for k in resolved.get("ks") or ()),
        objective=objective,
    )
    store = RunStore.choose(settings, worker_allowed=False)  # the members open their own
    tracker, experiment_id = store.tracker, store.experiment_id
    job = sweep_job.job_context(tracker, experiment_id) if tracker is not None else sweep_job.JobContext()
    overrides = [*overrides, *_hydra_overrides()]
    plain = [o for o in overrides if not o.lstrip("+~").startswith(("suite=", "objective_agg="))]
    run_name = mask_text(
        str(resolved.get("run_name") or f"{default_run_name(ranker_choice, plain)} suite={suite.name}")
    )
    tags = {
        **job.tags,
        "evalpipe.version": __version__,
        "evalpipe.git_revision": mlflow_store.git_revision(),
        "evalpipe.suite": suite.name,
        "evalpipe.suite.fixtures": ",".join(suite.fixtures),
        "evalpipe.suite.agg": suite.agg,
        SPLIT_TAG: split.split,
        "evalpipe.ranker": ranker_choice,
        "evalpipe.objective": objective,
    }
    parent = store.create_parent(run_name, mask_mapping(tags))
    status = "FAILED"
    try:
        members = []
        for i, fixture in enumerate(suite.fixtures, 1):
            print(f"[evalpipe] suite {suite.name}: {fixture} ({i}/{len(suite.fixtures)})", file=sys.stderr)
            member = _run_member(suite.name, fixture, overrides, out / fixture, parent, tracker, experiment)
            if member.code != 0 or not member.metrics:
                why = f"exit {member.code}" if member.code else "no figures saved"
                fail(
                    f"suite {suite.name}: fixture {fixture} did not finish ({why}); the suite run is FAILED",
                    member.code or 1,
                )
            members.append(member)
        figures = _record(
            suite, members, objective, split, ranker_choice, run_name, out, tracker, parent, resolved
        )
        status = "FINISHED"
        marker = {"run_id": parent or "", "status": status}
        (out / SUITE_FILE).write_text(json.dumps(marker), encoding="utf-8")
    except BaseException as exc:
        if signals.is_interrupt(exc):
            status = "KILLED"
        raise
    finally:
        store.end_parent(parent, status)
    _print(
        console, suite, members, figures, resolved, run_name, split, tracker, experiment_id, parent, out, job
    )
    return float(figures.objective_value) if figures.objective_value is not None else float("nan")


def _check_members(suite: Any, overrides: list[str]) -> None:
    """Compose and preflight-check each fixture's run in this process (config, fixture, corpus,
    ranker, replayed files), so a suite whose second fixture is broken stops with one line before
    the first fixture is measured, and before the suite run exists."""
    # lazy: hydra, evalpipe.evaluation, numpy, ..., ~462 ms
    from hydra import compose

    from evalpipe.evaluation import preflight
    from evalpipe.evaluation.stages import fail
    from evalpipe.suite.members import member_overrides

    searchpath = [o for o in _hydra_overrides_all() if o.startswith("hydra.searchpath")]
    for fixture in suite.fixtures:
        task = [
            o for o in member_overrides(overrides, fixture, Path("."), None) if not o.startswith("hydra.")
        ]
        try:
            cfg = compose(config_name="config", overrides=[*task, *searchpath])
            preflight.check(cfg, task)
        except EvalpipeError as exc:
            fail(f"suite {suite.name}: fixture {fixture}: {exc}")
        except Exception as exc:  # Hydra's own (a missing config option, an override that does not apply)
            fail(f"suite {suite.name}: fixture {fixture}: {' '.join(str(exc).split())}")


def _hydra_overrides_all() -> list[str]:
    try:
        # lazy: hydra, ~71 ms (in a try)
        from hydra.core.hydra_config import HydraConfig

        return [str(x) for x in HydraConfig.get().overrides.hydra]
    except Exception:
        return []


def _hydra_overrides() -> list[str]:
    # lazy: evalpipe.suite.members, ~13 ms
    from evalpipe.suite.members import hydra_overrides

    try:
        # lazy: hydra, ~72 ms (in a try)
        from hydra.core.hydra_config import HydraConfig

        return hydra_overrides([str(x) for x in HydraConfig.get().overrides.hydra])
    except Exception:
        return []


def _searchpath() -> list[str]:
    try:
        # lazy: hydra, ~73 ms (in a try)
        from hydra.core.hydra_config import HydraConfig

        return [str(x) for x in HydraConfig.get().searchpath]
    except Exception:
        return []


def _run_member(suite, fixture, overrides, out_dir, parent, tracker, experiment):
    # lazy: evalpipe.suite.members, ~14 ms
    from evalpipe.suite.members import run_member

    return run_member(
        suite, fixture, overrides, out_dir, parent, tracker.uri if tracker is not None else None,
        experiment if tracker is not None else None,
    )  # fmt: skip


def _record(suite, members, objective, split, ranker_choice, run_name, out, tracker, parent, resolved):
    """The suite's figures, params and files: saved in its output dir, then logged to its run."""
    # lazy: evalpipe.reporting.params, ~2 ms
    from evalpipe.reporting.params import measurement_params

    # lazy: evalpipe.suite.aggregate, evalpipe.tracking, ~11 ms
    from evalpipe.suite.aggregate import aggregate
    from evalpipe.tracking import mlflow_store

    per_fixture = {m.fixture: dict(m.metrics) for m in members}
    figures = aggregate(per_fixture, objective, suite.agg)
    params = measurement_params(mask_config(resolved, resolved), ranker_choice)
    params = {k: v for k, v in params.items() if not k.startswith("fixture")}
    params.update(split.params())
    params.update(
        {"suite": suite.name, "suite.fixtures": json.dumps(list(suite.fixtures)), "objective_agg": suite.agg}
    )
    tags = {"evalpipe.suite.worst_fixture": figures.worst_fixture}
    tags.update({f"evalpipe.suite.run.{m.fixture}": m.run_id for m in members})
    files = {
        "suite.md": markdown(suite, per_fixture, figures, resolved, run_name, split, objective),
        "suite.csv": csv_text(per_fixture, figures),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    (out / "metrics.json").write_text(json.dumps(figures.metrics, indent=1, sort_keys=True), encoding="utf-8")
    if tracker is not None and parent is not None:
        # lazy: evalpipe.reporting.headline, numpy, ~91 ms
        from evalpipe.reporting.headline import NOTE_TAG, clip

        tags[NOTE_TAG] = clip(files["suite.md"])
        mlflow_store.log_batch(tracker, parent, metrics=figures.metrics, params=params, tags=tags)
        mlflow_store.log_artifact_files(tracker, parent, files)
    return figures


def markdown(suite, per_fixture, figures, resolved, run_name, split, objective) -> str:
    # lazy: evalpipe.reporting.report, numpy, evalpipe.suite.aggregate, ~94 ms
    from evalpipe.reporting.report import markdown_table
    from evalpipe.suite.aggregate import table

    where = f" · {split.label()}" if split.active else ""
    out = [f"# evalpipe suite `{suite.name}`: {run_name}", ""]
    out += [f"_{len(per_fixture)} fixtures{where} · objective `{objective}` = {suite.agg} over fixtures_", ""]
    out += markdown_table(*table(per_fixture, figures, list(resolved.get("ks") or [5]), suite.agg)) + [""]
    value = figures.objective_value
    out += [f"**{objective} ({suite.agg}) = {'—' if value is None else f'{value:.4f}'}** · worst fixture: "
            f"`{figures.worst_fixture or '—'}`", ""]  # fmt: skip
    return "\n".join(out)


def csv_text(per_fixture, figures) -> str:
    # lazy: standard library, ~2 ms
    import csv

    names = sorted(
        {n for m in per_fixture.values() for n in m if not n.startswith(("cost/", "index/", "fixture/"))}
    )
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["fixture", *names])
    for fixture, metrics in per_fixture.items():
        writer.writerow([fixture, *(repr(metrics[n]) if n in metrics else "" for n in names)])
    for agg in ("mean", "min"):
        writer.writerow(
            [
                f"({agg})",
                *(
                    repr(figures.metrics[f"suite/{agg}/{n}"]) if f"suite/{agg}/{n}" in figures.metrics else ""
                    for n in names
                ),
            ]
        )
    return buf.getvalue()


def _print(
    console, suite, members, figures, resolved, run_name, split, tracker, experiment_id, parent, out, job
) -> None:
    # lazy: rich, evalpipe.suite.aggregate, evalpipe.tracking.links, ~47 ms
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from evalpipe.suite.aggregate import table
    from evalpipe.tracking.links import ui_lines

    per_fixture = {m.fixture: dict(m.metrics) for m in members}
    objective = str(resolved.get("objective") or "recall_at_5")
    value = figures.objective_value
    if job.sweep_id:  # a sweep point: one line, the sweep prints the table of points
        shown = "—" if value is None else f"{value:.4f}"
        line = f"#{job.job_num} [bold]{escape(run_name)}[/]  {escape(objective)} ({suite.agg}) {shown}"
        line += f"  worst {escape(figures.worst_fixture)}  run {(parent or '')[:8]}"
        console.print(line, highlight=False)
        return
    header, body = table(per_fixture, figures, list(resolved.get("ks") or [5]), suite.agg)
    where = f" · {split.label()}" if split.active else ""
    t = Table(
        box=box.SIMPLE_HEAD,
        title=f"suite {escape(suite.name)}: {escape(run_name)}{escape(where)}",
        title_justify="left",
    )
    for i, h in enumerate(header):
        t.add_column(escape(h), justify="left" if i == 0 else "right")
    for i, row in enumerate(body):
        if i == len(per_fixture):
            t.add_section()
        t.add_row(*(escape(c) for c in row))
    console.print(t)
    shown = "—" if value is None else f"{value:.4f}"
    console.print(
        f"{escape(objective)} ({suite.agg} over {len(per_fixture)} fixtures, *) = {shown} · worst fixture: "
        f"{escape(figures.worst_fixture or '—')}",
        highlight=False,
    )
    if tracker is not None and parent is not None:
        console.print(
            f"MLflow: suite run [bold]{parent}[/] with {len(members)} fixture runs under it", highlight=False
        )
        for line in ui_lines(tracker.uri, experiment_id, parent, tracker.ui_command):
            console.print(escape(line), highlight=False, soft_wrap=True)
    else:
        console.print(f"Offline: saved in [bold]{escape(str(out))}[/]", soft_wrap=True)


def is_suite(cfg: Any) -> bool:
    return bool(cfg.get("suite"))
