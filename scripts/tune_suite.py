"""Tune a ranker's parameters on the dev splits of a suite's fixtures, in one process.

    python scripts/tune_suite.py --ranker code_search --space conf/tune/code_search.yaml --trials 60
    python scripts/tune_suite.py --ranker code_search --space conf/tune/code_search.yaml --trials 60 \
        --report-split test          # then, once: the chosen point and the default on the test splits
    python scripts/tune_suite.py --compare bm25f code_search graph 'graph ranker@ranker.base=bm25f'

Why a script beside `python -m evalpipe -m suite=code fixture.split=dev ...`: a suite run starts
one process per fixture, so every trial pays torch and model loading three times; here each
fixture is loaded once and the rankers' component hits are memoised per process (as in the
`hybrid_optuna` sweep), so a trial costs about a second. Choosing happens on `--split` (dev)
only: the objective is the mean (or `--agg min`) over the suite's fixtures of `--objective`.
`--report-split test` re-scores the chosen point and the ranker's shipped default on the other
split afterwards, for the report; it never feeds back into the choice. Nothing is logged to
MLflow; confirm the chosen point with `python -m evalpipe suite=code ...` (docs/rankers.md).

The search space is a YAML mapping of Hydra override keys to `{choice: [...]}`,
`{float: [low, high]}` or `{int: [low, high]}`; sampling is Optuna's TPE, seeded.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from evalpipe.evaluation.in_process import score_config
from evalpipe.paths import PROJECT_ROOT
from evalpipe.scoring.tokens import get_token_counter

TIERS = ("exact", "concept", "multi_hop")


@dataclass(frozen=True)
class PointScore:
    """One configuration's figures on every fixture of the suite, on one split."""

    overrides: tuple[str, ...]
    per_fixture: Mapping[str, Mapping[str, float]]  # fixture -> {"all": R, "exact": R, ...}

    def agg(self, how: str) -> float:
        values = [v["all"] for v in self.per_fixture.values()]
        return min(values) if how == "min" else statistics.fmean(values)


class Suite:
    """The suite's fixtures on one split, loaded once; configurations scored over all of them."""

    def __init__(
        self, suite: str, split: str, objective: str, extra: Sequence[str] = (), fixtures: Sequence[str] = ()
    ):
        self.objective = objective
        self.extra = list(extra)
        self.split = split
        cfg = compose(config_name="config", overrides=[f"suite={suite}"])
        self.names = list(fixtures) or [str(n) for n in cfg.suite.fixtures]
        self.fixtures = {}
        for name in self.names:
            fcfg = compose(
                config_name="config", overrides=[f"fixture={name}", f"fixture.split={split}", *self.extra]
            )
            self.fixtures[name] = instantiate(fcfg.fixture)
        self.counter = get_token_counter()

    def score(self, ranker: str, overrides: Sequence[str]) -> PointScore:
        per: dict[str, dict[str, float]] = {}
        for name, fixture in self.fixtures.items():
            cfg = compose(
                config_name="config",
                overrides=[
                    f"fixture={name}",
                    f"fixture.split={self.split}",
                    *self.extra,
                    f"ranker={ranker}",
                    *overrides,
                ],
            )
            scored = score_config(cfg, fixture, self.counter.count, families=["recall", "mrr"])
            if scored.scores is None:
                raise SystemExit(f"{ranker} {' '.join(overrides)}: skipped on {name}: {scored.skipped}")
            scores = scored.scores
            if self.objective not in scores.overall:
                known = ", ".join(k for k in sorted(scores.overall) if k.startswith(("recall", "mrr")))
                raise SystemExit(f"unknown --objective {self.objective!r}; known: {known}")
            row = {"all": scores.metric(self.objective)}
            for tier in TIERS:
                if tier in scores.per_tier:
                    row[tier] = scores.metric(self.objective, tier)
            per[name] = row
        return PointScore(tuple(overrides), per)


def load_space(path: Path) -> dict[str, dict[str, list[Any]]]:
    space = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    for key, spec in space.items():
        if not (isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in ("choice", "float", "int")):
            raise SystemExit(
                f"{path}: {key}: expected {{choice: [...]}}, {{float: [lo, hi]}} or {{int: [lo, hi]}}"
            )
    return space


def suggest(trial: Any, space: Mapping[str, Mapping[str, list[Any]]]) -> list[str]:
    out = []
    for key, spec in space.items():
        ((kind, values),) = spec.items()
        if kind == "choice":
            value = trial.suggest_categorical(key, [json.dumps(v) for v in values])
            value = json.loads(value)
        elif kind == "float":
            value = round(trial.suggest_float(key, float(values[0]), float(values[1])), 3)
        else:
            value = trial.suggest_int(key, int(values[0]), int(values[1]))
        out.append(f"{key}={'null' if value is None else value}")
    return out


