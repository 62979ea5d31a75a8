"""The verdict cache: a question asked once is never paid for again.

One SQLite file. A verdict is keyed by everything that changes the question or who
answers it: the backend, the model, the server (base URL, credentials masked), the
prompt version, `excerpt_tokens`, the query, the unit ID, the sha256 of the unit's
text and the sha256 of the prompt as sent (which also catches a changed token
counter cutting the excerpt elsewhere). So a re-run, a sweep point or another ranker
that surfaces the same candidate reuses the verdict, while any change asks afresh.
Only answers that parsed are stored: errors are retried on the next run. WAL mode
and a busy timeout let parallel sweep workers share the file.

The cache is optional to a run: every failure of it (locked by another writer for
longer than `judge.cache_timeout`, not a database, another program's table, a folder
that cannot be written) is a `CacheError` with one line saying which and what to do,
so the caller can stop judging and keep the strict results.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from evalpipe.core.files import check_regular
from evalpipe.judge.verdict import Verdict
from evalpipe.safety.errors import EvalpipeError

TABLE = "judgements"
COLUMNS = (
    "key",
    "backend",
    "model",
    "server",
    "prompt_version",
    "excerpt_tokens",
    "query",
    "unit_id",
    "text_sha256",
    "prompt_sha256",
    "relevant",
    "reason",
    "tokens_in",
    "tokens_out",
    "created",
)
SCHEMA = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    key TEXT PRIMARY KEY,
    backend TEXT, model TEXT, server TEXT, prompt_version TEXT, excerpt_tokens INTEGER,
    query TEXT, unit_id TEXT, text_sha256 TEXT, prompt_sha256 TEXT,
    relevant INTEGER NOT NULL, reason TEXT, tokens_in INTEGER, tokens_out INTEGER, created REAL
)
"""
# evalpipe's first cache layout (no server, excerpt size or prompt hash in the key): set aside, not reused.
OLD_COLUMNS = (
    "key",
    "backend",
    "model",
    "prompt_version",
    "query",
    "unit_id",
    "text_sha256",
    "relevant",
    "reason",
    "tokens_in",
    "tokens_out",
    "created",
)


class CacheError(EvalpipeError):
    """The judge cache cannot be used; the message says why and how to fix it."""


@dataclass(frozen=True)
class Question:
    """What identifies one judgement: who is asked, and exactly what."""

    backend: str
    model: str
    server: str
    prompt_version: str
    excerpt_tokens: int
    query: str
    unit_id: str
    text_sha256: str
    prompt_sha256: str

    @property
    def key(self) -> str:
        blob = json.dumps(
            [
                self.backend,
                self.model,
                self.server,
                self.prompt_version,
                self.excerpt_tokens,
                self.query,
                self.unit_id,
                self.text_sha256,
                self.prompt_sha256,
            ]
        )
        return hashlib.sha256(blob.encode()).hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def describe(exc: BaseException, path: Path, waited: float) -> str:
    """One line for a failure of the cache at `path`: what happened, and the fix that fits it."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    low = text.lower()
    if "locked" in low or "busy" in low:
        return (
            f"the judge cache {path} is locked by another writer (waited {waited:g} s): "
            "let the other run finish, or give this one its own judge.cache_dir=..."
        )
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return (
            f"the judge cache {path} is not a readable SQLite database ({text}): delete it to start "
            "afresh, or set judge.cache_dir=... to another folder"
        )
    if "readonly" in low or "read-only" in low or "unable to open" in low or isinstance(exc, OSError):
        return f"cannot write the judge cache {path} ({text}): set judge.cache_dir=... to a writable folder"
    return f"the judge cache {path} cannot be used ({text}): delete it, or set judge.cache_dir=..."


class JudgementCache:
    def __init__(self, path: Path, timeout: float = 30.0):
        self.path = path
        self.timeout = timeout
        if path.exists() or path.is_symlink():  # a FIFO or device would block or be clobbered by SQLite
            try:
                check_regular(path, "judge cache", " (delete it, or set judge.cache_dir=...)")
            except EvalpipeError as exc:
                raise CacheError(str(exc)) from None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path), timeout=timeout)
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(describe(exc, path, timeout)) from None
        try:
            self._prepare()
        except sqlite3.Error as exc:
            self.db.close()
            raise CacheError(describe(exc, path, timeout)) from None
        except CacheError:
            self.db.close()
            raise

    def _columns(self) -> tuple[str, ...]:
        return tuple(r[1] for r in self.db.execute(f"PRAGMA table_info({TABLE})"))

    def _prepare(self) -> None:
        if self.db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            self.db.execute("PRAGMA journal_mode=WAL")
        found = self._columns()
        if found == OLD_COLUMNS:  # evalpipe's first layout: keys differ, keep the rows aside
            self.db.execute(f"ALTER TABLE {TABLE} RENAME TO {TABLE}_v1")
            found = ()
        if not found:
            self.db.execute(SCHEMA)
            self.db.commit()
        elif found != COLUMNS:
            raise CacheError(
                f"the judge cache {self.path} holds a {TABLE!r} table of another layout "
                f"(columns {', '.join(found[:6])}{', ...' if len(found) > 6 else ''}): it is not an "
                "evalpipe judge cache; move it away, or set judge.cache_dir=... to another folder"
            )

    def _run(self, sql: str, args: tuple = (), commit: bool = False) -> list[tuple]:
        try:
            rows = self.db.execute(sql, args).fetchall()
            if commit:
                self.db.commit()
            return rows
        except sqlite3.Error as exc:
            raise CacheError(describe(exc, self.path, self.timeout)) from None

    def holds(self, backend: str, model: str, server: str, prompt_version: str) -> bool:
        """Whether any verdict of this judge (backend, model, server, prompt version) is cached."""
        rows = self._run(
            f"SELECT 1 FROM {TABLE} WHERE backend = ? AND model = ? AND server = ? "
            "AND prompt_version = ? LIMIT 1",
            (backend, model, server, prompt_version),
        )
        return bool(rows)

    def check_writable(self) -> None:
        """Take and release the write lock, so a locked cache is found before any call is paid for."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("ROLLBACK")
        except sqlite3.Error as exc:
            raise CacheError(describe(exc, self.path, self.timeout)) from None

    def get(self, q: Question) -> Verdict | None:
        rows = self._run(f"SELECT relevant, reason FROM {TABLE} WHERE key = ?", (q.key,))
        return None if not rows else Verdict(bool(rows[0][0]), rows[0][1] or "")

    def put(self, q: Question, verdict: Verdict, tokens_in: int, tokens_out: int) -> None:
        values = (
            q.key,
            q.backend,
            q.model,
            q.server,
            q.prompt_version,
            q.excerpt_tokens,
            q.query,
            q.unit_id,
            q.text_sha256,
            q.prompt_sha256,
            int(verdict.relevant),
            verdict.reason,
            tokens_in,
            tokens_out,
            time.time(),
        )
        marks = ", ".join("?" * len(COLUMNS))
        self._run(
            f"INSERT OR REPLACE INTO {TABLE} ({', '.join(COLUMNS)}) VALUES ({marks})", values, commit=True
        )

    def close(self) -> None:
        self.db.close()
