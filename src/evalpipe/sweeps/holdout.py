"""A sweep tuned on the dev split, checked on the test split: the optimism gap, and tuned vs default.

The best point of a sweep is the maximum of many noisy figures, so its dev figure is
biased upwards (it was picked *because* it came out high). When a sweep runs on
`fixture.split=dev`, the sweep's parent re-runs two points on `fixture.split=test`,
cases none of the points saw: the best point by the objective, and the reference
point (the same command without the swept overrides, i.e. the ranker's defaults).
Each re-run is an ordinary `python -m evalpipe` run (the same evaluation path as
any point), linked to the sweep's parent as a child with role `holdout`.

Then, side by side:
* the best point's objective on dev and on test, and the optimism gap dev - test with
  a bootstrap CI over both case sets (dev and test are different cases: each set is
  resampled on its own, `stats.bootstrap_ci_diff_independent`);
* tuned vs default on test, paired over the test cases: the mean difference with a
  paired bootstrap CI and a paired randomization p-value (`stats`), and a warning
  when the tuned point is not significantly better.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from evalpipe.reporting.report import markdown_table
from evalpipe.safety.secrets import mask_text
from evalpipe.scoring.names import lookup
from evalpipe.tracking.cases import per_case
from evalpipe.tracking.sweep_summary import (
    HOLDOUT_DIR,  # reused_runs skips this folder
    top_points,
)

HOLDOUT_ROLE = "holdout"
HOLDOUT_TAG = "evalpipe.holdout"  # best | default
#: Overrides the re-runs set themselves.
OWN_KEYS = ("fixture.split", "hydra.run.dir", "hydra.sweep.dir", "progress")
ALPHA = 0.05
RESAMPLES = 10000


@dataclass(frozen=True)
class HoldoutRun:
    """One re-run on the test split."""

    which: str  # best | default
    overrides: tuple[str, ...]
    run_id: str = ""
    status: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True)
class Holdout:
    """The comparison the parent run, summary and terminal show."""

    objective: str
    best_job: int | None
    best_label: str
    best_dev: float
    best_test: float | None
    default_test: float | None
    n_dev: int = 0
    n_test: int = 0
    gap: float | None = None
    gap_lo: float | None = None
    gap_hi: float | None = None
    diff: float | None = None
    diff_lo: float | None = None
    diff_hi: float | None = None
    p_value: float | None = None
    best: HoldoutRun | None = None
    default: HoldoutRun | None = None
    notes: tuple[str, ...] = ()
    #: the points tied with the best on dev (`sweeps.significance`), named
    tied: tuple[str, ...] = ()
    won: int | None = None
    lost: int | None = None

    @property
    def p_adjusted(self) -> float | None:
        """The p that decides. The family is this one comparison, on test cases no point was picked
        on (the choice among the points was made on dev), so it needs no correction: adjusted = raw."""
        return self.p_value

    @property
    def beats_default(self) -> bool:
        p = self.p_adjusted
        return self.diff is not None and self.diff > 0 and p is not None and p < ALPHA

    @property
    def gap_flagged(self) -> bool:
        """The dev figure overstates the test figure by more than chance (the CI excludes 0)."""
        return self.gap_lo is not None and self.gap_lo > 0

    @property
    def verdict(self) -> str:
        if self.best_test is None or self.default_test is None:
            return "not_measured"
        return "beats_default" if self.beats_default else "not_better"

    def warnings(self) -> list[str]:
        out = []
        if self.gap_flagged:
            out.append(
                f"optimism gap: the tuned point's {self.objective} is {self.gap:+.4f} higher on dev than on "
                f"test (95% CI [{self.gap_lo:+.4f}, {self.gap_hi:+.4f}]); report the test figure"
            )
        if self.verdict == "not_better":
            p = "n/a" if self.p_value is None else f"{self.p_value:.4f}"
            diff = "n/a" if self.diff is None else f"{self.diff:+.4f}"
            tied = f"; tied with the best on dev: {', '.join(self.tied)}" if self.tied else ""
            out.append(
                f"the tuned point is NOT significantly better than the default on the test split "
                f"({self.objective} {diff}, paired p = {p}): the sweep's gain on dev may not be real{tied}"
            )
        return out


def wanted(config: Any) -> bool:
    """A hold-out check is due: the sweep ran on the dev split and `sweep.holdout` is not false."""
    fixture = config.get("fixture") or {}
    sweep = config.get("sweep") or {}
    return str(fixture.get("split") or "all") == "dev" and sweep.get("holdout", True) is not False


def override_key(item: str) -> str:
    return item.partition("=")[0].strip().lstrip("+~")


def reference_overrides(task: Sequence[str], swept: Sequence[str]) -> list[str]:
    """The sweep's command line without its swept keys (nor the keys the re-runs set)."""
    drop = set(swept) | set(OWN_KEYS)
    return [o for o in task if override_key(o) not in drop]


