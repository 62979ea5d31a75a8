"""The judge pass of a run: build the judge from config, judge the pairs, and hand back what to report.

`build_judge` runs before any MLflow run is opened (a bad judge setting exits 2 with
nothing left RUNNING); `run_judge` runs after strict scoring and returns a
`JudgeOutcome` that the app merges into its metrics, per-case table, files and
terminal output. Strict figures are never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evalpipe.judge import pairs as select
from evalpipe.judge import report
from evalpipe.judge.asking import AskStats, Judge, Judgement
from evalpipe.judge.calibration import Agreement, agreement
from evalpipe.judge.judged_metrics import JudgedScores, judged_scores
from evalpipe.safety.errors import EvalpipeError
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import Miss, RunScores


@dataclass(frozen=True)
class Positive:
    case_id: str
    unit_id: str
    rank: int
    reason: str


@dataclass(frozen=True)
class JudgeOutcome:
    judge_label: str
    prompt_version: str
    pool: bool
    max_calls: int
    ks: tuple[int, ...]
    scores: RunScores  # the strict scores, misses carrying judged_hit
    judged: JudgedScores
    stats: AskStats
    positives: tuple[Positive, ...]
    records: tuple[Mapping[str, Any], ...]  # every verdict or error, for judgements.jsonl
    calibration: Agreement | None = None

    @property
    def metrics(self) -> dict[str, float]:
        out = {**self.judged.flat(), **self.stats.figures(), "judge/relevant": float(len(self.positives))}
        if self.calibration is not None:
            out.update(self.calibration.figures())
        return out

    @property
    def tags(self) -> dict[str, str]:
        return {"evalpipe.judge": self.judge_label, "evalpipe.judge_prompt": self.prompt_version}

    def add_columns(self, table: dict[str, list[Any]]) -> None:
        """judged_hit (misses only) and the judged per-case figures, beside the strict columns."""
        hit = {m.case_id: m.judged_hit for m in self.scores.misses}
        table["judged_hit"] = [hit.get(cid) for cid in table["case_id"]]
        for name, values in sorted(self.judged.per_case.items()):
            table[name] = [
                float(v) if ok else None for v, ok in zip(values, self.judged.labelled, strict=True)
            ]

    def add_files(self, files: dict[str, str]) -> None:
        """judged.tsv and judgements.jsonl, and the judged section appended to report.md."""
        files["judged.tsv"] = report.judged_tsv(self)
        files["judgements.jsonl"] = report.judgements_jsonl(self.records)
        files["report.md"] = files["report.md"].rstrip("\n") + "\n\n" + report.markdown_section(self, self.ks)

    def print(self, console: Any) -> None:
        report.print_section(console, self, self.ks)


def build_judge(node: Any) -> Judge | None:
    """The configured judge, or None for `judge=none` (or no judge group at all)."""
    if node is None or str(node.get("backend") or "none") == "none":
        return None
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    from evalpipe.judge.backends import make_backend
    from evalpipe.judge.cache import JudgementCache
    from evalpipe.judge.prompt import load_prompt

    try:
        settings = instantiate(node)
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, EvalpipeError):
            raise cause from None
        raise EvalpipeError(f"cannot build the judge: {cause}") from None
    JudgementCache(settings.cache_path).close()  # an unusable cache folder is bad input: say so now
    return Judge(settings, make_backend(settings), load_prompt(settings.prompt))


def _judged_hit(miss: Miss, result: CaseResult, first: int, depth: int, verdicts) -> bool | None:
    """True: a judged positive ranks above the first expected ID (or there was none); False: every
    candidate that could have rescued it was judged not relevant; None: some were not judged."""
    if first > 0 and (miss.rank == 0 or first < miss.rank):
        return True
    window = select.rescue_pairs([result], [miss.rank], depth, pool=False)
    judged = [verdicts.get((p.case_id, p.unit_id)) for p in window]
    return False if all(j is not None and j.verdict is not None for j in judged) else None


def run_judge(
    judge: Judge,
    results: Sequence[CaseResult],
    scores: RunScores,
    units: Mapping[str, Any],
    count_tokens: Callable[[str], int],
    tiers: Sequence[str] | None = None,
) -> JudgeOutcome:
    """Judge the run's unlabelled candidates (and a calibration sample if asked); score both ways."""
    s = judge.settings
    depth = max(scores.ks)
    rescue = select.rescue_pairs(results, scores.first_rank, depth, s.pool)
    calib = select.calibration_pairs(results, units, s.calibration_pairs, s.seed) if s.calibrate else []
    # Calibration first: a small fixed sample the budget must not starve.
    verdicts, stats = judge.ask_all(calib + rescue, units, count_tokens)

    positives = tuple(
        Positive(p.case_id, p.unit_id, p.rank, verdicts[(p.case_id, p.unit_id)].verdict.reason)
        for p in rescue
        if verdicts[(p.case_id, p.unit_id)].relevant
    )
    judged = judged_scores(results, scores.ks, {(p.case_id, p.unit_id) for p in positives}, tiers)
    by_case = {r.case_id: (i, r) for i, r in enumerate(results)}
    misses = []
    for m in scores.misses:
        i, r = by_case[m.case_id]
        misses.append(replace(m, judged_hit=_judged_hit(m, r, int(judged.first_rank[i]), depth, verdicts)))
    cal = None
    if s.calibrate:
        cal = agreement(
            [bool(p.gold) for p in calib],
            [_said(verdicts[(p.case_id, p.unit_id)]) for p in calib],
        )
    records = tuple(
        _record(p, "calibration" if p.gold is not None else "rescue", verdicts[(p.case_id, p.unit_id)])
        for p in rescue + calib
    )
    return JudgeOutcome(
        judge_label=judge.label,
        prompt_version=judge.prompt.version,
        pool=s.pool,
        max_calls=s.max_calls,
        ks=tuple(scores.ks),
        scores=replace(scores, misses=tuple(misses)),
        judged=judged,
        stats=stats,
        positives=positives,
        records=records,
        calibration=cal,
    )


def _said(j: Judgement) -> bool | None:
    return None if j.verdict is None else j.verdict.relevant


def _record(p: select.Pair, purpose: str, j: Judgement) -> dict[str, Any]:
    return {
        "case_id": p.case_id,
        "unit_id": p.unit_id,
        "rank": p.rank,
        "purpose": purpose,
        "label": p.gold,
        "relevant": _said(j),
        "reason": j.verdict.reason if j.verdict else None,
        "error": j.error,
        "cached": j.cached,
    }
