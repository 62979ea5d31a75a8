"""Everything that can be checked before the first case runs, checked before the first case runs.

A bad metric name or objective found after scoring costs the whole run (minutes on
a BEIR collection) and leaves a FAILED run behind; a run file whose query IDs match
no case scores everything 0 and looks like a result. So `check(cfg)` validates the
whole config, loads the fixture and its corpus, builds the ranker and parses any
input file the ranker replays, before MLflow is opened: bad input stops with one
line (an `EvalpipeError`) and no run is created.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from evalpipe.evaluation.batching import parse_settings
from evalpipe.evaluation.chunker_group import apply_chunker_group
from evalpipe.evaluation.runner import run_case
from evalpipe.evaluation.store_coverage import check_store_coverage
from evalpipe.inputs.fixture import Case, Fixture
from evalpipe.safety.errors import EvalpipeError

#: Largest K accepted: scoring keeps a cases x max(ks) matrix, and nobody reads recall@1e9.
MAX_K = 100_000
#: Boolean switches of the top-level config.
#: Settings that are true or false and nothing else (dotted keys): a value such as "no" or 1
#: would otherwise be read by its truthiness ("no" is true), the opposite of what was asked.
SWITCHES = ("force", "progress", "allow_skipped", "traces", "tracking.offline", "sweep.holdout")
#: Figures every run logs besides the ranking metrics (see evaluation.measure).
RUN_FIGURES = ("index_build_seconds", "corpus_units", "eval_seconds", "peak_memory_mb", "unknown_ids")
DEFAULT_OBJECTIVE = "recall_at_5"
#: Figure families whose names depend on the data (index stats, the fixture checker, the judge).
FIGURE_PREFIXES = ("index/", "fixture/", "judge/")


class ConfigError(EvalpipeError):
    """A config value that cannot work; the message names the key and an example of a good value."""


@dataclass(frozen=True)
class Checked:
    """What `evaluate` needs once the input is known to be good: the config read once, into
    checked values; the stages read these, and nothing below them sees the Hydra config."""

    resolved: dict[str, Any]
    ks: list[int]
    metrics: list[str]
    objective: str
    run_name: str | None
    timeout_s: float | None
    allow_skipped: bool
    fixture: Fixture
    ranker: Any
    warnings: tuple[str, ...] = ()
    split: Any = None  # evalpipe.inputs.split.SplitSettings
    #: the config as written (`${oc.env:...}` unresolved): what the saved config.yaml masks from
    raw: dict[str, Any] = field(default_factory=dict)
    progress: bool = True
    batch: str = "auto"  # auto | true | false
    latency_sample: int = 100


def missing_values(node: Any, prefix: str = "") -> list[str]:
    """Dotted keys still set to `???` (a value the user must give)."""
    out: list[str] = []
    if isinstance(node, DictConfig):
        for key in node:
            if OmegaConf.is_missing(node, key):
                out.append(f"{prefix}{key}")
            else:
                out += missing_values(node._get_node(key), f"{prefix}{key}.")
    return out


def check_ks(raw: Any) -> list[int]:
    example = "e.g. ks=[1,5,20]"
    if not isinstance(raw, list | tuple):
        hint = f"ks=[{raw}]" if isinstance(raw, int) and not isinstance(raw, bool) else example
        raise ConfigError(f"ks must be a list of positive integers, got {raw!r} ({hint})")
    if not raw:
        raise ConfigError(f"ks is empty: give at least one cutoff, {example}")
    for k in raw:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigError(f"ks must hold positive integers, got {k!r} in {list(raw)!r} ({example})")
        if k > MAX_K:
            raise ConfigError(f"ks: cutoff {k} is larger than the maximum {MAX_K}")
    repeated = sorted({k for k in raw if list(raw).count(k) > 1})
    if repeated:
        once = ",".join(str(k) for k in sorted(set(raw)))
        raise ConfigError(
            f"ks lists {', '.join(map(str, repeated))} more than once in {list(raw)!r}: "
            f"give each cutoff once (ks=[{once}])"
        )
    return sorted(set(raw))


def check_metrics(raw: Any) -> list[str]:
    # lazy: evalpipe.scoring.metrics, ~3 ms
    from evalpipe.scoring.metrics import FAMILIES

    choices = ", ".join(FAMILIES)
    if isinstance(raw, str):
        raise ConfigError(f"metrics must be a list, got {raw!r} (write metrics=[{raw}]; families: {choices})")
    if not isinstance(raw, list | tuple):
        raise ConfigError(f"metrics must be a list of metric families, got {raw!r} (choose from {choices})")
    if not raw:
        raise ConfigError(f"metrics is empty: a run must measure something (choose from {choices})")
    unknown = [m for m in raw if m not in FAMILIES]
    if unknown:
        raise ConfigError(f"unknown metric family {unknown[0]!r} in metrics; choose from {choices}")
    return list(dict.fromkeys(raw))


def check_switches(resolved: Mapping[str, Any]) -> None:
    for key in SWITCHES:
        node: Any = resolved
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None and not isinstance(node, bool):
            raise ConfigError(f"{key} must be true or false, got {node!r} (e.g. {key}=true)")


def check_plots(raw: Any) -> None:
    # lazy: evalpipe.reporting.plots, ~2 ms
    from evalpipe.reporting.plots import plot_mode

    try:
        plot_mode(raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def check_timeout(raw: Any) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw > 0 or raw == float("inf"):
        raise ConfigError(f"timeout_s must be a positive number of seconds or null (off), got {raw!r}")
    return float(raw)


def check_token_encoding(raw: Any) -> None:
    """A misspelt encoding is bad input; tiktoken failing to load one it knows is not (chars/4 then)."""
    if not isinstance(raw, str) or not raw:
        raise ConfigError(f"token_encoding must be a tiktoken encoding name such as cl100k_base, got {raw!r}")
    try:
        # lazy: tiktoken, ~10 ms (in a try)
        import tiktoken

        names = tiktoken.list_encoding_names()
    except Exception:  # no tiktoken: tokens are estimated, whatever the name
        return
    if raw not in names:
        raise ConfigError(f"unknown token_encoding {raw!r}; choose from {', '.join(names)}")


def check_run_name(raw: Any) -> str | None:
    """A run name as text: `run_name=2024` is the name "2024"; a list or mapping is refused."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, str | int | float) and not isinstance(raw, bool):
        return str(raw)
    raise ConfigError(f"run_name must be text, got {raw!r} (quote it: run_name='\"my run\"')")