def job_overrides(sweep_dir: str | Path, job: int | None) -> list[str] | None:
    """The task overrides of job `job` as Hydra wrote them (`<job dir>/.hydra/overrides.yaml`)."""
    if job is None:
        return None
    root = Path(sweep_dir)
    for hydra_yaml in sorted(root.glob("*/.hydra/hydra.yaml")):
        try:
            data = yaml.safe_load(hydra_yaml.read_text(encoding="utf-8")) or {}
            num = data.get("hydra", {}).get("job", {}).get("num")
            if num is None or int(num) != job:
                continue
            items = yaml.safe_load((hydra_yaml.parent / "overrides.yaml").read_text(encoding="utf-8")) or []
            return [str(x) for x in items]
        except (OSError, yaml.YAMLError, ValueError, TypeError, AttributeError):
            continue
    return None


def best_overrides(
    sweep_dir: str | Path, row: Any, reference: Sequence[str], swept: Sequence[str]
) -> list[str]:
    """The best point's overrides: its job's own, else the reference plus its swept values."""
    items = job_overrides(sweep_dir, row.job)
    if items is not None:
        own = [o for o in items if override_key(o) not in OWN_KEYS]
        return own + [o for o in reference if override_key(o).startswith("hydra.") and o not in own]
    return list(reference) + [f"{k}={row.values[k]}" for k in swept if k in row.values]


def rerun(which: str, overrides: Sequence[str], out_dir: Path, link: Mapping[str, str]) -> HoldoutRun:
    """`python -m evalpipe <overrides> fixture.split=test` as a linked child of the sweep's parent."""

    if out_dir.is_dir():  # a sweep dir used again: never read an earlier re-run's files
        shutil.rmtree(out_dir)
    cmd = [sys.executable, "-m", "evalpipe", *overrides, "fixture.split=test"]
    cmd += [f"hydra.run.dir={out_dir}", "progress=false"]
    env = {**os.environ, **link}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    run_id, status = saved_run(out_dir)
    if proc.returncode != 0 or not run_id:
        stderr = proc.stderr.splitlines()
        lines = [ln for ln in stderr if ln.startswith("evalpipe:")] or stderr
        why = mask_text(lines[-1] if lines else f"exit {proc.returncode}")
        return HoldoutRun(which, tuple(overrides), run_id, status or "FAILED", error=why)
    return HoldoutRun(which, tuple(overrides), run_id, status)


def saved_run(out_dir: Path) -> tuple[str, str]:
    """(run ID, status) of the run saved in `out_dir`, or of the run a reused point stands for."""
    # lazy: evalpipe.reporting.local, ~5 ms
    from evalpipe.reporting.local import INFO_FILE

    try:
        info = json.loads((out_dir / INFO_FILE).read_text(encoding="utf-8"))
        return str(info.get("run_id") or ""), str(info.get("status") or "")
    except (OSError, ValueError):
        pass
    for name in ("reused_run.json", "suite_run.json"):  # a reused point; a suite run
        try:
            marker = json.loads((out_dir / name).read_text(encoding="utf-8"))
            return str(marker["run_id"]), str(marker.get("status") or "FINISHED")
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return "", ""


def objective_of(metrics: Mapping[str, float], objective: str) -> float | None:

    value = lookup(metrics, objective)
    return None if value is None else float(value)


