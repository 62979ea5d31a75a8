"""What a run was measured on, as MLflow dataset inputs: its fixture and its corpus.

Every run logs two dataset inputs (`MlflowClient.log_inputs`), so the runs table's Datasets
column and the run page say what each figure was measured on, and `evalpipe gate` /
`evalpipe compare` can refuse to compare runs measured on different data:

* the fixture (context `fixture`): name = the fixture's name, source = the fixture file (or the
  BEIR folder / qrels file), profile = cases, cases per tier, version;
* the corpus (context `corpus`): name = `<fixture>-corpus`, source = the corpus file or folder,
  profile = units.

The digest is the sha256 evalpipe already computes (tags `evalpipe.fixture_sha256` and
`evalpipe.corpus_sha256`). MLflow caps a dataset digest at 36 characters, so the digest is its
first 36 hex digits and the full sha256 is in the profile (`sha256`) and the input tag
`evalpipe.sha256`; readers compare the full value when they have it (`digest_of`).

The description is worked out when the run starts (`describe`), saved in run_info.json with
the rest of the run, and logged by the upload (`log_saved_inputs`): a live run and a later
`evalpipe sync` of an offline run log the same inputs. A run saved before this existed gets
the same inputs rebuilt from its tags, params and metrics (`from_saved`; no sources then).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: MLflow's limit on a dataset digest (mlflow.utils.validation.MAX_DATASET_DIGEST_SIZE).
DIGEST_CHARS = 36
CONTEXT_TAG = "mlflow.data.context"
SHA_TAG = "evalpipe.sha256"
SPLIT_TAG = "evalpipe.split"
FIXTURE_CONTEXT = "fixture"
CORPUS_CONTEXT = "corpus"
#: Where the saved run keeps the description (run_info.json).
INFO_KEY = "datasets"


@dataclass(frozen=True)
class DataSpec:
    """One dataset input: what `log_inputs` is given, in plain values (JSON in run_info.json)."""

    context: str
    name: str
    sha256: str
    source: str = ""
    profile: Mapping[str, Any] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return self.sha256[:DIGEST_CHARS]

    def to_json(self) -> dict[str, Any]:
        return {
            "context": self.context,
            "name": self.name,
            "sha256": self.sha256,
            "source": self.source,
            "profile": dict(self.profile),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DataSpec:
        return cls(
            str(data.get("context") or ""),
            str(data.get("name") or ""),
            str(data.get("sha256") or ""),
            str(data.get("source") or ""),
            dict(data.get("profile") or {}),
        )


def _source_uri(path: str) -> str:
    if not path:
        return ""
    if "://" in path:
        return path
    try:
        return Path(path).expanduser().resolve().as_uri()
    except (OSError, ValueError):
        return path


def describe(fixture: Any) -> list[dict[str, Any]]:
    """The fixture and corpus inputs of a run on `fixture` (a loaded `Fixture`), as JSON values."""
    # lazy: evalpipe.safety.secrets, ~3 ms
    from evalpipe.safety.secrets import mask_text

    tiers = fixture.tier_counts()
    corpus = fixture.corpus
    fixture_profile: dict[str, Any] = {"cases": len(fixture.cases), "tiers": tiers}
    if fixture.version:
        fixture_profile["version"] = str(fixture.version)
    fixture_profile["sha256"] = fixture.sha256
    corpus_profile = {"units": len(corpus), "sha256": corpus.sha256}
    specs = [
        DataSpec(
            FIXTURE_CONTEXT,
            fixture.name,
            fixture.sha256,
            mask_text(_source_uri(fixture.source)),
            fixture_profile,
        ),
        DataSpec(
            CORPUS_CONTEXT,
            f"{fixture.name}-corpus",
            corpus.sha256,
            mask_text(_source_uri(corpus.source)),
            corpus_profile,
        ),
    ]
    return [s.to_json() for s in specs if s.sha256]


def from_saved(
    tags: Mapping[str, str], params: Mapping[str, str], metrics: Mapping[str, float]
) -> list[dict[str, Any]]:
    """The inputs of a run saved without a description, rebuilt from what it did record."""
    name = tags.get("evalpipe.fixture") or params.get("fixture") or "fixture"
    out = []
    fixture_sha = tags.get("evalpipe.fixture_sha256", "")
    if fixture_sha:
        tiers = {
            key.split("/")[1]: int(value)
            for key, value in metrics.items()
            if key.startswith("fixture/") and key.endswith("/cases") and key.count("/") == 2
        }
        profile: dict[str, Any] = {"tiers": tiers, "sha256": fixture_sha}
        if "count/cases" in metrics:
            profile["cases"] = int(metrics["count/cases"])
        if tags.get("evalpipe.fixture_version"):
            profile["version"] = tags["evalpipe.fixture_version"]
        source = params.get("fixture.path") or params.get("fixture.qrels") or ""
        out.append(DataSpec(FIXTURE_CONTEXT, name, fixture_sha, source, profile).to_json())
    corpus_sha = tags.get("evalpipe.corpus_sha256", "")
    if corpus_sha:
        profile = {"sha256": corpus_sha}
        if "count/corpus_units" in metrics:
            profile["units"] = int(metrics["count/corpus_units"])
        out.append(DataSpec(CORPUS_CONTEXT, f"{name}-corpus", corpus_sha, "", profile).to_json())
    return out


def saved_specs(saved: Any) -> list[DataSpec]:
    """The saved run's description (run_info.json), else the one rebuilt from its tags."""
    raw = saved.info.get(INFO_KEY)
    if not isinstance(raw, list):
        raw = from_saved(saved.tags, saved.params, saved.metrics)
    return [DataSpec.from_json(item) for item in raw if isinstance(item, Mapping)]


