"""`evalpipe abstain`: choose when to answer nothing on a dev run, report it on a test run.

Reads two saved runs of one ranker on one RAG fixture (their output folders): one on
`fixture.split=dev`, one on `fixture.split=test`. The threshold is chosen on the dev run alone
(`stats.abstention.choose`), then reported on the test run with its trade-off curve and the
signal's AUC on both. The test run's cases never enter the choice: the command refuses a dev run
that is not on the dev split, so a threshold is never tuned on the cases it is reported on.

Exit codes: 0 reported, 2 bad input (one line naming the folder and the fix).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalpipe.reporting.local import SavedRunError, load_run
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import EvalpipeError, print_error
from evalpipe.stats import abstention as ab

PROG = "evalpipe abstain"
SIGNALS = ("top", "gap")
#: Params that differ between a run on dev and its run on test by design.
SPLIT_PARAMS = ("fixture.split",)

EXAMPLES = """\
examples:
  python -m evalpipe fixture=flask fixture.split=dev ranker=bm25 hydra.run.dir=runs/dev
  python -m evalpipe fixture=flask fixture.split=test ranker=bm25 hydra.run.dir=runs/test
  evalpipe abstain --dev runs/dev --test runs/test                      # maximise citation validity
  evalpipe abstain --dev runs/dev --test runs/test --objective bounded --max-loss 0.02 --plot curve.png

The signal is the top hit's score (--signal top) or its margin over the second (--signal gap),
in the ranker's own score scale: a threshold chosen for one ranker (or one store's distance
space) means nothing for another. Cases the ranker failed on are left out.
"""


class AbstainError(EvalpipeError):
    """Bad input to `evalpipe abstain`: one line, exit 2."""


@dataclass(frozen=True)
class RunCases:
    """One saved run's per-case inputs to the choice."""

    directory: Path
    split: str
    ranker: str
    cases: ab.Cases
    left_out: int  # cases the ranker failed on


def _signal(scores: list[Any], kind: str) -> float:
    values = [float(s) for s in scores if isinstance(s, int | float) and math.isfinite(s)]
    if not values:
        return float("nan")
    if kind == "top":
        return values[0]
    return values[0] - values[1] if len(values) > 1 else values[0]


def read_run(directory: Path, signal: str) -> RunCases:
    """The run saved in `directory`, as the per-case inputs (AbstainError names what is missing)."""
    if not directory.is_dir():
        raise AbstainError(f"{directory}: not a folder; give the output folder of a run (its hydra.run.dir)")
    try:
        saved = load_run(directory)
        table = saved.case_table()
    except SavedRunError as exc:
        raise AbstainError(str(exc)) from None
    if not table:
        raise AbstainError(f"{directory}: no per-case table (cases.jsonl); the run measured no case")
    if "scores" not in table or "answerability" not in table:
        raise AbstainError(
            f"{directory / 'cases.jsonl'}: no 'scores' column (a run made before evalpipe saved its hits' "
            "scores); run it again"
        )
    if "rag_citation_validity" not in table:
        raise AbstainError(
            f"{directory}: no RAG labels (answerability, citation_required): abstention is chosen on a RAG "
            "fixture with unanswerable questions, such as fixture=flask"
        )
    sig, answerable, hit, left_out = [], [], [], 0
    for i, validity in enumerate(table["rag_citation_validity"]):
        if table["error"][i]:
            left_out += 1
            continue
        if validity is None:  # citation not required: not a question of answering or not
            continue
        try:
            scores = json.loads(table["scores"][i] or "[]")
        except (TypeError, json.JSONDecodeError):
            raise AbstainError(
                f"{directory / 'cases.jsonl'}: case {i + 1}: 'scores' is not a JSON list"
            ) from None
        unanswerable = (table.get("answerability") or [""] * (i + 1))[i] == "unanswerable"
        sig.append(_signal(scores if isinstance(scores, list) else [], signal))
        answerable.append(not unanswerable)
        hit.append(bool(table["rag_document_hit"][i]))
    return RunCases(
        directory,
        str(saved.tags.get("evalpipe.split", "all")),
        str(saved.tags.get("evalpipe.ranker", "?")),
        ab.cases(sig, answerable, hit),
        left_out,
    )


