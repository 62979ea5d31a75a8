"""Missing expected IDs: every affected case in one message, with nearest IDs and unit kinds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalpipe.inputs.fixture import load_fixture
from evalpipe.safety.errors import FixtureError

UNITS = [
    {"id": "cmd/root.go", "kind": "module", "path": "cmd/root.go", "language": "go"},
    {"id": "cmd/root.go::Execute", "kind": "function", "path": "cmd/root.go", "language": "go"},
    {"id": "cmd/root.go::Root.Run", "kind": "method", "path": "cmd/root.go", "language": "go"},
    {"id": "pkg/a.py::merge_settings", "kind": "function", "path": "pkg/a.py", "language": "python"},
]

CASES = """\
name: t
corpus: corpus.jsonl
cases:
  - id: ok
    query: Execute
    expected: [cmd/root.go::Execute]
  - id: var-case
    query: initCmd
    expected: [cmd/root.go::initCmd, cmd/root.go::Execute]
  - id: typo
    query: run
    expected: [cmd/root.go::Root.Runn, pkg/a.py::merge_setting]
"""


def test_every_missing_id_is_listed_with_nearest_ids_and_unit_kinds(tmp_path: Path) -> None:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in UNITS), encoding="utf-8")
    path = tmp_path / "fx.yaml"
    path.write_text(CASES, encoding="utf-8")
    with pytest.raises(FixtureError) as info:
        load_fixture(path)
    message = str(info.value)
    assert "\n" not in message  # one line, like every input error
    head, _, rest = message.partition(": 3 in 2 case(s): ")
    assert head.startswith(f"{path}: expected ID(s) not in corpus ")
    parts = rest.split("; ")
    # case lines: var-case at line 7, typo at line 10 (1-based, the `- id:` line)
    assert parts[0].startswith("line 7, case 'var-case': cmd/root.go::initCmd (nearest: ")
    assert "cmd/root.go::Execute" in parts[0]
    # the closest ID comes first
    assert parts[1].startswith("line 10, case 'typo': cmd/root.go::Root.Runn (nearest: cmd/root.go::Root.Run")
    assert parts[2] == "line 10, case 'typo': pkg/a.py::merge_setting (nearest: pkg/a.py::merge_settings)"
    assert parts[3] == "go unit kinds the corpus builder produced: function, method, module"
    assert parts[4] == "python unit kinds the corpus builder produced: function"
    assert "python -m evalpipe.corpus" in parts[5]
