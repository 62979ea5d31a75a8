"""Every reader of user or saved files, fuzzed (issue 32): valid files mutated by Hypothesis (truncated,
bytes flipped or inserted, nested thousands deep, a huge field, another encoding, CRLF, a line twice,
the path replaced by a directory or a FIFO). The property, for each: the reader returns, or raises
an EvalpipeError whose message is one line naming the file; never another exception (a traceback),
never a hang (Hypothesis' deadline per example).

The default run keeps each target to FUZZ_EXAMPLES examples (the whole file well under a minute);
`-m benchmark` runs test_long_fuzz_run with LONG_EXAMPLES per target. A few real `evalpipe sync`
processes on mutated saved runs check the same property end to end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli_helpers import cli, write_tiny
from conftest import TINY_UNITS
from evalpipe.safety.errors import EvalpipeError

FUZZ_EXAMPLES = int(os.environ.get("EVALPIPE_FUZZ_EXAMPLES", "40"))
LONG_EXAMPLES = 1500
PLUGIN = ["~ranker", "+ranker._target_=plugins_for_tests.keyword_search", "+ranker._partial_=true"]

# --- valid inputs, made once ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> dict[str, Path]:
    """A real offline run (fixture, corpus, saved run, run.trec), its exported baseline, a BEIR folder,
    a JSONL run, a judge cache and a small source tree."""
    root = tmp_path_factory.mktemp("valid")
    fx = write_tiny(root)
    out = root / "run"
    proc = cli(root, f"fixture.path={fx}", "tracking.offline=true", f"hydra.run.dir={out}", *PLUGIN)
    assert proc.returncode == 0, proc.stderr
    exported = cli(root, "baseline", "export", str(out), "-o", str(root / "baseline.json"))
    assert exported.returncode == 0, exported.stderr
    beir = root / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": u["id"], "title": u.get("title", ""), "text": u["text"]}) + "\n"
            for u in TINY_UNITS
        )
    )
    (beir / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "merge settings"})
        + "\n"
        + json.dumps({"_id": "q2", "text": "open"})
        + "\n"
    )
    (beir / "qrels" / "test.tsv").write_text(
        f"query-id\tcorpus-id\tscore\nq1\t{TINY_UNITS[0]['id']}\t1\nq2\t{TINY_UNITS[1]['id']}\t2\n"
    )
    (root / "run.jsonl").write_text(
        json.dumps({"qid": "c1", "hits": [{"id": TINY_UNITS[0]["id"], "score": 1.0}]})
        + "\n"
        + json.dumps({"qid": "c2", "hits": [{"id": TINY_UNITS[1]["id"], "score": 0.5, "rank": 1}]})
        + "\n"
    )
    from evalpipe.judge.cache import JudgementCache, Question
    from evalpipe.judge.verdict import Verdict

    cache = JudgementCache(root / "judge.sqlite")
    for i in range(3):
        q = Question("openai", "m", "http://x/v1", "v1", 200, f"query {i}", f"unit{i}", "t" * 64, "p" * 64)
        cache.put(q, Verdict(i % 2 == 0, f"reason {i}"), 10, 5)
    cache.close()
    src = root / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text(
        '"""A module."""\n\nimport os\n\n\nclass Session:\n    """Holds settings."""\n\n'
        "    def merge(self, other: dict) -> dict:\n        return {**self.__dict__, **other}\n\n\n"
        "def merge_settings(a, b=os.sep):\n    return a + b\n"
    )
    (src / "README.md").write_text("# Title\n\nSome words.\n\n## Install\n\npip install x\n")
    return {"root": root, "fixture": fx, "corpus": root / "corpus.jsonl", "run": out, "beir": beir}


# --- mutations --------------------------------------------------------------------------------------


@st.composite
def mutations(draw, data: bytes) -> bytes:
    """`data` after one to three mutations of the kinds real damage and real mistakes make."""
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(
            st.sampled_from(
                ["truncate", "flip", "insert", "nest", "huge", "encoding", "crlf", "dup_line", "delete_line"]
            )
        )
        pos = draw(st.integers(0, len(data)))
        if kind == "truncate":
            data = data[:pos]
        elif kind == "flip" and data:
            i = min(pos, len(data) - 1)
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
        elif kind == "insert":
            data = data[:pos] + draw(st.binary(min_size=1, max_size=12)) + data[pos:]
        elif kind == "nest":
            opener, closer = draw(
                st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b"- ", b""), (b"a: ", b"")])
            )
            n = draw(st.integers(50, 5000))
            data = data[:pos] + opener * n + b"1" + closer * n + data[pos:]
        elif kind == "huge":
            data = (
                data[:pos]
                + draw(st.sampled_from([b"x", b"\xc3\xa9", b" ", b"\\"])) * draw(st.integers(1000, 300_000))
                + data[pos:]
            )
        elif kind == "encoding":
            text = data.decode("utf-8", errors="replace")
            data = text.encode(
                draw(st.sampled_from(["utf-16", "latin-1", "utf-8-sig", "cp1252"])), errors="replace"
            )
        elif kind == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif kind in ("dup_line", "delete_line"):
            lines = data.splitlines(keepends=True)
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines[i : i + 1] = [lines[i], lines[i]] if kind == "dup_line" else []
                data = b"".join(lines)
    return data


def place(path: Path, data: bytes, odd: str) -> None:
    """Write the mutated file; `odd` replaces it by a directory or a FIFO instead."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    if odd == "dir":
        path.mkdir()
    elif odd == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(data)


