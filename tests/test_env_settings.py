"""Issue #39, category 4: one reader for environment settings (`evalpipe.safety.env_settings`).

Every declared variable gets values that are not numbers, out of range or not a switch: each is
one line naming the variable, the value and the allowed range, exit 2, before any command reads
anything. Good values reach the code that uses them (a file limit refuses a file just over it, a
YAML depth limit refuses one level more). The docs table is the declarations' own rendering, and
no module reads an EVALPIPE_* variable past the reader.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evalpipe.__main__ as entry
from cli_helpers import cli_env
from conftest import ROOT
from evalpipe.core import files
from evalpipe.inputs import strict_yaml
from evalpipe.safety import env_settings
from evalpipe.safety.env_settings import BY_NAME, INTERNAL, SETTINGS, EnvSettingError, markdown_table, value
from evalpipe.safety.errors import EvalpipeError
from evalpipe.tracking import store_check

NUMBERS = [s for s in SETTINGS if s.kind in ("number", "integer")]
BAD_NUMBERS = ["abc", "-1", "nan", "inf", "1e999", "10 MB", "0x10", "1,5"]


def run_entry(monkeypatch, capsys, argv: list[str]) -> tuple[int, list[str]]:
    """`evalpipe <argv>` in this process, up to its exit (`_main`: `main` would end the process)."""
    monkeypatch.setattr(sys, "argv", ["evalpipe", *argv])
    with pytest.raises(SystemExit) as info:
        entry._main()
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    return int(info.value.code or 0), err


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize("setting", NUMBERS, ids=[s.name for s in NUMBERS])
def test_a_bad_number_is_one_line_naming_the_variable_value_and_range(monkeypatch, capsys, setting, bad):
    monkeypatch.setenv(setting.name, bad)
    code, err = run_entry(monkeypatch, capsys, ["sync", "--help"])
    assert code == 2
    assert len(err) == 1, err
    assert err[0].startswith(f"evalpipe: error: environment variable {setting.name}={bad!r} is not ")
    assert f"from {env_settings._plain(setting.low)} to {env_settings._plain(setting.high)}" in err[0]


def test_limits_below_their_range_are_refused_and_the_ends_are_taken():
    for s in NUMBERS:
        below = s.low - (1 if s.kind == "integer" else s.low / 2 or 1)
        with pytest.raises(EnvSettingError, match=re.escape(s.name)):
            value(s.name, {s.name: repr(below)})
        with pytest.raises(EnvSettingError, match=re.escape(s.name)):
            value(s.name, {s.name: repr(s.high * 2)})
        assert value(s.name, {s.name: env_settings._plain(s.high)}) == s.high
        assert value(s.name, {s.name: str(s.low)}) == s.low
        assert value(s.name, {s.name: "  "}) == s.default  # empty: the default
        assert value(s.name, {}) == s.default
    with pytest.raises(EnvSettingError, match="not an integer from 1 to 300"):
        value("EVALPIPE_MAX_YAML_DEPTH", {"EVALPIPE_MAX_YAML_DEPTH": "2.5"})
    assert value("EVALPIPE_MAX_YAML_DEPTH", {"EVALPIPE_MAX_YAML_DEPTH": "7.0"}) == 7


@pytest.mark.parametrize("bad", ["maybe", "2", "enabled", "nein"])
def test_a_switch_takes_only_switch_words(monkeypatch, capsys, bad):
    monkeypatch.setenv("EVALPIPE_UPLOAD_WORKER", bad)
    code, err = run_entry(monkeypatch, capsys, ["compare", "--help"])
    assert code == 2 and len(err) == 1
    assert f"EVALPIPE_UPLOAD_WORKER={bad!r} is not 1/true/yes/on or 0/false/no/off" in err[0]
    for word, meaning in [("OFF", False), ("no", False), ("0", False), ("Yes", True), ("on", True)]:
        assert value("EVALPIPE_UPLOAD_WORKER", {"EVALPIPE_UPLOAD_WORKER": word}) is meaning


def test_words_are_any_comma_separated_text():
    name = "EVALPIPE_SECRET_KEYS"
    assert value(name, {name: " tenant, sig ,,"}) == "tenant,sig"


def test_good_values_reach_the_code_that_uses_them(monkeypatch, tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("x" * 2000, encoding="utf-8")
    monkeypatch.setenv("EVALPIPE_MAX_FILE_MB", repr(1000 / 2**20))
    assert files.max_file_bytes() == 1000
    with pytest.raises(EvalpipeError, match="larger than the limit of 1000 bytes"):
        files.read_text(big)
    monkeypatch.setenv("EVALPIPE_MAX_FILE_MB", "1")
    assert files.read_text(big) == "x" * 2000
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: [[[1]]]\n", encoding="utf-8")  # mapping, list, list, list, the scalar: 5 nodes
    monkeypatch.setenv("EVALPIPE_MAX_YAML_DEPTH", "5")
    assert strict_yaml.load_file(deep)[0] == {"a": [[[1]]]}
    monkeypatch.setenv("EVALPIPE_MAX_YAML_DEPTH", "4")
    with pytest.raises(EvalpipeError, match="nested more than 4 levels deep"):
        strict_yaml.load_file(deep)
    monkeypatch.setenv("EVALPIPE_STORE_LOCK_WAIT_S", "0.5")
    assert store_check.lock_wait_s() == 0.5
    monkeypatch.setenv("EVALPIPE_STORE_LOCK_WAIT_S", "-3")
    with pytest.raises(EnvSettingError, match="EVALPIPE_STORE_LOCK_WAIT_S='-3'"):
        store_check.lock_wait_s()


def test_a_real_process_with_a_bad_limit_exits_2_without_a_traceback(tmp_path):
    # before: `int(os.environ[...])` at import, a 50-line traceback
    env = cli_env(EVALPIPE_MAX_YAML_DEPTH="deep")
    proc = subprocess.run(
        [sys.executable, "-m", "evalpipe", "fixture.path=nowhere.yaml"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == [
        "evalpipe: error: environment variable EVALPIPE_MAX_YAML_DEPTH='deep' is not an integer from 1 "
        "to 300 levels (default 100 levels): fix it or unset it (unset EVALPIPE_MAX_YAML_DEPTH)"
    ]


def test_the_docs_table_is_the_declarations():
    text = (ROOT / "docs" / "failures.md").read_text(encoding="utf-8")
    block = text.split("<!-- env-settings:start -->")[1].split("<!-- env-settings:end -->")[0]
    assert [ln for ln in block.strip().splitlines()] == markdown_table()


def test_no_module_reads_an_evalpipe_variable_past_the_reader():
    """Every EVALPIPE_* name in src/ is declared (a setting or set by evalpipe for its children),
    and only env_settings and the modules handling the internal links call os.environ with one."""
    src = ROOT / "src"
    declared = set(BY_NAME) | set(INTERNAL)
    for path in src.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for name in set(re.findall(r"EVALPIPE_[A-Z0-9_]+", text)):
            assert name in declared or name == "EVALPIPE_", (path, name)
        for name in BY_NAME:
            if name == "EVALPIPE_SECRET_KEYS" and path.name == "secrets.py":
                continue  # read by safety.secrets itself (below the reader), any text valid
            pattern = rf"environ(\.get)?[(\[]\s*[\"']{name}"
            assert not re.search(pattern, text), (path, name)


def test_each_setting_says_what_it_does():
    for s in SETTINGS:
        assert s.what and s.kind in ("number", "integer", "switch", "words")
        if s.kind in ("number", "integer"):
            assert s.low is not None and s.high is not None and s.low <= float(s.default) <= s.high


@settings(max_examples=200, derandomize=True, deadline=None)
@given(raw=st.one_of(st.text(max_size=30), st.floats(allow_nan=True).map(repr), st.integers().map(str)))
def test_fuzzed_values_are_a_checked_value_or_one_line_naming_the_variable(raw):
    """Property over every setting: any text is either the default (blank), a value of the right
    type inside the stated range, or an EnvSettingError of one line naming the variable."""
    for s in SETTINGS:
        try:
            got = value(s.name, {s.name: raw})
        except EnvSettingError as exc:
            line = str(exc)
            assert "\n" not in line and line.startswith(f"environment variable {s.name}=")
            continue
        if not raw.strip():
            assert got == s.default
        elif s.kind == "integer":
            assert isinstance(got, int) and s.low <= got <= s.high
        elif s.kind == "number":
            assert isinstance(got, float) and s.low <= got <= s.high
        elif s.kind == "switch":
            assert isinstance(got, bool)
        else:
            assert isinstance(got, str) and all(w == w.strip() and w for w in got.split(",") if got)
