"""Same data or no verdict: a baseline measured on another fixture, corpus or split compares nothing.

Digests are read from each run's MLflow dataset inputs (`tracking.datasets`), else from its
`evalpipe.fixture_sha256` / `evalpipe.corpus_sha256` tags (runs logged before inputs existed),
else from the exported baseline file. A digest MLflow truncated (36 characters) matches the
full sha256 it starts with. A run that records no digest at all cannot be shown to match, which
is a difference too: the gate does not assume.
"""

from __future__ import annotations

from evalpipe.gate.model import FixtureRun

#: The shortest digest prefix accepted as identifying a sha256 (MLflow keeps 36 characters).
MIN_DIGEST = 16


def same_digest(a: str, b: str) -> bool:
    a, b = a.strip().lower(), b.strip().lower()
    n = min(len(a), len(b))
    return n >= MIN_DIGEST and a[:n] == b[:n]


def _short(digest: str) -> str:
    return digest[:12] if digest else "(none recorded)"


def differences(base: FixtureRun, cand: FixtureRun) -> list[str]:
    """One line per way the two runs' data differ (empty = the same data)."""
    out = []
    for what, b, c in (
        ("fixture", base.data.fixture_sha256, cand.data.fixture_sha256),
        ("corpus", base.data.corpus_sha256, cand.data.corpus_sha256),
    ):
        if not b or not c or not same_digest(b, c):
            out.append(
                f"{base.key.fixture}: {what} sha256 differs: baseline {_short(b)} (read from "
                f"{base.data.read_from or '?'}), candidate {_short(c)} "
                f"(read from {cand.data.read_from or '?'})"
            )
    if base.data.split != cand.data.split:
        out.append(
            f"{base.key.fixture}: split differs: baseline {base.data.split!r}, candidate {cand.data.split!r}"
        )
    if base.data.version and cand.data.version and base.data.version != cand.data.version:
        out.append(
            f"{base.key.fixture}: fixture version differs: baseline {base.data.version!r}, "
            f"candidate {cand.data.version!r}"
        )
    if not out:  # same digests: the cases must be the same too (a BEIR digest covers its corpus only)
        b_ids, c_ids = set(base.cases.case_ids), set(cand.cases.case_ids)
        if b_ids != c_ids:
            only_b, only_c = sorted(b_ids - c_ids), sorted(c_ids - b_ids)
            out.append(
                f"{base.key.fixture}: the runs scored different cases: {len(only_b)} only in the baseline"
                + (f" (e.g. {only_b[0]!r})" if only_b else "")
                + f", {len(only_c)} only in the candidate"
                + (f" (e.g. {only_c[0]!r})" if only_c else "")
            )
    return out