def run_holdout(
    client: Any,
    rows: Sequence[Any],
    objective: str,
    task: Sequence[str],
    swept: Sequence[str],
    sweep_dir: str,
    link: Mapping[str, str],
    say=print,
) -> Holdout | None:
    """Re-run the best and the reference point on the test split and compare (None: nothing to do)."""

    top = top_points(rows, objective, 1)
    if not top:
        return None
    best_row = top[0]
    best_dev = objective_of(best_row.metrics, objective)
    reference = reference_overrides(task, swept)
    best = best_overrides(sweep_dir, best_row, reference, swept)
    root = Path(sweep_dir) / HOLDOUT_DIR
    runs: dict[str, HoldoutRun] = {}
    for which, overrides in (("best", best), ("default", reference)):
        if which == "default" and sorted(overrides) == sorted(best):
            runs[which] = runs["best"]  # the best point is the default configuration
            continue
        say(f"[evalpipe] hold-out: re-running the {which} point on fixture.split=test")
        tags = {HOLDOUT_TAG: which}
        run = rerun(which, overrides, root / which, {**link, "EVALPIPE_LINK_TAGS": json.dumps(tags)})
        if run.run_id and not run.error:
            try:
                metrics = {k: float(v) for k, v in client.get_run(run.run_id).data.metrics.items()}
            except Exception as exc:
                run = HoldoutRun(which, run.overrides, run.run_id, run.status, error=str(exc))
            else:
                run = HoldoutRun(which, run.overrides, run.run_id, run.status, metrics)
        runs[which] = run
    return compare(client, objective, best_row, best_dev, runs["best"], runs["default"])


def compare(
    client: Any, objective: str, best_row: Any, best_dev: float | None, best: HoldoutRun, default: HoldoutRun
) -> Holdout:
    """The figures of the hold-out check from the three runs (best on dev, best and default on test)."""
    # lazy: evalpipe.stats, ~1 ms
    from evalpipe.stats import resampling as stats

    notes = [f"{r.which} point on test: {r.error}" for r in (best, default) if r.error]
    best_test = objective_of(best.metrics, objective) if not best.error else None
    default_test = objective_of(default.metrics, objective) if not default.error else None
    label = best_row.run_name or best_row.run_id[:8]
    out: dict[str, Any] = {}
    dev_cases = per_case(client, best_row.run_id, objective)
    test_cases = per_case(client, best.run_id, objective) if best_test is not None else None
    default_cases = per_case(client, default.run_id, objective) if default_test is not None else None
    if dev_cases and test_cases:
        gap, lo, hi = stats.bootstrap_ci_diff_independent(
            np.array(list(dev_cases.values())), np.array(list(test_cases.values())), RESAMPLES
        )
        out.update(gap=gap, gap_lo=lo, gap_hi=hi, n_dev=len(dev_cases), n_test=len(test_cases))
    elif best_dev is not None and best_test is not None:
        out.update(gap=best_dev - best_test)
        notes.append("no per-case values (a suite run?): the gap has no CI and no p-value is computed")
    if test_cases and default_cases:
        shared = [c for c in test_cases if c in default_cases]
        a = np.array([test_cases[c] for c in shared])
        b = np.array([default_cases[c] for c in shared])
        diff, dlo, dhi = stats.paired_bootstrap_ci_diff(a, b, RESAMPLES)
        p = stats.paired_randomization_test(a, b, RESAMPLES)
        won, lost = int(np.sum(a > b)), int(np.sum(a < b))
        out.update(diff=diff, diff_lo=dlo, diff_hi=dhi, p_value=p, won=won, lost=lost)
    elif best_test is not None and default_test is not None:
        out.update(diff=best_test - default_test)
    return Holdout(
        objective=objective,
        best_job=best_row.job,
        best_label=label,
        best_dev=float(best_dev) if best_dev is not None else float("nan"),
        best_test=best_test,
        default_test=default_test,
        best=best,
        default=default,
        notes=tuple(notes),
        **out,
    )


# --- what the parent run, summary and terminal show ---------------------------------------------


def _f(value: float | None, signed: bool = False) -> str:
    if value is None or value != value:
        return "—"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _ci(lo: float | None, hi: float | None) -> str:
    return "—" if lo is None or hi is None else f"[{lo:+.4f}, {hi:+.4f}]"


def table(h: Holdout) -> tuple[list[str], list[list[str]]]:
    """One row per point: dev, test, gap (CI), vs default on test (CI), p, beats default."""
    header = ["point", "dev", "test", "gap dev-test", "gap 95% CI", "Δ vs default on test"]
    header += ["Δ 95% CI", "won/lost", "p", "beats default"]
    best = [
        f"tuned: {h.best_label}",
        _f(h.best_dev),
        _f(h.best_test),
        _f(h.gap, True),
        _ci(h.gap_lo, h.gap_hi),
        _f(h.diff, True),
        _ci(h.diff_lo, h.diff_hi),
        "—" if h.won is None else f"{h.won}/{h.lost}",
        "—" if h.p_value is None else f"{h.p_value:.4f}",
        {"beats_default": "yes", "not_better": "NO"}.get(h.verdict, "—"),
    ]
    default = ["default", "—", _f(h.default_test), "", "", "(baseline)", "", "", "", ""]
    return header, [best, default]


