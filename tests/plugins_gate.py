"""Plug-in retrievers for the gate tests: a "pull request" that leaves one tier broken, and one
that changes nothing (imported via PYTHONPATH=tests, as a user's own retriever would be)."""

from __future__ import annotations

from evalpipe.rankers.lexical.bm25 import BM25Ranker


class PullRequestRetriever:
    """BM25 (evalpipe's defaults) behind a plug-in, as a team's retriever under test.

    `regress_short=True` is the deliberately regressed pull request: for short queries (at most
    three words: symbol lookups, the gold fixture's exact tier) it returns its ranking from rank 21
    on, so that tier collapses while prose questions (concept, multi_hop) are answered as before.
    """

    def __init__(self, regress_short: bool = False, depth_skip: int = 20):
        self.regress_short = bool(regress_short)
        self.depth_skip = int(depth_skip)
        self.inner = BM25Ranker()

    def prepare(self, corpus) -> None:
        self.inner.prepare(corpus)

    def search(self, query, k, constraints=None):
        if self.regress_short and len(query.split()) <= 3:
            return list(self.inner.search(query, k + self.depth_skip, constraints))[self.depth_skip :]
        return list(self.inner.search(query, k, constraints))


class UnchangedRetriever(PullRequestRetriever):
    """The pull request that changes nothing: the baseline's retriever as it was."""


class RegressedRetriever(PullRequestRetriever):
    """The pull request that breaks short (symbol) queries: the exact tier collapses."""

    def __init__(self, depth_skip: int = 20):
        super().__init__(regress_short=True, depth_skip=depth_skip)


class AnswerFileRetriever:
    """Answers from a JSON file {query: [unit IDs]}: per-case outcomes chosen by the test."""

    def __init__(self, path: str):
        import json
        from pathlib import Path

        self.answers = json.loads(Path(path).read_text(encoding="utf-8"))

    def search(self, query, k, constraints=None):
        return list(self.answers.get(query, []))[:k]
