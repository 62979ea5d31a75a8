"""A retriever service behind HTTP as a ranker (`ranker=http`).

The service is called as it is deployed: one request per query, built from a JSON template
(`body`, with `{query}` and `{k}` put in), the answer read at the dotted paths the user gives
(`results_field` for the list, then `id_field`, `score_field`, `document_field`, `section_field`,
`chunk_field` inside each item, see `records.dig`). Many queries go out at once from a thread
pool (`concurrency`) when the run is batched; each request has a timeout and is retried with
exponential backoff on connection errors, timeouts and 5xx answers (a 4xx is the request's
fault and is not retried).

Bad settings are found before the first case: the constructor sends one probe query and checks
that the service answers, in JSON, with a list where `results_field` says and the named fields
in its items. A failure there is one line and exit 2 (`HttpRetrieverError`); the same failure
later, during the run, is a retrieval error for that case only, as for any ranker.

An auth header comes from an environment variable (`token_env`), never from the config: the
value is registered as a secret (masked in every line evalpipe writes) and only the variable's
name is a parameter.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from evalpipe.core.hit import Hit
from evalpipe.core.unit import Unit
from evalpipe.rankers.external.records import FieldMissing, RecordUnits, dig
from evalpipe.safety.errors import EvalpipeError
from evalpipe.safety.secrets import register

#: HTTP statuses worth another try: the server's trouble, not the request's.
RETRY_STATUS = frozenset({500, 502, 503, 504})


class HttpRetrieverError(EvalpipeError):
    """A retriever service that cannot be evaluated as configured; the message says which setting."""


class RequestFailed(RuntimeError):
    """One request that failed after its retries (a retrieval error for that case)."""


def fill(template: Any, query: str, k: int) -> Any:
    """The request body for one query: `"{k}"` alone becomes the number k, `{query}` / `{k}` inside
    other strings are replaced, mappings and lists are filled recursively."""
    if isinstance(template, str):
        if template == "{k}":
            return k
        return template.replace("{query}", query).replace("{k}", str(k))
    if isinstance(template, Mapping):
        return {str(key): fill(value, query, k) for key, value in template.items()}
    if isinstance(template, Sequence) and not isinstance(template, bytes):
        return [fill(value, query, k) for value in template]
    return template


def _mentions_query(template: Any) -> bool:
    if isinstance(template, str):
        return "{query}" in template
    if isinstance(template, Mapping):
        return any(_mentions_query(v) for v in template.values())
    if isinstance(template, Sequence) and not isinstance(template, bytes):
        return any(_mentions_query(v) for v in template)
    return False


class HttpRanker:
    """Retrieval by a service: POST (or GET) per query, hits read from its JSON answer."""

    name = "http"

    def __init__(
        self,
        url: str,
        method: str = "POST",
        body: Mapping[str, Any] | None = None,
        results_field: str = "results",
        id_field: str = "id",
        score_field: str | None = "score",
        document_field: str | None = None,
        section_field: str | None = None,
        chunk_field: str | None = None,
        headers: Mapping[str, str] | None = None,
        token_env: str | None = None,
        token_header: str = "Authorization",
        token_prefix: str = "Bearer ",
        concurrency: int = 4,
        request_timeout_s: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        probe_query: str = "evalpipe probe",
        min_score: float | None = None,
    ):
        self.url = str(url or "")
        if not self.url.startswith(("http://", "https://")):
            raise HttpRetrieverError(
                f"http ranker: ranker.url must be an http:// or https:// URL, got {url!r}"
            )
        self.method = str(method).upper()
        if self.method not in ("POST", "GET"):
            raise HttpRetrieverError(f"http ranker: ranker.method must be POST or GET, got {method!r}")
        self.body = dict(body) if body is not None else {"query": "{query}", "k": "{k}"}
        if not _mentions_query(self.body):
            raise HttpRetrieverError(
                "http ranker: ranker.body never mentions {query}: every request would be the same "
                "(e.g. ranker.body={query:'{query}',k:'{k}'})"
            )
        for name, value, low in (
            ("concurrency", concurrency, 1),
            ("retries", retries, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise HttpRetrieverError(
                    f"http ranker: ranker.{name} must be a whole number >= {low}, got {value!r}"
                )
        for name, value in (("request_timeout_s", request_timeout_s), ("backoff_s", backoff_s)):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or value < 0
                or (name == "request_timeout_s" and value == 0)
            ):
                raise HttpRetrieverError(f"http ranker: ranker.{name} must be a number > 0, got {value!r}")
        self.results_field, self.id_field, self.score_field = (
            str(results_field or ""),
            str(id_field),
            score_field,
        )
        self.records = RecordUnits(document_field, section_field, chunk_field)
        if (section_field or chunk_field) and not document_field:
            raise HttpRetrieverError(
                "http ranker: ranker.section_field / chunk_field need ranker.document_field (the field "
                "holding each record's document ID)"
            )
        self.concurrency, self.retries, self.backoff_s = concurrency, retries, float(backoff_s)
        self.min_score = min_score
        sent = {str(k): str(v) for k, v in (headers or {}).items()}
        if token_env:
            token = os.environ.get(str(token_env))
            if not token:
                raise HttpRetrieverError(
                    f"http ranker: ranker.token_env names the environment variable {token_env}, which is not "
                    "set: export it (the token is read from there, never from the config)"
                )
            register([token])  # masked in every line evalpipe writes from now on
            sent[str(token_header)] = f"{token_prefix}{token}"
        self._client = httpx.Client(timeout=float(request_timeout_s), headers=sent)
        weakref.finalize(self, self._client.close)
        self._counts = {"requests": 0, "retried": 0}
        self._lock = threading.Lock()
        self.probe_query = probe_query
        self._probe()

    # -- requests ---------------------------------------------------------------------------------

    def _count(self, what: str) -> None:
        with self._lock:
            self._counts[what] += 1

    def _send(self, query: str, k: int) -> Any:
        """One query's JSON answer, retried on connection errors, timeouts and 5xx; RequestFailed
        says what went wrong the last time."""
        payload = fill(self.body, query, k)
        attempt = 0
        while True:
            self._count("requests")
            try:
                if self.method == "POST":
                    response = self._client.post(self.url, json=payload)
                else:
                    response = self._client.get(self.url, params=payload)
                # 501 and 4xx are not worth repeating: reported below as they are
                problem = f"HTTP {response.status_code}" if response.status_code in RETRY_STATUS else None
            except httpx.TimeoutException:
                problem = f"no answer within ranker.request_timeout_s={self._client.timeout.read}s"
                response = None
            except httpx.TransportError as exc:
                problem = f"cannot reach {self.url} ({type(exc).__name__}: {exc})"
                response = None
            if problem is None and response is not None:
                break
            if attempt >= self.retries:
                raise RequestFailed(f"{problem} after {attempt + 1} attempt(s)")
            self._count("retried")
            time.sleep(self.backoff_s * (2**attempt))
            attempt += 1
        if response.status_code >= 400:
            raise RequestFailed(f"HTTP {response.status_code} from {self.url}: {response.text[:200]!r}")
        try:
            return response.json()
        except ValueError:
            kind = response.headers.get("content-type", "no content-type")
            raise RequestFailed(f"the answer is not JSON ({kind}): {response.text[:120]!r}") from None

    def _hits(self, answer: Any, k: int) -> list[Hit]:
        try:
            items = dig(answer, self.results_field)
        except FieldMissing as exc:
            raise FieldMissing(f"ranker.results_field {self.results_field!r}: {exc}") from None
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise FieldMissing(
                f"ranker.results_field {self.results_field!r} holds a {type(items).__name__}, "
                "not a list of results"
            )
        hits: list[Hit] = []
        for n, item in enumerate(items):
            where = f"result {n}"
            try:
                rid = dig(item, self.id_field)
            except FieldMissing as exc:
                raise FieldMissing(f"{where}: ranker.id_field {self.id_field!r}: {exc}") from None
            if not isinstance(rid, str | int) or isinstance(rid, bool):
                raise FieldMissing(f"{where}: ranker.id_field {self.id_field!r} holds {rid!r}, not an ID")
            score = None
            if self.score_field:
                try:
                    raw = dig(item, self.score_field)
                except FieldMissing as exc:
                    raise FieldMissing(f"{where}: ranker.score_field {self.score_field!r}: {exc}") from None
                if isinstance(raw, bool) or not isinstance(raw, int | float):
                    raise FieldMissing(
                        f"{where}: ranker.score_field {self.score_field!r} holds {raw!r}, not a number"
                    )
                score = float(raw)
            if self.min_score is not None and score is not None and score < self.min_score:
                continue
            self.records.unit(str(rid), item, where)
            hits.append(Hit(str(rid), score))
            if len(hits) == k:
                break
        return hits

    def _probe(self) -> None:
        """One query before the first case: the service answers, in JSON, with results where the
        fields say. Anything else is bad input, reported now."""
        try:
            answer = self._send(self.probe_query, 1)
            self._hits(answer, 1)
        except (RequestFailed, FieldMissing) as exc:
            raise HttpRetrieverError(
                f"http ranker: the probe query to {self.url} failed: {exc}; check the service and "
                "ranker.url / results_field / id_field / score_field / document_field"
            ) from None
        self._counts = {"requests": 0, "retried": 0}
        self.records.units.clear()  # the probe's records are no case's

    # -- the ranker protocol ----------------------------------------------------------------------

    def search(self, query: str, k: int, constraints: Mapping[str, Any] | None = None) -> list[Hit]:
        return self._hits(self._send(query, k), k)

    def search_batch(
        self, queries: Sequence[str], k: int, constraints: Sequence[Mapping[str, Any] | None] | None = None
    ) -> list[list[Hit]]:
        """Up to `concurrency` requests in flight at once; the same hits as `search` one by one. A
        failed query fails the batch, and the runner then asks one by one, so each error is its case's."""
        if self.concurrency == 1 or len(queries) <= 1:
            return [self.search(q, k) for q in queries]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(queries))) as pool:
            return list(pool.map(lambda q: self.search(q, k), queries))

    @property
    def foreign_units(self) -> dict[str, Unit]:
        """The service's records judged by their own document / section fields (empty when its IDs
        are the corpus's)."""
        return self.records.units

    def stats(self) -> dict[str, Any]:
        return {
            "mode": "http",
            "requests": self._counts["requests"],
            "retried_requests": self._counts["retried"],
            "concurrency": self.concurrency,
        }

    def __repr__(self) -> str:
        return f"HttpRanker({self.method} {self.url})"
