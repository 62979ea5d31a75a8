"""The saved run: a run's output directory is the source of truth, the tracking store a copy.

Every run writes, before anything is sent to MLflow, the files a reader needs
(report.md, cases.jsonl, misses.jsonl, run.trec, config.yaml) plus what an upload
needs to recreate the MLflow run exactly (metrics.json, params.json, tags.json and
run_info.json with status, start/end times and where it was uploaded). So a dead
or missing store costs nothing: `evalpipe sync <dir>` uploads it later.

Everything written here was masked by the caller (`evalpipe.safety.secrets`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalpipe.core.files import read_json_text
from evalpipe.safety.errors import EvalpipeError

INFO_FILE = "run_info.json"
FORMAT = 1
#: Files uploaded as MLflow artifacts when run_info.json does not list them (cases.jsonl goes up
#: as the cases.json table instead).
ARTIFACT_FILES = ("report.md", "config.yaml", "misses.jsonl", "run.trec")
TABLE_FILE = "cases.jsonl"
PARTIAL_MARK = "PARTIAL"


@dataclass(frozen=True)
class SavedRun:
    """A run as saved in its output directory."""

    directory: Path
    info: Mapping[str, Any]
    metrics: Mapping[str, float]
    params: Mapping[str, str]
    tags: Mapping[str, str]

    def artifact_files(self) -> dict[str, str]:
        out = {}
        for name in self.info.get("artifacts") or ARTIFACT_FILES:
            path = self.directory / name
            if path.is_file():
                out[name] = path.read_text(encoding="utf-8")
        return out

    def case_table(self) -> dict[str, list[Any]] | None:
        """The per-case table (columns) back from cases.jsonl, as the run logged it."""
        path = self.directory / TABLE_FILE
        if not path.exists():
            return None
        try:
            text = read_json_text(path, "per-case table")
        except EvalpipeError as exc:
            raise SavedRunError(str(exc)) from None
        rows = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
                raise SavedRunError(
                    f"{path}:{lineno}: truncated or not JSON ({getattr(exc, 'msg', 'nested too deeply')})"
                ) from None
            if not isinstance(row, dict):
                raise SavedRunError(f"{path}:{lineno}: a JSON {type(row).__name__}, not a case record")
            rows.append(row)
        if not rows:
            return None
        return {key: [row.get(key) for row in rows] for key in rows[0]}


def new_local_id() -> str:
    """Identity of a saved run across stores: the upload marker `sync` looks for."""
    return uuid.uuid4().hex


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _dump(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def save_run(
    directory: Path,
    files: Mapping[str, str],
    metrics: Mapping[str, float],
    params: Mapping[str, str],
    tags: Mapping[str, str],
    info: Mapping[str, Any],
) -> None:
    """Write the run's files and its metrics/params/tags/run_info (run_info last: it marks complete)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        write_atomic(directory / name, content)
    write_atomic(directory / "metrics.json", _dump({k: float(v) for k, v in metrics.items()}))
    write_atomic(directory / "params.json", _dump({k: str(v) for k, v in params.items()}))
    write_atomic(directory / "tags.json", _dump({k: str(v) for k, v in tags.items()}))
    artifacts = sorted(name for name in files if name != TABLE_FILE)
    write_atomic(directory / INFO_FILE, _dump({"format": FORMAT, "artifacts": artifacts, **info}))


def update_info(directory: Path, **changes: Any) -> dict[str, Any]:
    """Change fields of run_info.json (e.g. after an upload)."""
    path = directory / INFO_FILE
    info = json.loads(path.read_text(encoding="utf-8"))
    info.update(changes)
    write_atomic(path, _dump(info))
    return info


class SavedRunError(EvalpipeError):
    """A saved run whose files are half-written, truncated or not what evalpipe wrote."""


#: Fields every run_info.json evalpipe writes holds, with their types.
INFO_FIELDS: dict[str, type | tuple[type, ...]] = {
    "local_id": str,
    "experiment": str,
    "run_name": str,
    "status": str,
    "start_time_ms": int,
}
RUN_STATUSES = ("FINISHED", "FAILED", "KILLED")


