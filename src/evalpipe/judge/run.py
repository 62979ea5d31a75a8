"""The judge pass of a run: build the judge from config, judge the pairs, and hand back what to report.

`build_judge` runs before any MLflow run is opened (a bad judge setting exits 2 with
nothing left RUNNING); `run_judge` runs after strict scoring and returns a
`JudgeOutcome` that the app merges into its metrics, per-case table, files and
terminal output. Strict figures are never changed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from evalpipe.judge import pairs as select
from evalpipe.judge import progress, report
from evalpipe.judge.against_people import Trust, read_trust
from evalpipe.judge.asking import AskStats, Judge, Judgement
from evalpipe.judge.backends import make_backend
from evalpipe.judge.cache import CacheError, JudgementCache
from evalpipe.judge.calibration import Agreement, agreement
from evalpipe.judge.coverage import Coverage, coverage
from evalpipe.judge.judged_metrics import PARTIAL, PREFIX, JudgedScores, judged_scores
from evalpipe.judge.probe import JudgeUnavailable, probe
from evalpipe.judge.prompt import load_prompt
from evalpipe.safety.errors import EvalpipeError
from evalpipe.safety.secrets import mask_text
from evalpipe.scoring.completeness import is_completeness
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import Miss, Misses, RunScores


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
    server: str
    date: str
    pool: bool
    allow_partial: bool
    ks: tuple[int, ...]
    scores: RunScores  # the strict scores, misses carrying judged_hit
    judged: JudgedScores
    coverage: Coverage
    stats: AskStats
    positives: tuple[Positive, ...]
    records: tuple[Mapping[str, Any], ...]  # every verdict or error, for judgements.jsonl
    calibration: Agreement | None = None
    trust: Trust | None = None  # judge.agreement_file: kappa with people, below the floor or not

    @property
    def states(self) -> dict[str, str]:
        cov = self.coverage
        return {"all": cov.overall.state, **{t: s.state for t, s in cov.per_tier.items()}}

    @property
    def metrics(self) -> dict[str, float]:
        out = {
            **self.judged.flat(self.states),
            **self.coverage.figures(),
            **self.stats.figures(),
            "judge/relevant": float(len(self.positives)),
        }
        if self.calibration is not None:
            out.update(self.calibration.figures())
        return out

    @property
    def tags(self) -> dict[str, str]:
        return {
            "evalpipe.judge": self.judge_label,
            "evalpipe.judge_prompt": self.prompt_version,
            "evalpipe.judge_server": self.server,
            "evalpipe.judge_coverage": f"{self.coverage.overall.coverage:.4f}",
            "evalpipe.judged": self.coverage.overall.state,  # full, partial or none
            **(self.trust.tags() if self.trust is not None else {}),
        }

    def objective(self, name: str) -> tuple[float | None, str]:
        """The value of a judged objective (`judged_recall_at_5`, `tier/x/partial_judged_mrr`), or why
        there is none: below full coverage it is refused unless judge.allow_partial=true.
        (None, "") for an objective that is not a judged figure."""
        return _objective(name, self.judged, self.coverage, self.allow_partial)

    def add_columns(self, table: dict[str, list[Any]]) -> None:
        """judged_hit (misses only) and the judged per-case figures, beside the strict columns; a
        case's judged figures are left empty unless every candidate that could change them was judged."""
        hit = {m.case_id: m.judged_hit for m in self.scores.misses}
        table["judged_hit"] = [hit.get(cid) for cid in table["case_id"]]
        complete = self.coverage.complete_cases
        for name, values in sorted(self.judged.per_case.items()):
            table[name] = [
                float(v) if ok and cid in complete else None
                for v, ok, cid in zip(values, self.judged.labelled, table["case_id"], strict=True)
            ]

    def add_files(self, files: dict[str, str]) -> None:
        """judged.tsv and judgements.jsonl, and the judged section appended to report.md."""
        files["judged.tsv"] = report.judged_tsv(self)
        files["judgements.jsonl"] = report.judgements_jsonl(self.records)
        files["report.md"] = files["report.md"].rstrip("\n") + "\n\n" + report.markdown_section(self, self.ks)

    def print(self, console: Any) -> None:
        report.print_section(console, self, self.ks)


