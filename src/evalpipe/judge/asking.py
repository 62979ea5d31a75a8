"""Asking the judge about many pairs: a fixed budget in a fixed order, cache first, a few in flight.

Which questions are judged is decided before any is sent and never by the cache:
the distinct questions in the order the pairs come (the caller orders them), the
first `max_calls` of them. Cached verdicts among those cost no call; a cached
verdict beyond the budget is not used. So the same fixture, ranker and budget
judge the same questions, and give the same figures, on an empty and on a warm
cache; a larger budget judges a superset and asks only about the rest.

An answer that fails (after the client's retries) or does not parse is an error
for that question. Two things stop the judging early, with one line that gives the
counts: an error no other question can escape (bad key, unknown model), and
`max_failures` failures in a row (the circuit breaker: a server that went away
is not asked 500 more times). Requests run on daemon threads and at most
`concurrency` are in flight: on Ctrl-C or SIGTERM nothing new is sent and the
process can exit without waiting for the ones outstanding. Any failure of the
cache is raised as a `CacheError` for the caller to turn into "not judged".
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalpipe.judge.backends import Backend, Reply, is_fatal
from evalpipe.judge.cache import JudgementCache, Question, text_sha256
from evalpipe.judge.pairs import Pair
from evalpipe.judge.probe import JudgeUnavailable, probe
from evalpipe.judge.prompt import PromptTemplate, excerpt
from evalpipe.judge.settings import JudgeSettings
from evalpipe.judge.verdict import Verdict, parse_answer
from evalpipe.safety.secrets import mask_text


@dataclass(frozen=True)
class Judgement:
    """The judge's word on one pair: a verdict, or why there is none (`error`, or left by the budget)."""

    verdict: Verdict | None
    error: str | None = None
    cached: bool = False

    @property
    def relevant(self) -> bool:
        return self.verdict is not None and self.verdict.relevant


OVER_BUDGET = Judgement(None, "not judged: beyond judge.max_calls")


@dataclass(frozen=True)
class AskStats:
    questions: int  # distinct questions needed (pairs sharing query and unit are asked once)
    budget: int  # judge.max_calls: how many of them may be judged
    calls: int
    cache_hits: int
    errors: int  # questions whose call failed or whose answer did not parse
    over_budget: int  # questions beyond the budget (in the fixed order)
    not_asked: int  # questions within the budget left because judging stopped
    tokens_in: int
    tokens_out: int
    seconds: float
    stopped: str = ""

    @property
    def budget_reached(self) -> bool:
        return self.over_budget > 0

    @property
    def judged(self) -> int:
        return self.cache_hits + self.calls - self.errors

    @property
    def unjudged(self) -> int:
        return self.questions - self.judged

    def figures(self) -> dict[str, float]:
        return {
            "judge/questions": float(self.questions),
            "judge/budget": float(self.budget),
            "judge/calls": float(self.calls),
            "judge/cache_hits": float(self.cache_hits),
            "judge/cache_hit_rate": self.cache_hits / self.questions if self.questions else 0.0,
            "judge/errors": float(self.errors),
            "judge/unjudged": float(self.unjudged),
            "judge/over_budget": float(self.over_budget),
            "judge/tokens_in": float(self.tokens_in),
            "judge/tokens_out": float(self.tokens_out),
            "judge/seconds": self.seconds,
            "judge/budget_reached": float(self.budget_reached),
            "judge/stopped": float(bool(self.stopped)),
        }


class _Workers:
    """`concurrency` daemon threads calling `ask(prompt)`; results come back on a queue.

    Daemon threads, not a ThreadPoolExecutor: the executor's workers are joined at
    interpreter exit, so an interrupted run would wait for every request in flight
    (timeout x retries, minutes against a hung server) before it could end.
    """

    def __init__(self, ask: Callable[[str], Reply], n: int):
        self.ask, self.n = ask, n
        self.todo: queue.SimpleQueue = queue.SimpleQueue()
        self.done: queue.SimpleQueue = queue.SimpleQueue()
        self.stop = threading.Event()
        for i in range(n):
            threading.Thread(target=self._work, name=f"evalpipe-judge-{i}", daemon=True).start()

    def _work(self) -> None:
        while True:
            item = self.todo.get()
            if item is None or self.stop.is_set():
                return
            key, prompt = item
            try:
                self.done.put((key, self.ask(prompt), None))
            except BaseException as exc:  # reported to the main thread, which decides
                self.done.put((key, None, exc))

    def close(self) -> None:
        self.stop.set()
        for _ in range(self.n):
            self.todo.put(None)