def _read_json_object(path: Path, required: bool) -> dict[str, Any]:
    """A JSON object from `path` ({} if absent and not required), or one line naming what is wrong."""
    if not path.exists() and not path.is_symlink():
        if required:
            raise SavedRunError(f"{path} is missing: this is not a saved evalpipe run")
        return {}
    try:
        text = read_json_text(path, "saved-run file")  # a regular file within the size limit, UTF-8
    except EvalpipeError as exc:
        raise SavedRunError(f"{exc}: the file is damaged or not what evalpipe wrote") from None
    if not text.strip():
        raise SavedRunError(
            f"{path} is empty (the run was stopped while saving it?): re-run to measure it again"
        )
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise SavedRunError(
            f"{path} is truncated or not JSON ({_json_where(exc)}): "
            "it was not completely written; re-run to measure it again"
        ) from None
    if not isinstance(data, dict):
        raise SavedRunError(f"{path} holds a JSON {type(data).__name__}, not the object evalpipe writes")
    return data


def _json_where(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno}, column {exc.colno}: {exc.msg}"
    return "nested too deeply"


def load_run(directory: Path) -> SavedRun:
    """The saved run in `directory`, its files checked for shape (SavedRunError names the file)."""
    info = _read_json_object(directory / INFO_FILE, required=True)
    where = directory / INFO_FILE
    for key, kind in INFO_FIELDS.items():
        if key not in info:
            raise SavedRunError(f"{where}: no {key!r} field: this is not a run_info.json that evalpipe wrote")
        if not isinstance(info[key], kind) or isinstance(info[key], bool):
            raise SavedRunError(f"{where}: {key!r} is {info[key]!r}, not a {getattr(kind, '__name__', kind)}")
    if info["status"] not in RUN_STATUSES:
        raise SavedRunError(f"{where}: status {info['status']!r} is not one of {', '.join(RUN_STATUSES)}")
    metrics = _read_json_object(directory / "metrics.json", required=False)
    bad = [k for k, v in metrics.items() if isinstance(v, bool) or not isinstance(v, int | float)]
    if bad:
        raise SavedRunError(f"{directory / 'metrics.json'}: {bad[0]!r} is {metrics[bad[0]]!r}, not a number")
    params = _read_json_object(directory / "params.json", required=False)
    tags = _read_json_object(directory / "tags.json", required=False)
    for name, values in (("params.json", params), ("tags.json", tags)):
        bad = [k for k, v in values.items() if not isinstance(v, str)]
        if bad:
            raise SavedRunError(f"{directory / name}: {bad[0]!r} is {values[bad[0]]!r}, not text")
    return SavedRun(directory, info, metrics, params, tags)


def unsynced(directory: Path, setting: str = "hydra.run.dir") -> str | None:
    """Why `directory` must not take a new run: it holds a saved run not (completely) uploaded, whose
    files a new run would overwrite (None when it is empty, uploaded, or holds no run). `setting`
    is the one the advice names: `hydra.run.dir` for a run, `hydra.sweep.dir` for a sweep's job."""
    path = directory / INFO_FILE
    if not path.is_file():
        return None
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
        state = str(info.get("upload", "unknown")) if isinstance(info, dict) else "unreadable"
    except (OSError, ValueError):
        state = "unreadable"
    if state == "complete":
        return None
    what = "sweep" if setting == "hydra.sweep.dir" else "run"
    return (
        f"{directory} holds a saved run that is not in a tracking store yet ({INFO_FILE}: upload "
        f"{state}); a new run there would overwrite it: upload it first with `evalpipe sync {directory}`, "
        f"move it away, or give this {what} another {setting}=..."
    )


def find_saved_runs(paths: Iterable[Path]) -> list[Path]:
    """Directories holding a run_info.json: the paths themselves or anywhere below (a multirun dir)."""
    found: list[Path] = []
    for path in paths:
        if (path / INFO_FILE).is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p.parent for p in path.rglob(INFO_FILE))
    return list(dict.fromkeys(p.resolve() for p in found))
