"""What a finished sweep measured: one row per point, the best point per metric, summary.md / .csv.

The parent run of a sweep (see `evalpipe.sweeps.callback`) gathers its points from two
places because resume makes them diverge: child runs (tag mlflow.parentRunId)
measured in this invocation, and earlier FINISHED runs a job reused instead of
re-measuring (it leaves `reused_run.json` in its Hydra output dir). Rows carry
only plain values so this module is testable without MLflow or Hydra.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evalpipe.reporting.report import DASH, markdown_table, pct
from evalpipe.scoring.names import metric_name
from evalpipe.tracking.reuse import REUSED_TAG
from evalpipe.tracking.sweep_job import ROLE_TAG, SWEEP_TAG

SWEPT_TAG_PREFIX = "evalpipe.swept."
REUSED = "REUSED"
#: A point whose ranker could not load (tag evalpipe.skipped): it measured nothing.
SKIPPED = "SKIPPED"
#: Statuses whose metrics count (a reused run is a FINISHED run of the same configuration).
MEASURED = ("FINISHED", REUSED)
#: Runs under a sweep's parent that are not its points: the parent itself, the hold-out re-runs.
NOT_POINTS = ("parent", "holdout")
HOLDOUT_DIR = "holdout"


@dataclass(frozen=True)
class SweepRow:
    """One point of a sweep: its swept values, its run and that run's metrics."""

    job: int | None
    run_id: str
    run_name: str
    status: str
    values: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)

    @property
    def measured(self) -> bool:
        return self.status in MEASURED


def _key(item: str) -> str:
    return item.partition("=")[0].strip().lstrip("+~")


def swept_keys(sweeper_params: Mapping[str, Any] | None, task_overrides: Sequence[str]) -> list[str]:
    """Keys a sweep varies: `hydra.sweeper.params` (presets), then command-line sweep overrides.

    Uses Hydra's own override parser so `ranker.k1=0.9,1.2`, `range(1,4)` and
    Optuna's `interval(0, 1)` count, while `fixture.path=x` does not.
    """
    # lazy: hydra, omegaconf, ~105 ms
    from hydra.core.override_parser.overrides_parser import OverridesParser

    keys = [_key(str(k)) for k in (sweeper_params or {})]
    parser = OverridesParser.create()
    for item in task_overrides:
        try:
            override = parser.parse_override(item)
        except Exception:  # not ours to validate: Hydra already accepted the command line
            continue
        if override.is_sweep_override() and _key(item) not in keys:
            keys.append(_key(item))
    return keys


def job_dir_info(job_dir: Path) -> tuple[int | None, dict[str, str]]:
    """(job number, {key: value} of task overrides) from the `.hydra/` files Hydra writes per job."""
    hydra_dir = job_dir / ".hydra"
    num: int | None = None
    overrides: dict[str, str] = {}
    try:
        hydra_cfg = yaml.safe_load((hydra_dir / "hydra.yaml").read_text(encoding="utf-8")) or {}
        raw = hydra_cfg.get("hydra", {}).get("job", {}).get("num")
        num = int(raw) if raw is not None else None
    except (OSError, yaml.YAMLError, ValueError, TypeError, AttributeError):
        num = int(job_dir.name) if job_dir.name.isdigit() else None
    try:
        items = yaml.safe_load((hydra_dir / "overrides.yaml").read_text(encoding="utf-8")) or []
        for item in items:
            key, _, value = str(item).partition("=")
            overrides[key.lstrip("+~")] = value
    except (OSError, yaml.YAMLError, TypeError):
        pass
    return num, overrides