@dataclass(frozen=True)
class Judge:
    """A configured judge: settings, the backend that asks, and the prompt it asks with."""

    settings: JudgeSettings
    backend: Backend
    prompt: PromptTemplate
    unavailable: str = ""  # why it judges nothing (judge.required=false and the probe failed)
    #: the cache was warm at the start, so the server was not probed then: probe it before the first
    #: question the cache cannot answer (a fully cached re-run never contacts it)
    probe_first: bool = False
    #: the judge's measured agreement with people (judge.agreement_file), shown beside its figures
    trust: Any = None

    @property
    def label(self) -> str:
        return f"{self.settings.backend}:{self.settings.model}"

    def question(self, pair: Pair, unit: Any, rendered: str) -> Question:
        s = self.settings
        return Question(
            s.backend,
            s.model,
            s.server,
            self.prompt.version,
            s.excerpt_tokens,
            pair.query,
            pair.unit_id,
            text_sha256(unit.text or ""),
            text_sha256(rendered),
        )

    def render(self, pair: Pair, unit: Any, count_tokens: Callable[[str], int]) -> str:
        text = excerpt(unit.text or "", self.settings.excerpt_tokens, count_tokens)
        return self.prompt.render(pair.query, pair.unit_id, unit.title or "", unit.path or "", text)

    def ask_all(
        self,
        pairs: Sequence[Pair],
        units: Mapping[str, Any],
        count_tokens: Callable[[str], int],
        progress: Any = None,
    ) -> tuple[dict[tuple[str, str], Judgement], AskStats]:
        """A judgement for every pair, keyed (case_id, unit_id); `pairs` in the order the budget is spent.

        `progress`, if given, has `start(total)` and `update(hits, calls, errors)`."""
        start = time.perf_counter()
        s = self.settings
        distinct: dict[tuple[str, str], Pair] = {}
        for p in pairs:
            if p.unit_id in units:
                distinct.setdefault((p.query, p.unit_id), p)
        chosen = list(distinct.values())[: s.max_calls]
        # Rendered here, in the main thread: the token counter need not be thread-safe.
        planned = []
        for p in chosen:
            unit = units.get(p.unit_id)
            text = self.render(p, unit, count_tokens)
            planned.append((p, self.question(p, unit, text), text))
        answers: dict[tuple[str, str], Judgement] = {}
        counts = {"calls": 0, "errors": 0, "hits": 0, "tokens_in": 0, "tokens_out": 0}
        stopped = ""
        todo = []
        cache = JudgementCache(s.cache_path, s.cache_timeout)
        try:
            for p, q, text in planned:
                verdict = cache.get(q)
                if verdict is not None:
                    answers[(p.query, p.unit_id)] = Judgement(verdict, cached=True)
                    counts["hits"] += 1
                else:
                    todo.append((p, q, text))
            if progress is not None:
                progress.start(len(planned))
                progress.update(counts["hits"], 0, 0)
            if todo:
                cache.check_writable()  # a locked cache is found before a call is paid for
                stopped = self._probe() if self.probe_first else ""
                if not stopped:
                    stopped = self._ask(todo, cache, answers, counts, progress)
        finally:
            cache.close()
        asked = counts["calls"]
        stats = AskStats(
            questions=len(distinct),
            budget=s.max_calls,
            calls=asked,
            cache_hits=counts["hits"],
            errors=counts["errors"],
            over_budget=len(distinct) - len(chosen),
            not_asked=len(todo) - asked,
            tokens_in=counts["tokens_in"],
            tokens_out=counts["tokens_out"],
            seconds=time.perf_counter() - start,
            stopped=stopped,
        )
        if stopped:
            stopped = (
                f"{stopped}: {stats.judged} of {stats.questions} questions judged, {stats.errors} errors, "
                f"{stats.not_asked} not asked"
            )
            stats = AskStats(**{**stats.__dict__, "stopped": stopped})
        left = Judgement(None, f"not judged: {stopped}") if stopped else OVER_BUDGET
        within = {(p.query, p.unit_id) for p, _, _ in planned}
        out: dict[tuple[str, str], Judgement] = {}
        for p in pairs:
            key = (p.query, p.unit_id)
            if p.unit_id not in units:
                out[(p.case_id, p.unit_id)] = Judgement(None, f"unit {p.unit_id!r} is not in the corpus")
            elif key in answers:
                out[(p.case_id, p.unit_id)] = answers[key]
            else:
                out[(p.case_id, p.unit_id)] = left if key in within else OVER_BUDGET
        return out, stats

    def _probe(self) -> str:
        """Why the judge cannot be asked ("" if it answers): the cached verdicts are kept either way."""
        try:
            probe(self.settings)
        except JudgeUnavailable as exc:
            return f"{exc} (the cached verdicts are used; the other questions are not judged)"
        return ""

    def _ask(self, todo, cache: JudgementCache, answers, counts, progress) -> str:
        """Ask `todo` (pair, question, prompt), `concurrency` in flight; why it stopped, if it did."""
        s = self.settings
        pending = iter(todo)
        workers = _Workers(self.backend.ask, s.concurrency)
        in_flight: dict[int, tuple[Pair, Question]] = {}
        stopped = ""
        failures_in_a_row = 0
        last_error = ""

        sent = [0]

        def submit_next() -> None:
            item = None if stopped else next(pending, None)
            if item is not None:
                sent[0] += 1
                in_flight[sent[0]] = (item[0], item[1])
                workers.todo.put((sent[0], item[2]))

        try:
            for _ in range(s.concurrency):
                submit_next()
            while in_flight:
                try:
                    ident, reply, exc = workers.done.get(timeout=0.25)
                except queue.Empty:
                    continue
                p, q = in_flight.pop(ident)
                counts["calls"] += 1
                judgement = self._settle(reply, exc, q, cache, counts)
                answers[(p.query, p.unit_id)] = judgement
                if judgement.verdict is None:
                    failures_in_a_row += 1
                    last_error = judgement.error or ""
                    if exc is not None and is_fatal(exc) and not stopped:
                        stopped = f"judging stopped after {last_error} (no other question can succeed)"
                    elif failures_in_a_row >= s.max_failures and not stopped:
                        stopped = (
                            f"judging stopped after {failures_in_a_row} failures in a row "
                            f"(judge.max_failures={s.max_failures}; last: {last_error})"
                        )
                else:
                    failures_in_a_row = 0
                if progress is not None:
                    progress.update(counts["hits"], counts["calls"], counts["errors"])
                submit_next()
        finally:  # on Ctrl-C, SIGTERM or a cache failure: send nothing new, wait for nothing in flight
            workers.close()
        return stopped

    @staticmethod
    def _settle(reply: Reply | None, exc: BaseException | None, q: Question, cache, counts) -> Judgement:
        if exc is not None:
            counts["errors"] += 1
            status = getattr(exc, "status_code", None)
            code = f" (HTTP {status})" if status else ""
            message = mask_text(f"{type(exc).__name__}{code}: {' '.join(str(exc).split())[:300]}")
            return Judgement(None, message)
        assert reply is not None
        counts["tokens_in"] += reply.tokens_in
        counts["tokens_out"] += reply.tokens_out
        try:
            verdict = parse_answer(reply.text)
        except ValueError as bad:
            counts["errors"] += 1
            return Judgement(None, mask_text(f"malformed answer: {bad}"))
        verdict = Verdict(verdict.relevant, mask_text(verdict.reason))  # a server may echo a key
        cache.put(q, verdict, reply.tokens_in, reply.tokens_out)
        return Judgement(verdict)
