"""The layer contracts of src/evalpipe (pyproject.toml `[tool.importlinter]`, docs/architecture.md).

`lint-imports` (import-linter over grimp, which sees imports inside functions too) must pass on
the tree as it is, and must fail on a copy of the tree with one upward import, one cycle or one
command module imported from below planted in it: a contract that cannot fail checks nothing.
Each check is one `lint-imports --no-cache` process (well under a second: nothing is imported).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def lint_imports(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` with the repository's contracts, over the `evalpipe` package under `src`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, "-c", LINT, str(ROOT / "pyproject.toml"), "--no-cache", "--no-logo"]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of src/evalpipe to plant imports in (the repository's own tree is never touched)."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "evalpipe", src / "evalpipe", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def plant(src: Path, module: str, line: str) -> None:
    """Append a function holding `line` (a lazy import: grimp must see it) to `module`."""
    path = src.joinpath(*module.split(".")).with_suffix(".py")
    assert path.is_file(), path
    path.write_text(path.read_text() + f"\n\ndef _planted() -> None:\n    {line}\n")


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    done = lint_imports(ROOT / "src", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout
    assert not list(tmp_path.iterdir())  # --no-cache: nothing written


def test_the_copy_is_what_is_checked(tree: Path, tmp_path: Path) -> None:
    # The planted checks below mean something only if the copy, not the installed tree, is read.
    done = lint_imports(tree, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_upward_import_fails(tree: Path, tmp_path: Path) -> None:
    # The ground floor reaching up to the evaluation stages, from inside a function.
    plant(tree, "evalpipe.core.hit", "from evalpipe.evaluation import stages  # noqa: F401")
    done = lint_imports(tree, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "one-way layers: a layer imports only the layers below it BROKEN" in done.stdout
    assert "evalpipe.core is not allowed to import evalpipe.evaluation" in done.stdout
    assert "evalpipe.core.hit -> evalpipe.evaluation.stages" in done.stdout


def test_a_cycle_fails(tree: Path, tmp_path: Path) -> None:
    # core.unit imports core.testpaths; the planted import closes the loop inside one layer.
    plant(tree, "evalpipe.core.testpaths", "from evalpipe.core import unit  # noqa: F401")
    done = lint_imports(tree, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no cycles between the parts of any package BROKEN" in done.stdout
    assert "one-way layers: a layer imports only the layers below it KEPT" in done.stdout
    assert "No cycles are allowed in evalpipe.core." in done.stdout
    assert ".unit -> .testpaths" in done.stdout  # the edge it would cut to break the planted loop


def test_a_command_imported_from_below_fails(tree: Path, tmp_path: Path) -> None:
    # `evalpipe merge-judgements` lives in judge/ but is a command: judge's own modules must not use it.
    plant(tree, "evalpipe.judge.run", "from evalpipe.judge import merge  # noqa: F401")
    done = lint_imports(tree, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "commands inside lower packages are entered from the entry only BROKEN" in done.stdout
    assert "evalpipe.judge.run -> evalpipe.judge.merge" in done.stdout