def reused_runs(sweep_dir: str | Path, since: float = 0.0) -> list[tuple[str, Path]]:
    """(run_id, job dir) for each job of this invocation that reused a finished run.

    `since` (epoch seconds) ignores markers left by an earlier invocation into the same sweep dir.
    """
    out = []
    root = Path(sweep_dir)
    if not root.is_dir():
        return out
    for marker in sorted(root.rglob("reused_run.json")):
        if HOLDOUT_DIR in marker.relative_to(root).parts[:-2]:
            continue  # a hold-out re-run reused a run: not a point of the sweep
        try:
            if marker.stat().st_mtime < since:
                continue
            run_id = json.loads(marker.read_text(encoding="utf-8"))["run_id"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out.append((str(run_id), marker.parent))
    return out


def row_from_run(run: Any, keys: Sequence[str], status: str | None = None, job_overrides=None, job=None):
    """A SweepRow from an MLflow Run: values from evalpipe.swept.* tags, the job's overrides, or params."""
    tags = run.data.tags
    params = run.data.params
    job_overrides = job_overrides or {}
    values = {}
    for key in keys:
        value = job_overrides.get(key)
        if value is None:
            value = tags.get(SWEPT_TAG_PREFIX + key)
        if value is None:
            value = params.get(key)
        values[key] = DASH if value is None else str(value)
    if job is None and tags.get("evalpipe.job_num", "").isdigit():
        job = int(tags["evalpipe.job_num"])
    reused = tags.get(REUSED_TAG)  # a reuse child stands for the run that measured the point
    if reused and str(run.info.status) == "FINISHED":
        status = status or REUSED
    return SweepRow(
        job=job,
        run_id=reused or run.info.run_id,
        run_name=run.info.run_name or "",
        status=status or (SKIPPED if tags.get("evalpipe.skipped") else str(run.info.status)),
        values=values,
        metrics={k: float(v) for k, v in run.data.metrics.items()},
    )


def search_all(client: Any, filter_string: str) -> list[Any]:
    """Every run matching `filter_string` in any active experiment (a swept fixture changes experiment)."""
    exp_ids = [e.experiment_id for e in client.search_experiments()]
    runs: list[Any] = []
    token = None
    while exp_ids:
        page = client.search_runs(exp_ids, filter_string=filter_string, max_results=1000, page_token=token)
        runs.extend(page)
        token = page.token
        if not token:
            break
    return runs


def collect_rows(
    client: Any, parent_run_id: str, sweep_dir: str | Path, keys: Sequence[str], since: float = 0.0
) -> list[SweepRow]:
    """Every point of the sweep: its child runs plus the runs its jobs reused, in job order."""
    rows = [
        row_from_run(run, keys)
        for run in search_all(client, f"tags.`mlflow.parentRunId` = '{parent_run_id}'")
        if run.data.tags.get(ROLE_TAG) not in NOT_POINTS
    ]
    seen = {(r.job, r.run_id) for r in rows}
    seen_ids = {r.run_id for r in rows}
    for run_id, job_dir in reused_runs(sweep_dir, since):
        job, overrides = job_dir_info(job_dir)
        if (job, run_id) in seen or (job is None and run_id in seen_ids):
            continue  # already listed through its reuse child
        try:
            run = client.get_run(run_id)
        except Exception:
            continue  # deleted since: nothing to summarise
        rows.append(row_from_run(run, keys, status=REUSED, job_overrides=overrides, job=job))
    return sort_rows(rows)


def sort_rows(rows: Iterable[SweepRow]) -> list[SweepRow]:
    """Job order (the sweeper's own order), then run id: stable across reruns and launchers."""
    return sorted(rows, key=lambda r: (r.job is None, r.job if r.job is not None else 0, r.run_id))


def ks_of(rows: Sequence[SweepRow], family: str = "recall") -> list[int]:
    pattern = re.compile(rf"^{family}_at_(\d+)$")
    return sorted({int(m.group(1)) for r in rows for name in r.metrics if (m := pattern.match(name))})


def best_metric_names(rows: Sequence[SweepRow], objective: str) -> list[str]:
    """The objective, then recall_at_K, mrr, ndcg_at_K for every K the runs have."""
    present = {n for r in rows for n in r.metrics}
    names = [objective if objective in present else metric_name(objective)]
    names += [f"recall_at_{k}" for k in ks_of(rows)]
    names += ["mrr"]
    names += [f"ndcg_at_{k}" for k in ks_of(rows, "ndcg")]
    return [n for n in dict.fromkeys(names) if n in present]


def best_points(rows: Sequence[SweepRow], metrics: Sequence[str]) -> dict[str, SweepRow]:
    """The measured row with the highest value of each metric; ties go to the earliest point."""
    best: dict[str, SweepRow] = {}
    for name in metrics:
        for row in rows:
            if not row.measured or name not in row.metrics:
                continue
            if name not in best or row.metrics[name] > best[name].metrics[name]:
                best[name] = row
    return best


def _cell(text: str) -> str:
    """A swept value for a Markdown cell: floats to 4 significant digits (Optuna's 1.5073897086401147)."""
    try:
        number = float(text)
    except ValueError:
        return text.replace("|", "\\|")
    return text if len(text) <= 8 else f"{number:.4g}"


def _fmt(row: SweepRow, name: str, kind: str) -> str:
    if name not in row.metrics:
        return DASH
    value = row.metrics[name]
    if kind == "pct":
        return pct(value)
    if kind == "int":
        return f"{value:.0f}"
    return f"{value:.4f}" if kind == "4f" else f"{value:.3f}"


def _columns(rows: Sequence[SweepRow]) -> list[tuple[str, str, str]]:
    """(header, metric name, format): the report's R@K / MRR / nDCG@K columns plus p95 latency."""
    cols = [(f"R@{k}", f"recall_at_{k}", "pct") for k in ks_of(rows)]
    cols.append(("MRR", "mrr", "3f"))
    cols += [(f"nDCG@{k}", f"ndcg_at_{k}", "4f") for k in ks_of(rows, "ndcg")]
    cols.append(("p95 µs", metric_name("latency_p95_us"), "int"))
    return cols


def points_table(
    rows: Sequence[SweepRow],
    keys: Sequence[str],
    tied_ids: Collection[str] | None = None,
    ranks: Mapping[str, str] | None = None,
) -> tuple[list[str], list[list[str]]]:
    """The points' figures; with `tied_ids` (run IDs), a `tied` column marking the points tied with
    the best, and with `ranks` ({run ID: `rank [lo-hi]`}) each point's rank on the objective with
    its simultaneous 95% interval (`sweeps.significance`: the same family as `tied`)."""
    cols = _columns(rows)
    tied = [] if tied_ids is None else ["tied"]
    rank = [] if ranks is None else ["rank [sim. CI]"]
    header = ["job", *keys, *(h for h, _, _ in cols), *rank, *tied, "status", "run"]
    body = [
        [
            DASH if r.job is None else str(r.job),
            *(_cell(r.values.get(k, DASH)) for k in keys),
            *(_fmt(r, name, kind) for _, name, kind in cols),
            *([(ranks or {}).get(r.run_id, "")] if rank else []),
            *(["="] if tied and r.run_id in (tied_ids or ()) else [""] if tied else []),
            r.status.lower(),
            f"`{r.run_id}`",
        ]
        for r in rows
    ]
    return header, body


def summary_markdown(
    rows: Sequence[SweepRow],
    keys: Sequence[str],
    objective: str,
    sweep_id: str = "",
    title: str = "",
    note: str = "",
    holdout_lines: Sequence[str] = (),
    tied_lines: Sequence[str] = (),
    tied: Collection[str] | None = None,
    ranks: Mapping[str, str] | None = None,
) -> str:
    """The sweep's Markdown summary: the hold-out check (dev-split sweeps, `holdout.markdown`'s
    lines, rendered by the caller so this module never imports `holdout`, which imports it), the
    points tied with the best (`significance.markdown`'s lines; `tied`: their run IDs), every
    point, the best point per metric."""
    failed = sum(r.status == "FAILED" for r in rows)
    reused = sum(r.status == REUSED for r in rows)
    out = [f"# evalpipe sweep summary{': ' + title if title else ''}", ""]
    meta = [f"{len(rows)} points", f"{reused} reused", f"{failed} failed", f"objective: `{objective}`"]
    if sweep_id:
        meta.insert(0, f"sweep `{sweep_id}`")
    out += ["_" + " · ".join(meta) + "_", ""]
    if note:
        out += [f"**{note}**", ""]
    out += list(holdout_lines)
    out += list(tied_lines)
    out += ["## Points", ""] + markdown_table(*points_table(rows, keys, tied, ranks)) + [""]
    best = best_points(rows, best_metric_names(rows, objective))
    if best:
        header = ["metric", "best", "job", *keys, "run"]
        body = [
            [
                name,
                f"{row.metrics[name]:.4f}",
                DASH if row.job is None else str(row.job),
                *(_cell(row.values.get(k, DASH)) for k in keys),
                f"`{row.run_id}`",
            ]
            for name, row in best.items()
        ]
        out += ["## Best point per metric", ""] + markdown_table(header, body) + [""]
    return "\n".join(out)


def summary_csv(rows: Sequence[SweepRow], keys: Sequence[str], holdout: Any = None) -> str:
    """Every point with every overall metric (not per tier, not index statistics), for spreadsheets;
    a dev-split sweep's hold-out re-runs last (status HOLDOUT, measured on the test split)."""
    rows = list(rows)
    for run in (holdout.best, holdout.default) if holdout is not None else ():
        if run is not None and run.run_id and run.metrics:
            name = f"holdout {run.which} (test split)"
            rows.append(SweepRow(None, run.run_id, name, "HOLDOUT", {}, run.metrics))
    metric_names = sorted({n for r in rows for n in r.metrics if not n.startswith(("tier/", "index/"))})
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["job", "status", "run_id", "run_name", *keys, *metric_names])
    for r in rows:
        writer.writerow(
            [
                "" if r.job is None else r.job,
                r.status,
                r.run_id,
                r.run_name,
                *(r.values.get(k, "") for k in keys),
                *(repr(r.metrics[n]) if n in r.metrics else "" for n in metric_names),
            ]
        )
    return buf.getvalue()


