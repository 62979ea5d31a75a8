"""Every import inside a function in src/ says what start-up cost it saves (`# lazy: ...`).

An import inside a function hides a dependency from whoever reads the top of the file (every
import cycle we had closed through one), so it is kept only where it keeps a measured cost out
of start-up, and says so; one that saves nothing belongs at the top. The costs come from
`python scripts/lazy_imports.py` (each import timed alone once its module is loaded).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("lazy_imports", ROOT / "scripts" / "lazy_imports.py")
assert _spec is not None and _spec.loader is not None
lazy_imports = importlib.util.module_from_spec(_spec)
sys.modules["lazy_imports"] = lazy_imports  # its dataclass looks its module up
_spec.loader.exec_module(lazy_imports)


def test_every_import_inside_a_function_names_what_it_saves() -> None:
    found = lazy_imports.collect(measured=False)
    assert len(found) > 50  # the finder sees them (src/ has many, e.g. MLflow's)
    bare = [f"{f.path}:{f.line} {f.statement}" for f in found if not f.comment]
    assert bare == []


def test_the_finder_reads_a_comment_on_the_line_or_above_the_block(tmp_path: Path) -> None:
    source = (
        "import os\n\n\n"
        "def f():\n"
        "    # lazy: mlflow, ~700 ms\n"
        "    import mlflow\n"
        "    from mlflow import entities\n\n"
        "    from evalpipe import paths\n"
        "    x = 1\n"
        "    import json\n"
        "    return os, mlflow, entities, paths, x, json\n\n\n"
        "def g():\n"
        "    import rich  # lazy: rich, ~30 ms\n"
        "    return rich\n"
    )
    found = [(f.statement, f.comment) for f in _find(source, tmp_path)]
    assert found == [
        ("import mlflow", "mlflow, ~700 ms"),
        ("from mlflow import entities", "mlflow, ~700 ms"),
        ("from evalpipe import paths", "mlflow, ~700 ms"),  # blank lines between groups: one block
        ("import json", ""),  # any other statement ends the block the comment covers
        ("import rich", "rich, ~30 ms"),
    ]


def _find(source: str, tmp_path: Path) -> list:
    real = tmp_path / "src" / "evalpipe" / "probe.py"
    real.parent.mkdir(parents=True)
    real.write_text(source, encoding="utf-8")
    saved = lazy_imports.ROOT
    lazy_imports.ROOT = tmp_path / "src"
    try:
        return lazy_imports.find(real)
    finally:
        lazy_imports.ROOT = saved
