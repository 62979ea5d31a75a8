"""Corpus builder: Python symbols, Markdown sections, file walking and the CLI.

Expected IDs, lines and relations below were worked out by hand from the small
sources written in each test (line numbers are given in the source comments).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evalpipe.corpus import Corpus, load_jsonl_corpus
from evalpipe.corpus.__main__ import main
from evalpipe.corpus.build import SkippedFileWarning, build_corpus, collect_files, path_matches
from evalpipe.corpus.markdown import Slugger, parse_markdown
from evalpipe.corpus.python_src import build_python_units, module_names

REPO = Path(__file__).resolve().parents[1]


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


CORE = '''
"""Core utilities."""

import os

from pkg import util
from .util import scale


def helper(x: int, *, factor: float = 2.0) -> float:
    """Double it."""
    return scale(x) * factor + util.offset() + os.getpid()


class Base:
    def run(self):
        return helper(1)


class Child(Base):
    """A child."""

    class Inner:
        def m(self) -> None:
            pass

    def go(self, n=3):
        self.run()
        self.missing()
        return Child.Inner().m()
'''
# line numbers in CORE: helper 9-11, Base 14-16 (run 15), Child 19-29, Inner 22-24 (m 23), go 26-29

UTIL = """
def scale(x):
    return x


def offset():
    return 0
"""

APP = """
from pkg import helper


def main():
    return helper(2)