def sweep_run_ids(client: Any, sweep_id: str) -> list[str]:
    """Run IDs of every point of sweep `sweep_id`: its children plus runs its parents' summary.csv lists."""
    ids = [
        r.data.tags.get(REUSED_TAG) or r.info.run_id  # a reuse child: the run that has the cases
        for r in search_all(client, f"tags.`{SWEEP_TAG}` = '{sweep_id}'")
        if r.data.tags.get(ROLE_TAG) == "child" and r.info.status == "FINISHED"
    ]
    parents = search_all(client, f"tags.`{SWEEP_TAG}` = '{sweep_id}' and tags.`{ROLE_TAG}` = 'parent'")
    for parent in parents:
        try:
            with tempfile.TemporaryDirectory(prefix="evalpipe-") as tmp:
                path = client.download_artifacts(parent.info.run_id, "summary.csv", tmp)
                reader = csv.DictReader(Path(path).read_text(encoding="utf-8").splitlines())
                ids += [row["run_id"] for row in reader if row.get("status") in MEASURED]
        except Exception:
            continue  # a parent that never wrote its summary (killed sweep)
    return list(dict.fromkeys(ids))


def top_points(rows: Sequence[SweepRow], objective: str, n: int = 10) -> list[SweepRow]:
    """The `n` measured points with the highest objective (ties: job order), then failed ones are left out."""
    name = objective if any(objective in r.metrics for r in rows) else metric_name(objective)
    scored = [r for r in rows if r.measured and name in r.metrics]
    return sorted(scored, key=lambda r: -r.metrics[name])[:n]


