"""An exported baseline: a JSON file checked into the user's repo, so CI gates with no shared server.

`evalpipe baseline export` writes, per fixture run of the baseline (one, or one per suite child):
the fixture/split, what it was measured on (fixture and corpus sha256), its aggregate figures and
every case's values (the run's per-case table: tier, query, expected IDs, the top of its ranking,
first rank and every per-case metric). That is all the gate reads from a baseline, so a file gates
exactly as the run it came from. One case per line keeps a re-export's diff readable in review.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalpipe import __version__
from evalpipe.gate.model import ALL_SPLIT, DataId, FixtureKey, FixtureRun, GateError, Side
from evalpipe.safety.secrets import mask_text
from evalpipe.stats.comparison import CompareError, RunCases, cases_from_rows

FORMAT_KEY = "evalpipe_baseline"
FORMAT = 1
#: IDs of each ranking kept per case (enough to read a lost case; the full run keeps the rest).
TOP_KEPT = 10


def case_rows(cases: RunCases) -> list[dict[str, Any]]:
    """The run's per-case table back as rows (in the run's case order)."""
    rows = []
    for case_id in cases.case_ids or list(cases.info):
        info = cases.info.get(case_id)
        row: dict[str, Any] = {
            "case_id": case_id,
            "tier": info.tier if info else "",
            "query": info.query if info else "",
            "expected": list(info.expected) if info else [],
            "top": list(info.top[:TOP_KEPT]) if info else [],
        }
        if case_id in cases.ranks:
            row["first_rank"] = int(cases.ranks[case_id])
        for metric in sorted(cases.values):
            row[metric] = cases.values[metric].get(case_id)
        rows.append(row)
    return rows


def export_side(side: Side, name: str = "") -> str:
    """The JSON text of a baseline file for `side` (a run or suite run)."""

    fixtures = []
    blocks = []
    for i, run in enumerate(side.runs):
        fixtures.append(
            {
                "fixture": run.key.fixture,
                "split": run.key.split,
                "run_id": run.run_id,
                "run_name": run.cases.name,
                "objective": run.cases.objective,
                "data": run.data.to_json(),
                "figures": {k: run.figures[k] for k in sorted(run.figures)},
                "cases": f"@@CASES{i}@@",
            }
        )
        blocks.append(case_rows(run.cases))
    doc = {
        FORMAT_KEY: FORMAT,
        "name": name,
        "run_id": side.run_id,
        "run_name": str(side.extra.get("run_name") or ""),
        "tracking_uri": mask_text(side.tracking_uri) if side.tracking_uri else "",
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "evalpipe_version": __version__,
        "fixtures": fixtures,
    }
    text = json.dumps(doc, indent=1, ensure_ascii=False)
    for i, rows in enumerate(blocks):
        lines = ",\n".join("    " + json.dumps(row, ensure_ascii=False, sort_keys=False) for row in rows)
        text = text.replace(f'"@@CASES{i}@@"', "[\n" + lines + "\n   ]" if rows else "[]")
    return text + "\n"


def _need(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in data:
        raise GateError(f"{where}: missing field {key!r} (re-export it with `evalpipe baseline export`)")
    value = data[key]
    if not isinstance(value, kind):
        raise GateError(f"{where}: field {key!r} must be a {kind.__name__}, got {type(value).__name__}")
    return value


def read_baseline(path: Path) -> Side:
    """A baseline file as a gate side; GateError naming the file (and line or field) if it is not one."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GateError(f"{path}: cannot read the baseline file ({exc})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GateError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); is this a baseline file?"
        ) from None
    if not isinstance(doc, dict) or FORMAT_KEY not in doc:
        raise GateError(
            f"{path}: not an evalpipe baseline file (no {FORMAT_KEY!r} field); write one with "
            "`evalpipe baseline export`"
        )
    if doc[FORMAT_KEY] != FORMAT:
        raise GateError(f"{path}: baseline format {doc[FORMAT_KEY]!r}; this evalpipe reads format {FORMAT}")
    entries = _need(doc, "fixtures", list, str(path))
    if not entries:
        raise GateError(f"{path}: the baseline holds no fixture runs")
    runs = []
    for i, entry in enumerate(entries):
        where = f"{path}: fixtures[{i}]"
        if not isinstance(entry, dict):
            raise GateError(f"{where}: must be an object")
        rows = _need(entry, "cases", list, where)
        if not all(isinstance(r, dict) for r in rows):
            raise GateError(f"{where}: every case must be an object")
        fixture = str(_need(entry, "fixture", str, where))
        split = str(entry.get("split") or ALL_SPLIT)
        data = _need(entry, "data", dict, where)
        run_id = str(entry.get("run_id") or f"{path.name}#{i}")
        try:
            cases = cases_from_rows(
                rows,
                run_id=run_id,
                name=str(entry.get("run_name") or ""),
                label=f"{path} ({fixture})",
                objective=str(entry.get("objective") or ""),
            )
        except CompareError as exc:
            raise GateError(str(exc)) from None
        figures = entry.get("figures") or {}
        runs.append(
            FixtureRun(
                FixtureKey(fixture, split),
                DataId(
                    str(data.get("fixture_sha256") or ""),
                    str(data.get("corpus_sha256") or ""),
                    split,
                    "file",
                    str(data.get("version") or ""),
                ),
                cases,
                {k: float(v) for k, v in figures.items() if isinstance(v, int | float)},
            )
        )
    name = str(doc.get("name") or "")
    run_name = str(doc.get("run_name") or "")
    run_id = str(doc.get("run_id") or "")
    label = f"{name or run_name or 'baseline'} ({path.name}" + (f", run {run_id[:8]})" if run_id else ")")
    return Side(
        label=label,
        run_id=run_id,
        runs=runs,
        origin="file",
        tracking_uri="",
        reference=str(path),
        extra={"run_name": run_name, "exported_at": doc.get("exported_at", "")},
    )