"""


@pytest.fixture
def py_tree(tmp_path: Path) -> Path:
    write(tmp_path, "pkg/__init__.py", '"""Package doc."""\nfrom pkg.core import helper as helper\n')
    write(tmp_path, "pkg/core.py", CORE)
    write(tmp_path, "pkg/util.py", UTIL)
    write(tmp_path, "app.py", APP)
    return tmp_path


def by_id(units) -> dict:
    return {u.id: u for u in units}


def test_module_names_follow_packages() -> None:
    names = module_names(["src/pkg/__init__.py", "src/pkg/a.py", "src/pkg/sub/b.py", "scripts/run.py"])
    # src/pkg/sub has no __init__.py, so b.py is a top-level module as Python would see it
    assert names == {
        "src/pkg/__init__.py": "pkg",
        "src/pkg/a.py": "pkg.a",
        "src/pkg/sub/b.py": "b",
        "scripts/run.py": "run",
    }


def test_module_names_when_root_is_a_package() -> None:
    names = module_names(["__init__.py", "a.py", "sub/__init__.py", "sub/b.py"], root_package="pkg")
    assert names == {
        "__init__.py": "pkg",
        "a.py": "pkg.a",
        "sub/__init__.py": "pkg.sub",
        "sub/b.py": "pkg.sub.b",
    }


def test_python_ids_kinds_and_order(py_tree: Path) -> None:
    units = build_corpus(py_tree)
    assert [u.id for u in units] == [
        "app.py",
        "app.py::main",
        "pkg/__init__.py",
        "pkg/core.py",
        "pkg/core.py::helper",
        "pkg/core.py::Base",
        "pkg/core.py::Base.run",
        "pkg/core.py::Child",
        "pkg/core.py::Child.Inner",
        "pkg/core.py::Child.Inner.m",
        "pkg/core.py::Child.go",
        "pkg/util.py",
        "pkg/util.py::scale",
        "pkg/util.py::offset",
    ]
    u = by_id(units)
    assert [
        u[i].kind
        for i in ("pkg/core.py", "pkg/core.py::helper", "pkg/core.py::Child", "pkg/core.py::Child.go")
    ] == [
        "module",
        "function",
        "class",
        "method",
    ]
    assert u["pkg/core.py::Child.Inner.m"].kind == "method"
    assert all(x.language == "python" for x in units)
    Corpus(units)  # IDs are unique


def test_python_metadata(py_tree: Path) -> None:
    u = by_id(build_corpus(py_tree))
    helper = u["pkg/core.py::helper"]
    assert helper.title == "helper"
    assert helper.path == "pkg/core.py"
    assert helper.metadata["signature"] == "def helper(x: int, *, factor: float = 2.0) -> float"
    assert helper.metadata["docstring"] == "Double it."
    assert (helper.metadata["line"], helper.metadata["end_line"]) == (9, 11)
    assert helper.metadata["module"] == "pkg.core"
    assert helper.metadata["qualname"] == "helper"
    assert helper.text.startswith(
        "def helper(x: int, *, factor: float = 2.0) -> float\n\nDouble it.\n\nreturn scale(x)"
    )

    m = u["pkg/core.py::Child.Inner.m"]
    assert (m.title, m.metadata["name"], m.metadata["line"]) == ("Child.Inner.m", "m", 23)
    assert m.metadata["signature"] == "def m(self) -> None"
    child = u["pkg/core.py::Child"]
    assert child.metadata["signature"] == "class Child(Base)"
    assert (child.metadata["line"], child.metadata["end_line"]) == (19, 29)
    assert child.metadata["docstring"] == "A child."
    assert u["pkg/core.py::Child.go"].metadata["signature"] == "def go(self, n=3)"

    mod = u["pkg/core.py"]
    assert (mod.title, mod.metadata["name"], mod.metadata["docstring"]) == (
        "pkg.core",
        "core",
        "Core utilities.",
    )
    init = u["pkg/__init__.py"]
    assert (init.title, init.metadata["module"]) == ("pkg", "pkg")


def test_python_relations(py_tree: Path) -> None:
    u = by_id(build_corpus(py_tree))
    rel = {uid: dict(x.relations) for uid, x in u.items()}
    assert rel["pkg/core.py"]["contains"] == (
        "pkg/core.py::helper",
        "pkg/core.py::Base",
        "pkg/core.py::Child",
    )
    assert rel["pkg/core.py::Child"]["contains"] == ("pkg/core.py::Child.Inner", "pkg/core.py::Child.go")
    assert rel["pkg/core.py::Child.Inner"]["contains"] == ("pkg/core.py::Child.Inner.m",)
    # relative import, module attribute; os.getpid (stdlib) is dropped
    assert rel["pkg/core.py::helper"]["calls"] == ("pkg/util.py::scale", "pkg/util.py::offset")
    assert rel["pkg/core.py::Base.run"]["calls"] == ("pkg/core.py::helper",)
    # self.run is inherited from Base; self.missing resolves to nothing; Child.Inner() is a constructor call
    assert rel["pkg/core.py::Child.go"]["calls"] == ("pkg/core.py::Base.run", "pkg/core.py::Child.Inner")
    # `from pkg import helper` goes through the re-export in pkg/__init__.py
    assert rel["app.py::main"]["calls"] == ("pkg/core.py::helper",)
    assert rel["pkg/core.py::Child"]["inherits"] == ("pkg/core.py::Base",)
    assert "inherits" not in rel["pkg/core.py::Base"]
    # imports: corpus modules only (os is skipped), no duplicates
    assert rel["pkg/core.py"]["imports"] == ("pkg/util.py",)
    assert rel["pkg/__init__.py"]["imports"] == ("pkg/core.py",)
    assert rel["app.py"]["imports"] == ("pkg/__init__.py",)
    assert "calls" not in rel["pkg/util.py::scale"]


def test_python_excerpt_is_bounded() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(50))
    source = f'def f():\n    """Doc."""\n{body}\n'
    (unit,) = [u for u in build_python_units([("m.py", source)], excerpt_chars=30) if u.kind == "function"]
    # signature + docstring + the whole body lines that fit in 30 chars: 4 lines of 6 chars
    # plus 3 newlines = 27 chars; a 5th line would make 34
    assert unit.text == "def f()\n\nDoc.\n\nx0 = 0\nx1 = 1\nx2 = 2\nx3 = 3"


def test_python_redefinition_is_one_unit() -> None:
    source = (
        "class C:\n"
        "    @property\n"
        "    def v(self):\n"
        "        return 1\n"
        "\n"
        "    @v.setter\n"
        "    def v(self, value):\n"
        "        self.w()\n"
        "\n"
        "    def w(self):\n"
        "        pass\n"
    )
    u = by_id(build_python_units([("m.py", source)]))
    assert u["m.py::C"].relations["contains"] == ("m.py::C.v", "m.py::C.w")
    assert u["m.py::C.v"].relations["calls"] == ("m.py::C.w",)
    assert (u["m.py::C.v"].metadata["line"], u["m.py::C.v"].metadata["end_line"]) == (3, 8)


def test_unparsable_python_file_is_skipped_with_location(py_tree: Path) -> None:
    write(py_tree, "pkg/bad.py", "x = 1\ndef f(:\n    pass\n")
    with pytest.warns(SkippedFileWarning, match=r"pkg/bad\.py:2: skipped \(SyntaxError"):
        units = build_corpus(py_tree)
    assert not any(u.path == "pkg/bad.py" for u in units)
    assert "pkg/core.py::helper" in {u.id for u in units}


def test_non_utf8_file_is_skipped_with_line(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_bytes(b"# Title\n\ncaf\xe9\n")
    write(tmp_path, "b.md", "# B\n")
    with pytest.warns(SkippedFileWarning, match=r"a\.md:3: skipped \(not UTF-8"):
        units = build_corpus(tmp_path)
    assert [u.id for u in units] == ["b.md#b"]


# ---------------------------------------------------------------------------
# Markdown

DOC = """
Intro line.