def produced_metric_names(
    fixture: Fixture, ks: Sequence[int], families: Sequence[str], judged: bool = False
) -> set[str]:
    """Every figure a run of this fixture with these ks/metrics logs: scored on one empty result
    per tier (and per kind of RAG label), so the names come from the scoring code itself.
    `judged`: a judge is configured, so its judged_* figures are produced too."""
    # lazy: evalpipe.scoring.run, ~8 ms
    from evalpipe.scoring.run import flat_metrics, score_results

    class _Nothing:
        def search(self, query: str, k: int, constraints: Any = None) -> list[Any]:
            return []

    sample: dict[tuple[str, bool], Case] = {}
    for case in fixture.cases:
        sample.setdefault((case.tier, case.has_rag_labels), case)
    results = [run_case(_Nothing(), c, max(ks), None, len) for c in sample.values()]
    # lazy: evalpipe.scoring.names, ~2 ms
    from evalpipe.scoring.names import metric_name

    scores = score_results(results, ks, families, tiers=fixture.tiers)
    names = set(flat_metrics(scores)) | set(RUN_FIGURES)
    if judged:
        # lazy: evalpipe.judge.judged_metrics, ~4 ms
        from evalpipe.judge.judged_metrics import figure_names

        names |= figure_names(results, ks, fixture.tiers)  # judged_* and, below full coverage, partial_*
    return {metric_name(n) for n in names}  # as logged: `ir/map_at_5` (check_objective accepts bare names)


def check_objective(raw: Any, produced: set[str], strict: bool) -> str:
    """The objective must be a figure the run produces (else a sweeper optimises a constant 0.0).

    Only enforced when it matters (`strict`: given explicitly, or a sweep); a single run with
    the default objective and other ks simply has no objective value.
    """
    # lazy: evalpipe.scoring.names, ~2 ms
    from evalpipe.scoring.names import metric_name

    objective = str(raw) if raw is not None else DEFAULT_OBJECTIVE
    known = objective in produced or metric_name(objective) in produced  # bare or as logged
    if strict and not known and not objective.startswith(FIGURE_PREFIXES):
        overall = sorted(n for n in produced if not n.startswith("tier/"))
        raise ConfigError(
            f"objective={objective} is not a figure this run produces with these ks and metrics; "
            f"choose one of: {', '.join(overall)} (bare names such as map_at_5 work too; "
            "or tier/<tier>/<name>)"
        )
    return objective


def _nested(ranker: Any) -> Iterator[Any]:
    """The ranker and the rankers it is built from (RRF components, a graph ranker's base)."""
    yield ranker
    for value in getattr(ranker, "_init_args", {}).values():
        for inner in value.values() if isinstance(value, Mapping) else [value]:
            if hasattr(inner, "search") or hasattr(inner, "search_case"):
                yield from _nested(inner)