def metrics(h: Holdout) -> dict[str, float]:
    values = {
        "holdout/best_dev": h.best_dev,
        "holdout/best_test": h.best_test,
        "holdout/default_test": h.default_test,
        "holdout/gap": h.gap,
        "holdout/gap_lo": h.gap_lo,
        "holdout/gap_hi": h.gap_hi,
        "holdout/tuned_minus_default": h.diff,
        "holdout/tuned_minus_default_lo": h.diff_lo,
        "holdout/tuned_minus_default_hi": h.diff_hi,
        "holdout/p_value": h.p_value,
        "holdout/test_cases": float(h.n_test) if h.n_test else None,
        "holdout/dev_cases": float(h.n_dev) if h.n_dev else None,
    }
    return {k: float(v) for k, v in values.items() if v is not None and v == v}


def tags(h: Holdout) -> dict[str, str]:
    out = {"evalpipe.holdout.verdict": h.verdict, "evalpipe.holdout.gap_flagged": str(h.gap_flagged).lower()}
    for run in (h.best, h.default):
        if run is not None and run.run_id:
            out[f"evalpipe.holdout.{run.which}_run_id"] = run.run_id
    return out


def markdown(h: Holdout) -> list[str]:

    cases = f" · {h.n_dev} dev / {h.n_test} test cases" if h.n_test else ""
    out = ["## Hold-out check (tuned on dev, measured on test)", ""]
    out += [f"_objective `{h.objective}`{cases} · gap CI: bootstrap over both case sets · "]
    out[-1] += "Δ: paired over the test cases (bootstrap CI, randomization p; one comparison on fresh "
    out[-1] += "cases, so p needs no correction) · "
    out[-1] += "default = the sweep's command without its swept overrides_"
    out += [""] + markdown_table(*table(h)) + [""]
    out += [f"**warning: {w}**" for w in h.warnings()] + [f"_note: {n}_" for n in h.notes]
    return out + [""]


def csv_rows(h: Holdout) -> str:

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = ["objective", "point", "run_id", "dev", "test", "gap", "gap_lo", "gap_hi"]
    header += ["diff_vs_default", "diff_lo", "diff_hi", "p_value", "verdict"]
    writer.writerow(header)
    for run, dev in ((h.best, h.best_dev), (h.default, None)):
        if run is None:
            continue
        is_best = run is h.best
        writer.writerow(
            [
                h.objective,
                run.which,
                run.run_id,
                "" if dev is None else repr(dev),
                repr(h.best_test if is_best else h.default_test),
                *(repr(v) if is_best and v is not None else "" for v in (h.gap, h.gap_lo, h.gap_hi)),
                *(repr(v) if is_best and v is not None else "" for v in (h.diff, h.diff_lo, h.diff_hi)),
                repr(h.p_value) if is_best and h.p_value is not None else "",
                h.verdict if is_best else "",
            ]
        )
    return buf.getvalue()


def print_holdout(console: Any, h: Holdout) -> None:
    # lazy: rich, ~39 ms
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    header, body = table(h)
    cases = f", {h.n_dev} dev / {h.n_test} test cases" if h.n_test else ""
    t = Table(
        box=box.SIMPLE_HEAD,
        title=f"hold-out check: tuned on dev, measured on test ({escape(h.objective)}{cases}; "
        "default = the command without the swept overrides)",
        title_justify="left",
    )
    for i, col in enumerate(header):
        t.add_column(escape(col), justify="left" if i == 0 else "right")
    for row in body:
        t.add_row(*(escape(c) for c in row))
    console.print(t)
    for w in h.warnings():
        console.print(f"[bold yellow]warning:[/] {escape(w)}", highlight=False)
    if h.verdict == "beats_default":
        console.print(
            f"the tuned point beats the default on test ({h.objective} {h.diff:+.4f}, p = {h.p_value:.4f})",
            highlight=False,
        )
    for n in h.notes:
        console.print(f"[yellow]note:[/] {escape(n)}", highlight=False)
