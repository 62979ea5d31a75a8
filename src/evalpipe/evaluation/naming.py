"""Run names from the ranker choice and overrides: `bm25 k1=0.9 b=0.4`, `graph(base=bm25f) seeds=5`.

Optuna suggests values such as 1.5073897086401147; as a run name that is noise, and the
exact value stays in the run's params. Only the name is rounded.

A nested component chosen on the command line (`ranker=graph ranker@ranker.base=bm25f`) is
not a `ranker.*` override, and the run used to be named plain `graph` like the shipped
configuration; the name now carries every component that differs from its config's default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{5,}(?:[eE][-+]?\d+)?(?![\w.])")


def round_floats(text: str, digits: int = 4) -> str:
    """Every float literal with more than 4 decimals, written with `digits` significant digits."""
    return FLOAT.sub(lambda m: f"{float(m.group(0)):.{digits}g}", text)


#: An absolute path as a value: POSIX, home-relative, or a Windows drive.
ABSOLUTE = re.compile(r"^(?:/|~|[A-Za-z]:[\\/])")


def short_value(value: str) -> str:
    """An absolute path as its last component (`/home/ann/stores/docs_db` -> `docs_db`).

    The run name is a label (tables, `compare`, the tag of every run.trec line): the absolute
    path of a user's store is long, says whose home it is, and differs between machines for the
    same store. The full value stays in the run's params and config.yaml, which identify the store."""
    bare = value.strip().strip("'\"")
    if not ABSOLUTE.match(bare):
        return value
    name = re.split(r"[\\/]", bare.rstrip("/\\"))[-1]
    return name or value


def point_name(ranker_choice: str, overrides: list[str]) -> str:
    """The ranker's config name followed by the `ranker.*` overrides without the `ranker.` prefix
    (an absolute path given as a value shown by its last component, `short_value`)."""
    swept = []
    for o in overrides:
        if o.startswith("ranker."):
            key, eq, value = o.split("ranker.", 1)[1].partition("=")
            swept.append(f"{key}{eq}{short_value(value)}" if eq else key)
    return round_floats(" ".join([ranker_choice, *swept]))


#: A defaults-list entry that places another ranker config inside this one (`/ranker@base: bm25`).
NESTED = re.compile(r"^(?:override\s+)?/?ranker@(?P<package>[\w.]+)$")


def _nested_defaults(conf_dir: Path, option: str) -> dict[str, str | None]:
    """`{package relative to the option: default option}` from `conf/ranker/<option>.yaml`'s defaults."""
    # lazy: yaml, ~19 ms
    import yaml

    path = conf_dir / "ranker" / f"{option}.yaml"
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    out: dict[str, str | None] = {}
    for entry in doc.get("defaults") or [] if isinstance(doc, dict) else []:
        if isinstance(entry, dict):
            for key, value in entry.items():
                m = NESTED.match(str(key))
                if m:
                    out[m.group("package")] = None if value is None else str(value)
    return out


def component_choices(choices: Mapping[str, Any], conf_dir: Path) -> list[str]:
    """The nested ranker components chosen otherwise than their config's default, as
    `base=bm25f` or `base.components.semantic=bm25` (Hydra's runtime choices, e.g.
    `{"ranker": "graph", "ranker@ranker.base": "bm25f"}`); an added component counts too."""
    seen: set[str] = set()
    out: list[str] = []

    def walk(option: str, package: str) -> None:
        for rel, default in _nested_defaults(conf_dir, option).items():
            key = f"ranker@{package}.{rel}"
            seen.add(key)
            chosen = choices.get(key, default)
            chosen = None if chosen is None else str(chosen)
            if chosen != default:
                out.append(f"{key[len('ranker@ranker.') :]}={chosen}")
            if chosen:
                walk(chosen, f"{package}.{rel}")

    root = choices.get("ranker")
    if root:
        walk(str(root), "ranker")
    for key, value in choices.items():
        if str(key).startswith("ranker@ranker.") and key not in seen and value is not None:
            out.append(f"{str(key)[len('ranker@ranker.') :]}={value}")
    return out


def qualified_choice(choices: Mapping[str, Any], conf_dir: Path) -> str:
    """`graph` for the config as shipped, `graph(base=bm25f)` when a nested component was swapped:
    run names, the `ranker` param and `compare --baseline` then tell the two apart."""
    root = str(choices.get("ranker") or "")
    parts = component_choices(choices, conf_dir)
    return f"{root}({', '.join(parts)})" if parts and root else root