def check_pair(dev_dir: Path, test_dir: Path, dev: RunCases, test: RunCases) -> None:
    """The two runs are one ranker on the two halves of one fixture, dev on dev (else AbstainError)."""
    if dev.split != "dev":
        raise AbstainError(
            f"--dev {dev_dir}: the run is on split {dev.split!r}; choose on a run with fixture.split=dev, "
            "so the threshold is not tuned on the cases it is reported on"
        )
    if test.split != "test":
        raise AbstainError(
            f"--test {test_dir}: the run is on split {test.split!r}; report on fixture.split=test"
        )
    d, t = load_run(dev_dir), load_run(test_dir)
    for tag, what in (("evalpipe.fixture_sha256", "fixture"), ("evalpipe.corpus_sha256", "corpus")):
        if d.tags.get(tag) != t.tags.get(tag):
            raise AbstainError(
                f"--dev {dev_dir} and --test {test_dir} were measured on different {what} files"
            )
    differ = sorted(
        k
        for k in set(d.params) | set(t.params)
        if k not in SPLIT_PARAMS and d.params.get(k) != t.params.get(k)
    )
    ranker_differ = [k for k in differ if k == "ranker" or k.startswith("ranker.")]
    if ranker_differ:
        k = ranker_differ[0]
        raise AbstainError(
            f"--dev and --test ran different rankers ({k}: {d.params.get(k)!r} vs {t.params.get(k)!r}); "
            "a threshold is in one ranker's score scale"
        )
    for name, run in (("--dev", dev), ("--test", test)):
        c = run.cases
        if not c.answerable.any() or c.answerable.all():
            which = "answerable" if not c.answerable.any() else "unanswerable"
            raise AbstainError(
                f"{name} {run.directory}: no {which} case with citation_required; nothing to choose"
            )


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:5.1f}%"


def _t(x: float) -> str:
    return "never" if x == ab.NEVER else f"{x:.4g}"


def render(dev: RunCases, test: RunCases, chosen: ab.Outcome, args: argparse.Namespace) -> str:
    on_test = ab.outcome(test.cases, chosen.threshold)
    before = ab.outcome(test.cases, ab.NEVER)
    delta, lo, hi = ab.paired_delta_ci(test.cases, chosen.threshold, seed=args.seed)
    goal = (
        "maximise citation validity"
        if args.objective == "citation"
        else f"most unanswerable cases empty, losing at most {100 * args.max_loss:g}% of answerable hits"
    )
    lines = [
        f"abstention for ranker {dev.ranker}: signal = {args.signal} score (the ranker's own scale), "
        f"chosen on dev ({len(dev.cases.signal)} cases) to {goal}",
        f"threshold: abstain when the {args.signal} score < {_t(chosen.threshold)}",
        f"signal AUC (answerable vs unanswerable; 0.5 = chance): dev {ab.auc(dev.cases):.3f}, "
        f"test {ab.auc(test.cases):.3f}",
        "",
        f"{'':24}{'no abstention':>15}{'with threshold':>16}",
    ]
    for label, a, b in (
        ("answerable hit", before.hit_rate, on_test.hit_rate),
        ("unanswerable empty", before.empty_rate, on_test.empty_rate),
        ("citation validity", before.citation_validity, on_test.citation_validity),
    ):
        lines.append(f"{'test ' + label:24}{_pct(a):>15}{_pct(b):>16}")
    lines.append(
        f"test citation validity change {100 * delta:+.1f} points, 95% paired bootstrap CI "
        f"[{100 * lo:+.1f}, {100 * hi:+.1f}] ({test.cases.answerable.sum()} answerable, "
        f"{(~test.cases.answerable).sum()} unanswerable cases)"
    )
    if test.left_out or dev.left_out:
        lines.append(f"left out: cases the ranker failed on (dev {dev.left_out}, test {test.left_out})")
    lines += [
        "",
        "trade-off on test (threshold: answerable hit kept / unanswerable empty / citation validity)",
    ]
    points = {o.threshold: o for o in ab.curve(test.cases)}
    points[chosen.threshold] = on_test
    for t in sorted(points):
        o = points[t]
        mark = "  <- chosen on dev" if t == chosen.threshold else ""
        figures = f"{_pct(o.hit_rate)}  {_pct(o.empty_rate)}  {_pct(o.citation_validity)}"
        lines.append(f"  {_t(t):>10}  {figures}{mark}")
    if ab.auc(dev.cases) <= 0.55:
        lines.append(
            "warning: the signal barely separates answerable from unanswerable questions on dev "
            "(AUC <= 0.55); a threshold on it mostly removes hits"
        )
    return "\n".join(lines)


