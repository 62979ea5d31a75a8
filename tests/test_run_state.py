"""RunState's fields carry real types (no `Any`), and every one of them names a class that exists.

The types sit under `if TYPE_CHECKING` (importing the judge, MLflow's tracker or rich for an
annotation would cost start-up time), so they are resolved here the way a type checker would:
the guarded imports run in the module's namespace and every annotation is evaluated.
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path
from typing import Any

from evalpipe.evaluation import state


def resolved_hints() -> dict[str, Any]:
    namespace = dict(vars(state))
    tree = ast.parse(Path(state.__file__).read_text(encoding="utf-8"))
    guarded = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]
    assert guarded, "state.py has no TYPE_CHECKING block"
    for block in guarded:
        exec(compile(ast.Module(body=block.body, type_ignores=[]), state.__file__, "exec"), namespace)
    hints = typing.get_type_hints(state.RunState, globalns=namespace)
    for prop in ("fixture", "tracker"):  # properties: their return types
        hints[prop] = typing.get_type_hints(getattr(state.RunState, prop).fget, globalns=namespace)["return"]
    return hints


def test_no_field_is_typed_any() -> None:
    hints = resolved_hints()
    untyped = [name for name, hint in hints.items() if hint is Any or Any in typing.get_args(hint)]
    assert untyped == []
    from evalpipe.judge.asking import Judge
    from evalpipe.tracking.mlflow_store import Tracker
    from evalpipe.tracking.run_store import RunStore

    assert hints["judge"] == Judge | None
    assert hints["store"] == RunStore | None
    assert hints["tracker"] == Tracker | None
    assert hints["fixture"].__name__ == "Fixture"