@dataclass(frozen=True)
class NotJudged:
    """A judge was configured but judged nothing (unreachable with judge.required=false, or its cache
    or a call failed after the cases ran): the strict results stand alone, with one line saying why."""

    judge_label: str
    prompt_version: str
    server: str
    scores: RunScores
    reason: str
    ks: tuple[int, ...] = ()

    @property
    def metrics(self) -> dict[str, float]:
        return {"judge/coverage": 0.0, "judge/not_judged": 1.0}

    @property
    def tags(self) -> dict[str, str]:
        return {
            "evalpipe.judge": self.judge_label,
            "evalpipe.judge_prompt": self.prompt_version,
            "evalpipe.judge_server": self.server,
            "evalpipe.judged": "none",
            "evalpipe.judge_note": self.reason[:4000],
        }

    def objective(self, name: str) -> tuple[float | None, str]:
        if _judged_name(name) is None:
            return None, ""
        return None, f"objective={name} has no value: not judged ({self.reason})"

    def add_columns(self, table: dict[str, list[Any]]) -> None:
        pass

    def add_files(self, files: dict[str, str]) -> None:
        section = "\n".join(["## Judged figures", "", *report.not_judged_lines(self.reason), ""])
        files["report.md"] = files["report.md"].rstrip("\n") + "\n\n" + section

    def print(self, console: Any) -> None:
        for line in report.not_judged_lines(self.reason):
            console.print(line, highlight=False, soft_wrap=True)


def _judged_name(name: str) -> tuple[str, str, bool] | None:
    """`tier/x/partial_judged_mrr` -> ("x", "judged_mrr", True); None if not a judged figure."""

    scope, base = "all", name
    if name.startswith("tier/") and name.count("/") == 2:
        _, scope, base = name.split("/")
    partial = base.startswith(PARTIAL + PREFIX)
    base = base[len(PARTIAL) :] if partial else base
    # judged_at_K (label completeness, scoring.completeness) is a strict figure, not the judge's
    return (scope, base, partial) if base.startswith(PREFIX) and not is_completeness(base) else None


def _objective(
    name: str, judged: JudgedScores, cov: Coverage, allow_partial: bool
) -> tuple[float | None, str]:
    parsed = _judged_name(name)
    if parsed is None:
        return None, ""
    scope, base, _ = parsed
    figures = judged.overall if scope == "all" else judged.per_tier.get(scope, {})
    part = cov.overall if scope == "all" else cov.per_tier.get(scope)
    if base not in figures or part is None:
        return None, f"objective={name} has no value in this run"
    if part.full or allow_partial:
        return float(figures[base]), ""
    where = "all cases" if scope == "all" else f"tier {scope}"
    return None, (
        f"objective={name} refused: judge coverage of {where} is {part.coverage:.1%} "
        f"({part.judged:,} of {part.pairs:,} pairs), so the figure is only a lower bound; "
        "raise judge.max_calls, or set judge.allow_partial=true to optimise the partial figure"
    )


def build_judge(node: Any) -> Judge | None:
    """The configured judge, checked before the first case: settings, secrets registered, cache usable,
    server answering. None for `judge=none` (or no judge group at all).

    A judge that cannot work exits 2 naming the server or the cache; with judge.required=false it
    becomes a judge that judges nothing, said once here and again in the run's report."""
    if node is None or str(node.get("backend") or "none") == "none":
        return None
    # lazy: hydra, omegaconf, ~218 ms
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        settings = instantiate(node)
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, EvalpipeError):
            raise cause from None
        raise EvalpipeError(f"cannot build the judge: {cause}") from None
    settings.register_secrets()  # before the first request: nothing written afterwards can carry a key
    trust = (
        read_trust(settings.agreement_file, f"{settings.backend}:{settings.model}")
        if settings.agreement_file
        else None
    )
    prompt = load_prompt(settings.prompt)
    backend = make_backend(settings)
    try:
        warm = _check_cache(settings, prompt.version)
        if not warm:  # a warm cache may answer every question: the judge is asked (and probed) if needed
            probe(settings)
    except (CacheError, JudgeUnavailable) as exc:
        if settings.required:
            raise EvalpipeError(f"{exc} (or judge.required=false to run with strict figures only)") from None
        reason = str(exc)
        progress.say(
            f"evalpipe: warning: {reason}; judge.required=false: strict figures only, nothing judged"
        )
        return Judge(settings, backend, prompt, unavailable=reason, trust=trust)
    return Judge(settings, backend, prompt, probe_first=warm, trust=trust)


