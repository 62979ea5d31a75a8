"""The one error-line helper (evalpipe.safety.errors): the line's shape, its masking, the exit.

Every "evalpipe: error:" line is printed through it; the test below also checks that no module
under src/ writes that prefix by hand any more, so a new one cannot bypass the masking.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalpipe.safety import secrets
from evalpipe.safety.errors import MASK, error_line, fail, print_error

SRC = Path(__file__).resolve().parents[1] / "src"


def test_the_line_names_the_program_and_masks_credentials() -> None:
    assert error_line("no saved run in out/") == "evalpipe: error: no saved run in out/"
    assert error_line("bad", prog="evalpipe compare") == "evalpipe compare: error: bad"
    line = error_line("cannot reach http://bob:hunter2@db:5432/x with api_key=abc123 set")
    assert line == f"evalpipe: error: cannot reach http://{MASK}@db:5432/x with api_key={MASK} set"


def test_secret_values_from_the_command_line_are_masked_wherever_they_appear() -> None:
    argv = ["ranker=bm25", "+ranker.api_key=s3cr3tvalue", "fixture=gold"]
    line = error_line("Could not override 'ranker.api_key'. s3cr3tvalue is not a key", argv=argv)
    assert "s3cr3tvalue" not in line
    assert line == f"evalpipe: error: Could not override 'ranker.api_key'. {MASK} is not a key"
    assert error_line("bm25 is fine", argv=argv) == "evalpipe: error: bm25 is fine"  # not a secret key


def test_registered_secrets_are_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_registered", {"tok-9f8e7d"})
    assert error_line("judge refused tok-9f8e7d") == f"evalpipe: error: judge refused {MASK}"


def test_print_error_writes_one_line_and_its_continuations_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_error("first user:pw@", more=["second http://u:p@h/", "third"])
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "evalpipe: error: first user:pw@",
        f"evalpipe: second http://{MASK}@h/",
        "evalpipe: third",
    ]


def test_fail_exits_with_the_code_and_no_chained_cause(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        try:
            raise ValueError("inner")
        except ValueError as exc:
            fail(exc)
    assert raised.value.code == 2
    assert raised.value.__suppress_context__
    assert capsys.readouterr().err == "evalpipe: error: inner\n"
    with pytest.raises(SystemExit) as raised:
        fail("suite s: fixture f did not finish", 1)
    assert raised.value.code == 1


def test_no_module_prints_the_error_prefix_by_hand() -> None:
    by_hand = re.compile(r"""["'](?:\{[A-Z_]+\}|evalpipe[ \w-]*): error: """)
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "errors.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if by_hand.search(line)
    ]
    assert offenders == []