ODD = st.sampled_from(["file"] * 18 + ["dir", "fifo"])


class Hang(Exception):
    """A reader still busy after HANG_S seconds (a FIFO opened, an exponential parse)."""


HANG_S = 30.0


def _hang(signum, frame):
    raise Hang(f"the reader did not return within {HANG_S:g} s")


def holds(call: Callable[[], object], where: Path) -> None:
    """The property: a result, or one line naming a file under `where`, within HANG_S seconds
    (an alarm interrupts a reader that blocks; Hypothesis' deadline only measures one that returns)."""
    previous = signal.signal(signal.SIGALRM, _hang)
    signal.setitimer(signal.ITIMER_REAL, HANG_S)
    try:
        call()
    except EvalpipeError as exc:
        message = str(exc)
        assert "\n" not in message, message
        assert str(where) in message, message
        assert "Traceback" not in message and "maximum recursion" not in message, message
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def scratch(valid: dict[str, Path], *names: str) -> Path:
    """A fresh copy of the valid files named (relative to the valid root) in a temp dir."""
    tmp = Path(tempfile.mkdtemp(prefix="fz", dir=valid["root"].parent))
    for name in names:
        src = valid["root"] / name
        if src.is_dir():
            shutil.copytree(src, tmp / name)
        else:
            shutil.copy2(src, tmp / name)
    return tmp


SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,  # wall time on a shared machine is noise; a hang is caught by `holds`' alarm
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
    derandomize=True,  # the same examples in CI every time; the long run explores
    database=None,
)

# --- the readers --------------------------------------------------------------------------------------


def fixture_target(valid, data: bytes, odd: str) -> None:
    from evalpipe.inputs.fixture import load_fixture

    tmp = scratch(valid, "fx.yaml", "corpus.jsonl")
    try:
        place(tmp / "fx.yaml", data, odd)
        holds(lambda: load_fixture(tmp / "fx.yaml"), tmp)
    finally:
        shutil.rmtree(tmp)


def corpus_target(valid, data: bytes, odd: str) -> None:
    from evalpipe.corpus.model import load_jsonl_corpus

    tmp = scratch(valid, "corpus.jsonl")
    try:
        place(tmp / "corpus.jsonl", data, odd)
        holds(lambda: load_jsonl_corpus(tmp / "corpus.jsonl"), tmp)
    finally:
        shutil.rmtree(tmp)


def beir_target(valid, which: str, data: bytes, odd: str) -> None:
    from evalpipe.inputs.beir import load_beir

    tmp = scratch(valid, "beir")
    try:
        place(tmp / "beir" / which, data, odd)
        holds(lambda: load_beir(tmp / "beir"), tmp)
    finally:
        shutil.rmtree(tmp)