def check_ranker_inputs(ranker: Any, fixture: Fixture) -> list[str]:
    """Rankers that replay input files (`check_cases`) parse them now and match them to the cases."""
    warnings: list[str] = []
    case_ids = [c.id for c in fixture.cases]
    for r in _nested(ranker):
        if hasattr(r, "check_cases"):
            warnings += r.check_cases(case_ids)
    return warnings


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def build(node: Any, what: str) -> Any:
    """hydra.utils.instantiate with errors as one line naming what could not be built and why."""
    # lazy: hydra, ~146 ms
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        return instantiate(node)
    except EvalpipeError:
        raise
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, EvalpipeError):
            raise cause from None
        raise ConfigError(f"cannot build the {what}: {_one_line(cause)}") from None
    except (ValueError, TypeError, ImportError, AttributeError, OSError) as exc:
        raise ConfigError(f"cannot build the {what}: {_one_line(exc)}") from None


def is_multirun() -> bool:
    try:
        # lazy: hydra, ~142 ms (in a try)
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        return HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:
        return False


def check(
    cfg: DictConfig,
    overrides: Sequence[str] = (),
    containers: tuple[dict[str, Any] | None, dict[str, Any]] | None = None,
    sweep: bool = False,
) -> Checked:
    """Validate config, fixture, corpus, ranker and replayed files; raise an EvalpipeError on the first
    problem. `overrides` (Hydra's task overrides) tell an explicitly given objective from the default.
    `containers`: the config already turned into (resolved, raw) plain containers by the caller
    (`safety.secrets.register_config`; resolved None if it could not resolve), so it is read once.
    `sweep`: a sweep point checked by its parent (`sweeps.points`), where the objective must exist
    as in every multirun job."""
    missing = missing_values(cfg)
    if missing:
        raise ConfigError(
            f"missing value for {', '.join(missing)}: give it on the command line, e.g. {missing[0]}=..."
        )
    resolved, raw = containers if containers is not None else (None, None)
    if resolved is None:
        try:
            resolved = OmegaConf.to_container(cfg, resolve=True)
        except Exception as exc:  # an interpolation that cannot resolve (e.g. ${oc.env:...} unset)
            raise ConfigError(f"cannot resolve the config: {_one_line(exc)}") from None
    if raw is None:
        raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(resolved, dict) and isinstance(raw, dict)
    ks = check_ks(resolved.get("ks"))
    families = check_metrics(resolved.get("metrics"))
    check_switches(resolved)
    run_name = check_run_name(resolved.get("run_name"))
    timeout_s = check_timeout(resolved.get("timeout_s"))
    check_token_encoding(resolved.get("token_encoding", "cl100k_base"))
    batch, latency_sample = parse_settings(resolved.get("batch", "auto"), resolved.get("latency_sample", 100))
    check_plots(resolved.get("plots", "recall"))
    if not isinstance(resolved.get("objective", DEFAULT_OBJECTIVE), str):
        raise ConfigError(f"objective must be a metric name, got {resolved.get('objective')!r}")

    # lazy: evalpipe.inputs, ~3 ms
    from evalpipe.inputs import fixture_memo, split

    apply_chunker_group(resolved)  # chunker=... reaches any documents fixture, or is refused
    settings = split.settings_from(resolved["fixture"])  # a bad split setting stops before any loading
    loader = split.without_split_keys(resolved["fixture"])
    fixture = fixture_memo.load_once(loader, lambda: build(OmegaConf.create(loader), "fixture"))
    if not isinstance(fixture, Fixture):
        raise ConfigError(f"fixture._target_ built a {type(fixture).__name__}, not a Fixture")
    fixture, split_warnings = split.apply(fixture, settings)  # the one place a split is applied
    ranker = build(cfg.ranker, "ranker")
    if not (callable(ranker) or hasattr(ranker, "search") or hasattr(ranker, "search_case")):
        raise ConfigError(
            f"ranker {type(ranker).__name__} has no search(query, k, constraints) method (docs/rankers.md)"
        )
    explicit = any(o.lstrip("+~").startswith("objective=") for o in overrides)
    judge = resolved.get("judge")
    judged = isinstance(judge, dict) and str(judge.get("backend") or "none") != "none"
    objective = check_objective(
        resolved.get("objective"),
        produced_metric_names(fixture, ks, families, judged),
        explicit or sweep or is_multirun(),
    )
    coverage = check_store_coverage(ranker, fixture.cases)  # a store's records vs the labels
    warnings = [*fixture.notes, *split_warnings, *check_ranker_inputs(ranker, fixture), *coverage]
    return Checked(
        resolved=resolved,
        ks=ks,
        metrics=families,
        objective=objective,
        run_name=run_name,
        timeout_s=timeout_s,
        allow_skipped=bool(resolved.get("allow_skipped", False)),
        fixture=fixture,
        ranker=ranker,
        warnings=tuple(warnings),
        split=settings,
        raw=raw,
        progress=bool(resolved.get("progress", True)),
        batch=batch,
        latency_sample=latency_sample,
    )