# Guide

Welcome.

## Install `pkg` (fast!)

```bash
# not a heading
```

## Install pkg fast

Setext Title
------------

Body.
"""


def test_slugger_matches_github() -> None:
    s = Slugger()
    assert [s.slug(t) for t in ("Hello, World!", "hello world", "Hello World", "C++ & Go", "API_v2.0")] == [
        "hello-world",
        "hello-world-1",
        "hello-world-2",
        "c--go",
        "api_v20",
    ]


def test_markdown_sections() -> None:
    units = parse_markdown(textwrap.dedent(DOC).lstrip("\n"), "docs/guide.md")
    assert [u.id for u in units] == [
        "docs/guide.md#",
        "docs/guide.md#guide",
        "docs/guide.md#install-pkg-fast",
        "docs/guide.md#install-pkg-fast-1",
        "docs/guide.md#setext-title",
    ]
    u = by_id(units)
    intro = u["docs/guide.md#"]
    assert (intro.title, intro.text, intro.metadata["section"], intro.metadata["level"]) == (
        "guide.md",
        "Intro line.",
        "",
        0,
    )
    install = u["docs/guide.md#install-pkg-fast"]
    assert install.kind == "section" and install.language == "markdown"
    assert install.title == "Install `pkg` (fast!)"
    assert install.metadata["heading_path"] == ["Guide", "Install `pkg` (fast!)"]
    assert (install.metadata["level"], install.metadata["line"], install.metadata["end_line"]) == (2, 7, 11)
    assert install.metadata["document_id"] == "docs/guide.md"
    assert install.metadata["chunk_index"] == 2
    # the '#' line inside the fence is body text, not a heading
    assert install.text == "Guide > Install `pkg` (fast!)\n\n```bash\n# not a heading\n```"
    setext = u["docs/guide.md#setext-title"]
    assert (setext.metadata["level"], setext.metadata["line"], setext.text) == (
        2,
        15,
        "Guide > Setext Title\n\nBody.",
    )
    assert u["docs/guide.md#guide"].relations["contains"] == (
        "docs/guide.md#install-pkg-fast",
        "docs/guide.md#install-pkg-fast-1",
        "docs/guide.md#setext-title",
    )
    assert not u["docs/guide.md#install-pkg-fast"].relations


def test_markdown_long_section_is_chunked_on_paragraphs() -> None:
    text = "# Long\n\naaaaaaaaaa\n\nbbbbbbbbbb\n\ncccccccccc\n\n## Sub\n\nshort\n"
    units = parse_markdown(text, "n.md", section_chars=25)
    # "aaaaaaaaaa\n\nbbbbbbbbbb" is 22 chars <= 25; adding "\n\ncccccccccc" would make 34
    assert [(u.id, u.metadata["chunk_index"], u.metadata["line"], u.metadata["section"]) for u in units] == [
        ("n.md#long", 0, 1, "long"),
        ("n.md#long~2", 1, 7, "long"),
        ("n.md#sub", 2, 9, "sub"),
    ]
    assert units[0].text == "Long\n\naaaaaaaaaa\n\nbbbbbbbbbb"
    assert units[1].text == "Long\n\ncccccccccc"
    assert units[0].relations["contains"] == ("n.md#sub",)
    assert not units[1].relations
    assert units[2].metadata["heading_path"] == ["Long", "Sub"]


def test_markdown_front_matter_and_no_headings() -> None:
    units = parse_markdown("---\ntitle: x\n---\nJust text.\n", "a.md")
    assert [(u.id, u.text, u.metadata["line"]) for u in units] == [("a.md#", "Just text.", 4)]


# ---------------------------------------------------------------------------
# walking and CLI


def test_globs() -> None:
    assert path_matches("a/b/c.py", "**/*.py")
    assert path_matches("c.py", "**/*.py")
    assert path_matches("x/node_modules/y.js", "node_modules")
    assert path_matches("pkg.egg-info", "*.egg-info")
    assert path_matches("docs/api", "docs/**")
    assert not path_matches("src/a.py", "docs/**")
    assert not path_matches("a/b.py", "*.md")


def test_collect_files_prunes_excluded_dirs(tmp_path: Path) -> None:
    for rel in ("a.py", ".venv/lib/x.py", "sub/build/y.py", "sub/z.md", "sub/notes.txt"):
        write(tmp_path, rel, "x = 1\n")
    assert collect_files(tmp_path, ["**/*.py", "**/*.md"], [".venv", "build"]) == ["a.py", "sub/z.md"]


def test_language_filter(py_tree: Path) -> None:
    write(py_tree, "README.md", "# Read me\n")
    assert [u.id for u in build_corpus(py_tree, languages=["markdown"])] == ["README.md#read-me"]
    assert "README.md#read-me" not in {u.id for u in build_corpus(py_tree, languages=["python"])}


def test_cli_writes_loadable_corpus(py_tree: Path, tmp_path: Path, capsys) -> None:
    write(py_tree, "README.md", "# Read me\n\nHello.\n")
    out = tmp_path / "out" / "corpus.jsonl"
    assert main([str(py_tree), "-o", str(out), "--exclude", "app.py"]) == 0
    corpus = load_jsonl_corpus(out)
    assert "app.py::main" not in corpus
    assert corpus.get("pkg/core.py::Child.go").relations["calls"] == (
        "pkg/core.py::Base.run",
        "pkg/core.py::Child.Inner",
    )
    assert corpus.get("README.md#read-me").metadata["heading_path"] == ["Read me"]
    printed = capsys.readouterr().out
    # 14 Python units minus app.py's 2, plus 1 section
    assert "wrote 13 units" in printed
    assert "python 12, markdown 1" in printed


def test_cli_markdown_only(py_tree: Path, tmp_path: Path) -> None:
    write(py_tree, "README.md", "# Read me\n")
    out = tmp_path / "md.jsonl"
    assert main([str(py_tree), "-o", str(out), "--markdown-only"]) == 0
    assert load_jsonl_corpus(out).ids == ["README.md#read-me"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["does-not-exist", "-o", "x.jsonl"], "is not a directory"),
        (["."], "-o/--output"),
        ([".", "-o", "x.jsonl", "--markdown-only", "--code-only"], "not allowed with"),
        ([".", "-o", "x.jsonl", "--excerpt-chars", "0"], "positive integer"),
    ],
)
def test_cli_bad_input_exits_2(argv, message, capsys, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_repo_src_corpus() -> None:
    units = build_corpus(REPO, include=["src/**/*.py"])
    u = by_id(units)
    base = "src/evalpipe/rankers/base.py"
    assert u[f"{base}::top_k"].kind == "function"
    assert u[f"{base}::top_k"].metadata["module"] == "evalpipe.rankers.base"
    assert f"{base}::top_k" in u[f"{base}::CorpusRanker.search"].relations["calls"]
    assert u[f"{base}::CorpusRanker.search"].kind == "method"
    # base.py imports `from evalpipe.corpus import Corpus`, i.e. the package __init__
    assert "src/evalpipe/corpus/__init__.py" in u[base].relations["imports"]
    Corpus(units)