def dataset_inputs(specs: Sequence[DataSpec], split: str = "") -> list[Any]:
    """MLflow `DatasetInput` entities (source type `local`: a file or folder on this machine)."""
    # lazy: mlflow, pandas, scipy, ..., ~1282 ms
    from mlflow.entities import Dataset, DatasetInput, InputTag

    out = []
    for spec in specs:
        source = json.dumps({"uri": spec.source}) if spec.source else json.dumps({"uri": ""})
        dataset = Dataset(
            name=spec.name[:500],
            digest=spec.digest,
            source_type="local",
            source=source,
            profile=json.dumps(dict(spec.profile), sort_keys=True),
        )
        tags = [InputTag(CONTEXT_TAG, spec.context), InputTag(SHA_TAG, spec.sha256)]
        if split and spec.context == FIXTURE_CONTEXT:
            tags.append(InputTag(SPLIT_TAG, split[:500]))
        out.append(DatasetInput(dataset, tags))
    return out


def log_saved_inputs(tracker: Any, run_id: str, saved: Any) -> None:
    """Log the saved run's fixture and corpus as dataset inputs of `run_id`."""
    specs = saved_specs(saved)
    if specs:
        split = str(saved.tags.get(SPLIT_TAG) or saved.params.get(SPLIT_TAG) or "")
        log_inputs(tracker, run_id, dataset_inputs(specs, split))


def copy_inputs(tracker: Any, source_run: Any, run_id: str) -> None:
    """Log `source_run`'s dataset inputs on `run_id` too (a reused sweep point measured the same data)."""
    inputs = getattr(getattr(source_run, "inputs", None), "dataset_inputs", None) or []
    if inputs:
        log_inputs(tracker, run_id, list(inputs))


def log_inputs(tracker: Any, run_id: str, inputs: list[Any]) -> None:
    """`log_inputs`, once more if another run logged the same dataset at the same moment.

    MLflow's SQL store looks a dataset up, then inserts it: two runs of one experiment
    uploading the same fixture together (two runs started at once) can both miss it, and the
    second insert fails its UNIQUE constraint. Asked again, the store finds the first one."""
    try:
        tracker.client.log_inputs(run_id, datasets=inputs)
    except Exception as exc:  # SQLite: "UNIQUE constraint failed"; PostgreSQL: "UniqueViolation"
        text = str(exc).lower()
        if not any(w in text for w in ("unique constraint", "uniqueviolation", "integrityerror")):
            raise
        tracker.client.log_inputs(run_id, datasets=inputs)


# --- reading -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoggedData:
    """What one MLflow run says it was measured on (from its inputs, else its tags)."""

    fixture_sha256: str = ""
    corpus_sha256: str = ""
    fixture_name: str = ""
    source: str = ""  # "inputs" or "tags": where the digests were read


def _full_sha(dataset_input: Any) -> str:
    for tag in dataset_input.tags or []:
        if tag.key == SHA_TAG:
            return str(tag.value)
    try:
        profile = json.loads(dataset_input.dataset.profile or "{}")
    except ValueError:
        profile = {}
    return str(profile.get("sha256") or dataset_input.dataset.digest or "")


def _context(dataset_input: Any) -> str:
    return next((str(t.value) for t in dataset_input.tags or [] if t.key == CONTEXT_TAG), "")


def logged_data(run: Any) -> LoggedData:
    """Digests from the run's dataset inputs; runs logged before inputs existed: from its tags."""
    inputs = getattr(getattr(run, "inputs", None), "dataset_inputs", None) or []
    by_context = {_context(d): d for d in inputs}
    fixture, corpus = by_context.get(FIXTURE_CONTEXT), by_context.get(CORPUS_CONTEXT)
    if fixture is not None or corpus is not None:
        return LoggedData(
            _full_sha(fixture) if fixture is not None else "",
            _full_sha(corpus) if corpus is not None else "",
            fixture.dataset.name if fixture is not None else "",
            "inputs",
        )
    tags = run.data.tags
    return LoggedData(
        tags.get("evalpipe.fixture_sha256", ""),
        tags.get("evalpipe.corpus_sha256", ""),
        tags.get("evalpipe.fixture", ""),
        "tags",
    )