def run_file_target(valid, name: str, data: bytes, odd: str) -> None:
    from evalpipe.inputs.trec import read_jsonl_run, read_trec_qrels, read_trec_run

    reader = {"run/run.trec": read_trec_run, "run.jsonl": read_jsonl_run, "qrels": read_trec_qrels}[name]
    tmp = scratch(valid, "run.jsonl", "run")
    path = tmp / ("beir-qrels.tsv" if name == "qrels" else name)
    try:
        place(path, data, odd)
        holds(lambda: reader(path), tmp)
    finally:
        shutil.rmtree(tmp)


def baseline_target(valid, data: bytes, odd: str) -> None:
    from evalpipe.gate.baseline_file import read_baseline

    tmp = scratch(valid, "baseline.json")
    try:
        place(tmp / "baseline.json", data, odd)
        holds(lambda: read_baseline(tmp / "baseline.json"), tmp)
    finally:
        shutil.rmtree(tmp)


def saved_run_target(valid, name: str, data: bytes, odd: str) -> None:
    from evalpipe.reporting.local import load_run

    tmp = scratch(valid, "run")
    try:
        place(tmp / "run" / name, data, odd)

        def read() -> None:
            saved = load_run(tmp / "run")
            saved.case_table()

        holds(read, tmp)
    finally:
        shutil.rmtree(tmp)


def judge_cache_target(valid, data: bytes, odd: str) -> None:
    from evalpipe.judge.cache import JudgementCache, Question

    tmp = scratch(valid, "judge.sqlite")
    try:
        place(tmp / "judge.sqlite", data, odd)

        def read() -> None:
            cache = JudgementCache(tmp / "judge.sqlite", timeout=0.5)
            try:
                cache.get(
                    Question("openai", "m", "http://x/v1", "v1", 200, "query 1", "unit1", "t" * 64, "p" * 64)
                )
                cache.holds("openai", "m", "http://x/v1", "v1")
            finally:
                cache.close()

        holds(read, tmp)
    finally:
        shutil.rmtree(tmp)