def best_line(rows: Sequence[SweepRow], keys: Sequence[str], objective: str) -> str:
    """`best recall_at_5 = 0.8833: job 1 · ranker.k1=0.9 ranker.b=0.75 · run <id>` (plain text)."""
    top = top_points(rows, objective, 1)
    if not top:
        return f"best {objective}: no measured point"
    row = top[0]
    name = objective if objective in row.metrics else metric_name(objective)
    values = " ".join(f"{k}={_cell(row.values.get(k, DASH))}" for k in keys)
    job = "" if row.job is None else f"job {row.job} · "
    return f"best {objective} = {row.metrics[name]:.4f}: {job}{values or row.run_name} · run {row.run_id}"


def sweep_description(
    rows: Sequence[SweepRow], keys: Sequence[str], objective: str, sweep_id: str, n: int = 10
) -> str:
    """The parent run's MLflow description: the top points by the objective and the best point."""
    failed = sum(r.status == "FAILED" for r in rows)
    reused = sum(r.status == REUSED for r in rows)
    top = top_points(rows, objective, n)
    out = [
        f"**Sweep `{sweep_id}`** · {len(rows)} points · {reused} reused · {failed} failed · "
        f"objective `{objective}`",
        "",
        f"**{best_line(rows, keys, objective)}**",
        "",
        f"#### Top {len(top)} points by {objective}",
        "",
    ]
    out += markdown_table(*points_table(top, keys)) + [""]
    out += ["_Every point: summary.md in the artifacts, and the child runs nested under this run._"]
    return "\n".join(out)