def _check_cache(settings: Any, prompt_version: str) -> bool:
    """A cache that is not a database, holds another table, or cannot be written is bad input now; one
    that is merely busy (a sweep worker writing) is waited for when judging, not here. True when it
    already holds verdicts of this judge (the server is then probed only if a question is missing)."""
    try:
        cache = JudgementCache(settings.cache_path, timeout=min(1.0, settings.cache_timeout))
    except CacheError as exc:
        if "locked by another writer" not in str(exc):
            raise
        return False
    try:
        return cache.holds(settings.backend, settings.model, settings.server, prompt_version)
    except CacheError:
        return False
    finally:
        cache.close()


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
) -> JudgeOutcome | NotJudged:
    """Judge the run's unlabelled candidates (and a calibration sample if asked); score both ways.

    Runs after the strict results exist, so nothing here may cost them: a cache that is locked,
    corrupt or foreign, or any other failure of the judge, is one line and a `NotJudged` outcome,
    never an exception (Ctrl-C and SIGTERM still go through, for the run to end KILLED)."""
    s = judge.settings

    def not_judged(reason: str) -> NotJudged:
        return NotJudged(judge.label, judge.prompt.version, s.server, scores, reason, tuple(scores.ks))

    if judge.unavailable:
        return not_judged(judge.unavailable)
    try:
        return _judge(judge, results, scores, units, count_tokens, tiers)
    except Exception as exc:  # noqa: BLE001 - the strict results come first, whatever failed here
        reason = str(exc) if isinstance(exc, EvalpipeError) else f"{type(exc).__name__}: {exc}"
        reason = mask_text(" ".join(reason.split())[:500])
        progress.say(f"evalpipe: warning: not judged: {reason}; the strict results are kept")
        return not_judged(reason)


def order_pairs(rescue: Sequence[select.Pair], changing: set[tuple[str, str]], results) -> list[select.Pair]:
    """The order the budget is spent in, fixed by the run alone: the pairs that can change a figure
    first, rank by rank across the misses (every miss's rank-1 candidate, then rank 2, ...), cases in
    fixture order. So a budget short of the whole covers the top ranks, R@1 first, in every tier."""
    where = {r.case_id: i for i, r in enumerate(results)}
    return sorted(rescue, key=lambda p: ((p.case_id, p.unit_id) not in changing, p.rank, where[p.case_id]))


def _judge(judge, results, scores, units, count_tokens, tiers) -> JudgeOutcome:
    s = judge.settings
    depth = max(scores.ks)
    changing_pairs = select.rescue_pairs(results, scores.first_rank, depth, pool=False)
    changing = {(p.case_id, p.unit_id) for p in changing_pairs}
    rescue = select.rescue_pairs(results, scores.first_rank, depth, s.pool) if s.pool else changing_pairs
    rescue = order_pairs(rescue, changing, results)
    calib = select.calibration_pairs(results, units, s.calibration_pairs, s.seed) if s.calibrate else []
    asked = calib + rescue  # calibration first: a small fixed sample the budget must not starve
    n_questions = len({(p.query, p.unit_id) for p in asked if p.unit_id in units})
    progress.say(progress.size_line(judge.label, s.server, n_questions, s.max_calls))
    bar = progress.JudgeBar(f"judging with {judge.label}")
    try:
        verdicts, stats = judge.ask_all(asked, units, count_tokens, bar)
    finally:
        bar.stop()
    if stats.stopped:
        progress.say(f"evalpipe: warning: {stats.stopped}")

    positives = tuple(
        Positive(p.case_id, p.unit_id, p.rank, verdicts[(p.case_id, p.unit_id)].verdict.reason)
        for p in rescue
        if verdicts[(p.case_id, p.unit_id)].relevant
    )
    judged = judged_scores(results, scores.ks, {(p.case_id, p.unit_id) for p in positives}, tiers)
    with_verdict = {key for key, j in verdicts.items() if j.verdict is not None}
    tier_names = list(tiers) if tiers is not None else list(dict.fromkeys(r.tier for r in results))
    cov = coverage(
        [p for p in changing_pairs if p.unit_id in units],
        with_verdict,
        {r.case_id: r.tier for r in results},
        [t for t in tier_names if t in judged.per_tier],
        [r.case_id for r in results],
    )
    by_case = {r.case_id: (i, r) for i, r in enumerate(results)}
    misses = []
    for m in scores.misses:
        i, r = by_case[m.case_id]
        misses.append(m._replace(judged_hit=_judged_hit(m, r, int(judged.first_rank[i]), depth, verdicts)))
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
        server=s.server,
        date=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        pool=s.pool,
        allow_partial=s.allow_partial,
        ks=tuple(scores.ks),
        scores=replace(scores, misses=Misses.of(misses)),
        judged=judged,
        coverage=cov,
        stats=stats,
        positives=positives,
        records=records,
        calibration=cal,
        trust=judge.trust,
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
