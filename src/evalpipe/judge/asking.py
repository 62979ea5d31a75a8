"""Asking the judge about many pairs: cache first, then a bounded thread pool, within a budget.

Which questions are paid for is decided before any is sent: the uncached ones in
pair order, up to `max_calls`. So a budget stop is clean and repeatable (the same
pairs are judged on every run with the same cache), and a re-run with a larger
budget asks only about the rest. An answer that fails (after the client's retries)
or does not parse is an error for that pair; an error no other pair can escape
(bad key, unknown model) stops the judging, and the pairs left are reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from evalpipe.judge.backends import Backend, Reply, is_fatal
from evalpipe.judge.cache import JudgementCache, Question, text_sha256
from evalpipe.judge.pairs import Pair
from evalpipe.judge.prompt import PromptTemplate, excerpt
from evalpipe.judge.settings import JudgeSettings
from evalpipe.judge.verdict import Verdict, parse_answer


@dataclass(frozen=True)
class Judgement:
    """The judge's word on one pair: a verdict, or why there is none (`error`, or left by the budget)."""

    verdict: Verdict | None
    error: str | None = None
    cached: bool = False

    @property
    def relevant(self) -> bool:
        return self.verdict is not None and self.verdict.relevant


NOT_ASKED = Judgement(None, "not judged: judge.max_calls reached")


@dataclass(frozen=True)
class AskStats:
    questions: int  # distinct questions needed (pairs sharing query and unit are asked once)
    calls: int
    cache_hits: int
    errors: int
    unjudged: int  # left by the budget or by a stop
    tokens_in: int
    tokens_out: int
    seconds: float
    budget_reached: bool
    stopped: str = ""

    def figures(self) -> dict[str, float]:
        return {
            "judge/questions": float(self.questions),
            "judge/calls": float(self.calls),
            "judge/cache_hits": float(self.cache_hits),
            "judge/cache_hit_rate": self.cache_hits / self.questions if self.questions else 0.0,
            "judge/errors": float(self.errors),
            "judge/unjudged": float(self.unjudged),
            "judge/tokens_in": float(self.tokens_in),
            "judge/tokens_out": float(self.tokens_out),
            "judge/seconds": self.seconds,
            "judge/budget_reached": float(self.budget_reached),
        }


@dataclass(frozen=True)
class Judge:
    """A configured judge: settings, the backend that asks, and the prompt it asks with."""

    settings: JudgeSettings
    backend: Backend
    prompt: PromptTemplate

    @property
    def label(self) -> str:
        return f"{self.settings.backend}:{self.settings.model}"

    def question(self, pair: Pair, unit: Any) -> Question:
        s = self.settings
        return Question(
            s.backend, s.model, self.prompt.version, pair.query, pair.unit_id, text_sha256(unit.text)
        )

    def render(self, pair: Pair, unit: Any, count_tokens: Callable[[str], int]) -> str:
        text = excerpt(unit.text or "", self.settings.excerpt_tokens, count_tokens)
        return self.prompt.render(pair.query, pair.unit_id, unit.title or "", unit.path or "", text)

    def ask_all(
        self, pairs: Sequence[Pair], units: Mapping[str, Any], count_tokens: Callable[[str], int]
    ) -> tuple[dict[tuple[str, str], Judgement], AskStats]:
        """A judgement for every pair, keyed (case_id, unit_id)."""
        start = time.perf_counter()
        cache = JudgementCache(self.settings.cache_path)
        try:
            by_key, todo, missing = self._plan(pairs, units, cache)
            allowed = todo[: self.settings.max_calls]
            answers, stats = self._ask(allowed, cache, count_tokens)
        finally:
            cache.close()
        answers.update(by_key)
        unasked = Judgement(None, f"not judged: {stats['stopped']}") if stats["stopped"] else NOT_ASKED
        out: dict[tuple[str, str], Judgement] = {}
        for p in pairs:
            if p.unit_id in missing:
                out[(p.case_id, p.unit_id)] = Judgement(None, f"unit {p.unit_id!r} is not in the corpus")
            else:
                key = self.question(p, units.get(p.unit_id)).key
                out[(p.case_id, p.unit_id)] = answers.get(key, unasked)
        hits = len(by_key)
        return out, AskStats(
            questions=hits + len(todo),
            calls=stats["calls"],
            cache_hits=hits,
            errors=stats["errors"] + len({p.unit_id for p in pairs if p.unit_id in missing}),
            unjudged=len(todo) - stats["calls"],
            tokens_in=stats["tokens_in"],
            tokens_out=stats["tokens_out"],
            seconds=time.perf_counter() - start,
            budget_reached=len(todo) > len(allowed),
            stopped=stats["stopped"],
        )

    def _plan(self, pairs, units, cache):
        """Cached verdicts, the distinct uncached questions in pair order, and unknown unit IDs."""
        cached: dict[str, Judgement] = {}
        todo: dict[str, tuple[Question, Pair, Any]] = {}
        missing: set[str] = set()
        for p in pairs:
            unit = units.get(p.unit_id)
            if unit is None:
                missing.add(p.unit_id)
                continue
            q = self.question(p, unit)
            if q.key in cached or q.key in todo:
                continue
            verdict = cache.get(q)
            if verdict is not None:
                cached[q.key] = Judgement(verdict, cached=True)
            else:
                todo[q.key] = (q, p, unit)
        return cached, list(todo.values()), missing

    def _ask(self, todo, cache: JudgementCache, count_tokens):
        answers: dict[str, Judgement] = {}
        stats: dict[str, Any] = {"calls": 0, "errors": 0, "tokens_in": 0, "tokens_out": 0, "stopped": ""}
        if not todo:
            return answers, stats
        # Rendered here, in the main thread: the token counter need not be thread-safe.
        queue = iter([(q, self.render(p, unit, count_tokens)) for q, p, unit in todo])
        pool = ThreadPoolExecutor(max_workers=self.settings.concurrency, thread_name_prefix="judge")
        running: dict[Any, Question] = {}

        def submit_next() -> None:
            item = None if stats["stopped"] else next(queue, None)
            if item is not None:
                running[pool.submit(self.backend.ask, item[1])] = item[0]

        try:
            for _ in range(self.settings.concurrency):
                submit_next()
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    q = running.pop(fut)
                    stats["calls"] += 1
                    answers[q.key] = self._settle(fut, q, cache, stats)
                    submit_next()
        finally:  # on Ctrl-C, start nothing new and do not wait here for requests in flight
            pool.shutdown(wait=not running, cancel_futures=True)
        return answers, stats

    @staticmethod
    def _settle(fut, q: Question, cache: JudgementCache, stats: dict[str, Any]) -> Judgement:
        exc = fut.exception()
        if exc is not None:
            stats["errors"] += 1
            message = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            if is_fatal(exc) and not stats["stopped"]:
                stats["stopped"] = f"judging stopped after {message}"
            return Judgement(None, message)
        reply: Reply = fut.result()
        stats["tokens_in"] += reply.tokens_in
        stats["tokens_out"] += reply.tokens_out
        try:
            verdict = parse_answer(reply.text)
        except ValueError as bad:
            stats["errors"] += 1
            return Judgement(None, f"malformed answer: {bad}")
        cache.put(q, verdict, reply.tokens_in, reply.tokens_out)
        return Judgement(verdict)