def builder_target(valid, name: str, data: bytes, odd: str) -> None:
    import warnings

    from evalpipe.corpus.build import build_corpus

    tmp = scratch(valid, "src")
    try:
        place(tmp / "src" / name, data, odd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # skipped files are warnings by design
            holds(lambda: build_corpus(tmp / "src", max_file_bytes=1024 * 1024), tmp)
    finally:
        shutil.rmtree(tmp)


def _bytes(valid, rel: str) -> bytes:
    return (valid["root"] / rel).read_bytes()


TARGETS: dict[str, Callable] = {}


def target(name: str):
    def register(fn):
        TARGETS[name] = fn
        return fn

    return register


@target("fixture_yaml")
def _fx(valid, draw):
    fixture_target(valid, draw(mutations(_bytes(valid, "fx.yaml"))), draw(ODD))


@target("corpus_jsonl")
def _corpus(valid, draw):
    corpus_target(valid, draw(mutations(_bytes(valid, "corpus.jsonl"))), draw(ODD))


@target("beir_folder")
def _beir(valid, draw):
    which = draw(st.sampled_from(["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"]))
    beir_target(valid, which, draw(mutations(_bytes(valid, f"beir/{which}"))), draw(ODD))


@target("trec_and_jsonl_runs")
def _runs(valid, draw):
    name = draw(st.sampled_from(["run/run.trec", "run.jsonl", "qrels"]))
    source = "beir/qrels/test.tsv" if name == "qrels" else name
    run_file_target(valid, name, draw(mutations(_bytes(valid, source))), draw(ODD))


@target("baseline_file")
def _baseline(valid, draw):
    baseline_target(valid, draw(mutations(_bytes(valid, "baseline.json"))), draw(ODD))


@target("sync_saved_run")
def _sync(valid, draw):
    name = draw(st.sampled_from(["run_info.json", "metrics.json", "params.json", "tags.json", "cases.jsonl"]))
    saved_run_target(valid, name, draw(mutations(_bytes(valid, f"run/{name}"))), draw(ODD))


@target("judge_cache")
def _judge(valid, draw):
    judge_cache_target(valid, draw(mutations(_bytes(valid, "judge.sqlite"))), draw(ODD))


@target("corpus_builder")
def _builder(valid, draw):
    name = draw(st.sampled_from(["pkg/mod.py", "README.md"]))
    builder_target(valid, name, draw(mutations(_bytes(valid, f"src/{name}"))), draw(ODD))


@pytest.mark.parametrize("name", list(TARGETS))
@SETTINGS
@given(data=st.data())
def test_reader_survives_mutated_input(valid, name, data):
    TARGETS[name](valid, data.draw)


@pytest.mark.benchmark
@pytest.mark.parametrize("name", list(TARGETS))
@settings(SETTINGS, max_examples=LONG_EXAMPLES, derandomize=False)
@given(data=st.data())
def test_long_fuzz_run(valid, name, data):
    TARGETS[name](valid, data.draw)


# --- end to end: real `evalpipe sync` processes on damaged saved runs -----------------------------


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("run_info.json", lambda b: b[: len(b) // 2]),
        ("metrics.json", lambda b: b"[" * 100_000 + b"]" * 100_000),
        ("cases.jsonl", lambda b: b.replace(b"{", b"\xff", 1)),
        ("tags.json", lambda b: "fifo"),
    ],
    ids=["truncated-info", "deep-metrics", "bad-byte-cases", "fifo-tags"],
)
def test_sync_of_a_damaged_saved_run_is_one_line(valid, tmp_path, name, damage):
    shutil.copytree(valid["run"], tmp_path / "run")
    path = tmp_path / "run" / name
    new = damage(path.read_bytes())
    if new == "fifo":
        path.unlink()
        os.mkfifo(path)
    else:
        path.write_bytes(new)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    proc = cli(tmp_path, "sync", "--tracking-uri", uri, str(tmp_path / "run"), timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and " INFO " not in ln]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert str(tmp_path / "run") in lines[0]
    if (tmp_path / "store" / "mlflow.db").exists():
        with sqlite3.connect(tmp_path / "store" / "mlflow.db") as con:
            assert con.execute("SELECT count(*) FROM runs WHERE status = 'RUNNING'").fetchone()[0] == 0


def test_fuzz_harness_can_fail():
    """The property is not vacuous: a reader that raises anything but a one-line EvalpipeError fails it."""
    with pytest.raises(AssertionError):
        holds(lambda: (_ for _ in ()).throw(EvalpipeError("two\nlines in /x")), Path("/x"))
    with pytest.raises(KeyError):
        holds(lambda: {}["a"], Path("/x"))
    fifo = Path(tempfile.mkdtemp()) / "pipe"
    os.mkfifo(fifo)
    global HANG_S
    saved, HANG_S = HANG_S, 0.5
    try:
        with pytest.raises(Hang):
            holds(lambda: fifo.read_bytes(), fifo.parent)  # opening a FIFO with no writer blocks
    finally:
        HANG_S = saved
        shutil.rmtree(fifo.parent)


def test_what_the_fuzzing_found_stays_fixed(tmp_path):
    """Each input the fuzzing turned up, as a fixed example (the alarm in `holds` bounds each)."""
    import warnings

    from evalpipe.corpus.build import build_corpus
    from evalpipe.inputs.fixture import load_fixture

    fx = write_tiny(tmp_path)
    text = fx.read_text()
    fx.write_text("\x0b" + text)  # a control character: PyYAML's two-line ReaderError
    holds(lambda: load_fixture(fx), tmp_path)
    fx.write_text(text.replace("corpus: corpus.jsonl", "corpus: c" + "[" * 300 + "1" + "]" * 300))
    holds(lambda: load_fixture(fx), tmp_path)  # a name too long for the file system
    src = tmp_path / "src"
    src.mkdir()
    (src / "deep.py").write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")  # past CPython's parser
    (src / "spaces.md").write_text("## Ins" + " " * 300_000 + "tall\n")  # the ATX regex backtracked
    (src / "brackets.md").write_text("# T\n\n" + "[" * 200_000 + "<" * 200_000 + "\n")  # link/tag regexes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        units = []
        holds(lambda: units.extend(build_corpus(src, max_file_bytes=4 * 1024 * 1024)), tmp_path)
    assert any("deep.py" in str(w.message) for w in caught)
    assert {u.path for u in units} == {"spaces.md", "brackets.md"}
    assert any(u.title == "Ins" + " " * 300_000 + "tall" or u.title.startswith("Ins") for u in units)