def table(points: Sequence[PointScore], names: Sequence[str], agg: str, label: str) -> str:
    head = ["point", f"{agg}", *names, *(f"{n} {t}" for n in names for t in ("e", "c", "m"))]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in points:
        cells = [" ".join(p.overrides) or "(default)", f"{100 * p.agg(agg):.1f}"]
        cells += [f"{100 * p.per_fixture[n]['all']:.1f}" for n in names]
        cells += [f"{100 * p.per_fixture[n].get(t, 0):.1f}" for n in names for t in TIERS]
        lines.append("| " + " | ".join(cells) + " |")
    return f"### {label}\n\n" + "\n".join(lines) + "\n"


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank (as Spearman's rho wants)."""
    order = sorted(range(len(values)), key=lambda i: -values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for pos in range(i, j + 1):
            out[order[pos]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation: Pearson's r of the tie-averaged ranks."""
    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb, strict=True))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den else float("nan")


def _rho(rho: float) -> str:
    return "n/a (all tied)" if rho != rho else f"{rho:+.3f}"


def agreement(
    first: Sequence[PointScore], second: Sequence[PointScore], names: Sequence[str], agg: str, a: str, b: str
) -> str:
    """Does the order of the compared rankers on one split hold on the other? Spearman per fixture."""
    if len(first) < 2:
        return f"### Order of the rankers, {a} vs {b}\n\nneeds two or more rankers to --compare\n"
    lines = [
        f"### Order of the {len(first)} rankers, {a} vs {b}: Spearman's rho\n",
        "| fixture | rho |",
        "|---|---|",
    ]
    for name in names:
        rho = spearman(
            [p.per_fixture[name]["all"] for p in first], [p.per_fixture[name]["all"] for p in second]
        )
        lines.append(f"| {name} | {_rho(rho)} |")
    rho = spearman([p.agg(agg) for p in first], [p.agg(agg) for p in second])
    lines.append(f"| suite {agg} | {_rho(rho)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="code")
    parser.add_argument("--fixtures", nargs="+", default=[], help="these fixtures instead of the suite's")
    parser.add_argument("--split", default="dev", help="the split the choice is made on")
    parser.add_argument("--ranker", default="code_search")
    parser.add_argument("--space", type=Path, help="YAML search space (see the module docstring)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--objective", default="recall_at_5")
    parser.add_argument("--agg", choices=("mean", "min"), default="mean")
    parser.add_argument("--report-split", help="also score the chosen point and the default on this split")
    parser.add_argument(
        "--compare",
        nargs="+",
        metavar="RANKER",
        help="score these rankers (each 'name override ...') instead",
    )
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    args = parser.parse_args(argv)

    out: list[str] = []
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        suite = Suite(args.suite, args.split, args.objective, fixtures=args.fixtures)
        names = suite.names
        if args.compare:
            points = []
            for spec in args.compare:
                ranker, *overrides = spec.split()
                point = suite.score(ranker, overrides)
                points.append(PointScore((ranker, *overrides), point.per_fixture))
                print(f"{spec}: {100 * point.agg(args.agg):.1f}", file=sys.stderr)
            out.append(table(points, names, args.agg, f"{args.split} split, {args.objective}"))
            if args.report_split:
                other = Suite(args.suite, args.report_split, args.objective, fixtures=args.fixtures)
                rows = []
                for spec in args.compare:
                    ranker, *overrides = spec.split()
                    rows.append(PointScore((ranker, *overrides), other.score(ranker, overrides).per_fixture))
                out.append(table(rows, names, args.agg, f"{args.report_split} split, {args.objective}"))
                out.append(agreement(points, rows, names, args.agg, args.split, args.report_split))
        else:
            import optuna

            if args.space is None:
                parser.error("--space is required unless --compare is given")
            space = load_space(args.space)
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            study = optuna.create_study(
                direction="maximize", sampler=optuna.samplers.TPESampler(seed=args.seed)
            )
            study.enqueue_trial({})  # the default first: nothing beats it by accident of the sampler
            points: list[PointScore] = []
            start = time.perf_counter()

            def objective(trial: Any) -> float:
                point = suite.score(args.ranker, suggest(trial, space) if trial.number else [])
                points.append(point)
                value = point.agg(args.agg)
                print(f"trial {trial.number}: {100 * value:.1f} {' '.join(point.overrides)}", file=sys.stderr)
                return value

            study.optimize(objective, n_trials=args.trials)
            best = max(points, key=lambda p: (p.agg(args.agg), -len(p.overrides)))
            ranked = sorted(points, key=lambda p: -p.agg(args.agg))[:10]
            out.append(
                table(
                    [points[0], *ranked],
                    names,
                    args.agg,
                    f"{args.split}: default, then the 10 best of {args.trials}",
                )
            )
            out.append(f"best on {args.split}: `{' '.join(best.overrides) or '(default)'}`\n")
            print(f"{args.trials} trials in {time.perf_counter() - start:.0f} s", file=sys.stderr)
            if args.report_split:
                other = Suite(args.suite, args.report_split, args.objective, fixtures=args.fixtures)
                rows = [other.score(args.ranker, []), other.score(args.ranker, best.overrides)]
                out.append(
                    table(
                        rows,
                        names,
                        args.agg,
                        f"{args.report_split} split: default and the point chosen on {args.split}",
                    )
                )
    report = "\n".join(out)
    print(report)
    if args.markdown:
        args.markdown.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
