"""The verdict cache: a question asked once is never paid for again.

One SQLite file keyed by (backend, model, prompt version, query, unit ID, sha256 of
the unit text), so a re-run, a sweep point or another ranker that surfaces the same
candidate reuses the verdict, while a changed prompt, model or unit text asks
afresh. Only answers that parsed are stored: errors are retried on the next run.
WAL mode and a busy timeout let parallel sweep workers share the file.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from evalpipe.judge.verdict import Verdict
from evalpipe.safety.errors import EvalpipeError

SCHEMA = """
CREATE TABLE IF NOT EXISTS judgements (
    key TEXT PRIMARY KEY,
    backend TEXT, model TEXT, prompt_version TEXT, query TEXT, unit_id TEXT, text_sha256 TEXT,
    relevant INTEGER NOT NULL, reason TEXT, tokens_in INTEGER, tokens_out INTEGER, created REAL
)
"""


@dataclass(frozen=True)
class Question:
    """What identifies one judgement."""

    backend: str
    model: str
    prompt_version: str
    query: str
    unit_id: str
    text_sha256: str

    @property
    def key(self) -> str:
        blob = json.dumps(
            [self.backend, self.model, self.prompt_version, self.query, self.unit_id, self.text_sha256]
        )
        return hashlib.sha256(blob.encode()).hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class JudgementCache:
    def __init__(self, path: Path):
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(path), timeout=30.0)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(SCHEMA)
            self.db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise EvalpipeError(
                f"cannot open the judge cache {path}: {exc} (set judge.cache_dir=... to a writable folder)"
            ) from None

    def get(self, q: Question) -> Verdict | None:
        row = self.db.execute("SELECT relevant, reason FROM judgements WHERE key = ?", (q.key,)).fetchone()
        return None if row is None else Verdict(bool(row[0]), row[1] or "")

    def put(self, q: Question, verdict: Verdict, tokens_in: int, tokens_out: int) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO judgements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                q.key,
                q.backend,
                q.model,
                q.prompt_version,
                q.query,
                q.unit_id,
                q.text_sha256,
                int(verdict.relevant),
                verdict.reason,
                tokens_in,
                tokens_out,
                time.time(),
            ),
        )
        self.db.commit()

    def close(self) -> None:
        self.db.close()