def plot(test: RunCases, chosen: ab.Outcome, path: Path) -> None:
    """The trade-off on test: answerable hits kept against unanswerable cases correctly empty."""
    # lazy: matplotlib, ~300 ms
    import matplotlib

    matplotlib.use("Agg")
    # lazy: matplotlib.pyplot, ~200 ms
    import matplotlib.pyplot as plt

    pts = [ab.outcome(test.cases, t) for t in ab.candidates(test.cases)]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot([o.empty_rate for o in pts], [o.hit_rate for o in pts], marker=".", label="thresholds (test)")
    here = ab.outcome(test.cases, chosen.threshold)
    ax.scatter([here.empty_rate], [here.hit_rate], color="red", zorder=3, label="chosen on dev")
    ax.set_xlabel("unanswerable questions answered with nothing")
    ax.set_ylabel("answerable questions keeping their hit")
    ax.set_title(f"abstention trade-off: {test.ranker}")
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def parser() -> argparse.ArgumentParser:
    p = CommandParser(
        prog=PROG,
        description="Choose a threshold for answering nothing on a dev run; report it on a test run.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--dev", required=True, type=Path, help="output folder of the run on fixture.split=dev")
    p.add_argument("--test", required=True, type=Path, help="output folder of the run on fixture.split=test")
    p.add_argument("--signal", choices=SIGNALS, default="top", help="top score, or its gap to the second")
    p.add_argument("--objective", choices=ab.OBJECTIVES, default="citation")
    p.add_argument("--max-loss", type=float, default=0.05, help="bounded: answerable hits that may be lost")
    p.add_argument("--plot", type=Path, help="write the test trade-off curve as a PNG")
    p.add_argument("--json", type=Path, help="write the choice and the test figures as JSON")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if not 0.0 <= args.max_loss <= 1.0:
            raise AbstainError(f"--max-loss must be between 0 and 1, got {args.max_loss}")
        dev = read_run(args.dev, args.signal)
        test = read_run(args.test, args.signal)
        check_pair(args.dev, args.test, dev, test)
        chosen = ab.choose(dev.cases, args.objective, args.max_loss)
        print(render(dev, test, chosen, args))
        on_test = ab.outcome(test.cases, chosen.threshold)
        if args.plot:
            plot(test, chosen, args.plot)
            print(f"plot: {args.plot}")
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "ranker": dev.ranker,
                        "signal": args.signal,
                        "objective": args.objective,
                        "max_loss": args.max_loss,
                        "threshold": None if chosen.threshold == ab.NEVER else chosen.threshold,
                        "auc_dev": ab.auc(dev.cases),
                        "auc_test": ab.auc(test.cases),
                        "dev": _figures(chosen),
                        "test": _figures(on_test),
                        "test_no_abstention": _figures(ab.outcome(test.cases, ab.NEVER)),
                    },
                    indent=2,
                )
                + "\n",
                encoding="utf-8",
            )
    except (AbstainError, OSError) as exc:
        print_error(exc, prog=PROG)
        return 2
    return 0


def _figures(o: ab.Outcome) -> dict[str, float]:
    return {
        "answerable_hit_rate": o.hit_rate,
        "unanswerable_empty_rate": o.empty_rate,
        "citation_validity": o.citation_validity,
        "abstained": o.abstained,
    }