def check_sweep(cfg: DictConfig, swept: Sequence[str] = ()) -> None:
    """What a sweep's parent can check before it opens the store or creates its run: the switches,
    ks, metrics and (when the fixture is not swept and builds) the objective. Each job still runs
    `check` on its own config; this only keeps bad input from leaving a parent run behind."""
    with_hydra = cfg.get("hydra")
    if with_hydra is not None and with_hydra.get("sweep") is not None:
        check_output_dir(str(with_hydra.sweep.dir))
    sweeper = with_hydra.get("sweeper") if with_hydra is not None else None
    if sweeper is not None and "storage" in sweeper:
        check_optuna_storage(sweeper.get("storage"))
    body = {k: v for k, v in cfg.items() if k != "hydra"}
    try:
        resolved = OmegaConf.to_container(OmegaConf.create(body), resolve=True)
    except Exception:  # e.g. a swept key left ??? in the base config: the jobs say so, one each
        return
    assert isinstance(resolved, dict)
    check_switches(resolved)
    ks = check_ks(resolved.get("ks"))
    families = check_metrics(resolved.get("metrics"))
    if any(k == "fixture" or k.startswith("fixture.") for k in swept):
        return
    # lazy: evalpipe.inputs, ~3 ms
    from evalpipe.inputs import fixture_memo, split

    try:
        apply_chunker_group(resolved)
        loader = split.without_split_keys(resolved["fixture"])
        fixture = fixture_memo.load_once(loader, lambda: build(OmegaConf.create(loader), "fixture"))
    except EvalpipeError:
        return  # the jobs report a bad fixture, one line each, before their first case
    judge = resolved.get("judge")
    judged = isinstance(judge, dict) and str(judge.get("backend") or "none") != "none"
    check_objective(resolved.get("objective"), produced_metric_names(fixture, ks, families, judged), True)


def check_optuna_storage(raw: Any) -> None:
    """Optuna's `storage` is null (in memory) or a database URL; a bare path would fail in the
    sweeper after the parent run was created."""
    if raw is None or raw == "":
        return
    text = str(raw)
    scheme, sep, rest = text.partition("://")
    if not sep or not scheme:
        raise ConfigError(
            f"hydra.sweeper.storage={text!r} is a path, not a database URL: write "
            f"hydra.sweeper.storage=sqlite:///{text} (relative) or sqlite:////abs/path/optuna.db, or null"
        )
    if scheme == "sqlite" and (not rest.startswith("/") or rest in ("/", "")):
        raise ConfigError(
            f"hydra.sweeper.storage={text!r} is not an SQLite URL Optuna can open: write three slashes "
            "and a file, e.g. sqlite:///optuna.db or sqlite:////abs/path/optuna.db"
        )


def check_sweep_dir(path: str) -> None:
    """A sweep into a folder holding saved runs not yet in a tracking store (an offline sweep's
    jobs, a failed upload) would overwrite them job by job: refused before the parent run exists,
    naming the first such run and `hydra.sweep.dir`."""
    # lazy: evalpipe.reporting.local, ~4 ms
    from evalpipe.reporting.local import find_saved_runs, unsynced

    folder = Path(path)
    if not folder.is_dir():
        return
    for saved in find_saved_runs([folder]):
        why = unsynced(saved, "hydra.sweep.dir")
        if why:
            raise ConfigError(why)


def check_output_dir(path: str) -> None:
    """A sweep's folder must be creatable and writable before the sweep records anything."""

    # lazy: evalpipe.safety.hydra_errors, ~5 ms
    from evalpipe.safety.hydra_errors import os_error_line

    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        probe = Path(path) / ".evalpipe-write-check"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        if exc.filename is None:
            exc.filename = path
        raise ConfigError(os_error_line(exc)) from None
    if not os.access(path, os.W_OK):
        raise ConfigError(f"cannot write the sweep's folder {path!r}: choose a writable hydra.sweep.dir=...")
