"""Which units are tests: path conventions of each language, not a guess from the text.

A question about behaviour is almost never answered by a test, yet in a real repository a
third of the code units can live in test files. The builder records `is_test` on every unit
so rankers, winnow constraints (`{is_test: false}`) and statistics can tell them apart;
corpora built before the field get the same answer derived from the path on read
(`Unit.get("is_test")`).

Conventions (the runners' own discovery rules):

* Go: `*_test.go` (the `go test` rule); `testdata/` directories.
* TypeScript/JavaScript: `*.test.ts`, `*.spec.ts` (any JS/TS extension, also `.test-d.ts`
  type tests), `__tests__/`, `__mocks__/`, `test/`, `tests/`, `spec/` directories (Jest,
  Mocha, Vitest, Jasmine defaults).
* Python: `test_*.py`, `*_test.py`, `conftest.py` (pytest discovery), `tests/`, `test/`.
* Any language: a path component `test`, `tests`, `__tests__` or `testdata`.
* Other languages (Ruby, Java, Kotlin, C#, Scala, ...): `spec/`, `specs/`, `__mocks__/`,
  `testing/fixtures/` folders, `*_test.<ext>`, `*_spec.<ext>`, `*Test.java`, `*Tests.cs`.

This is the one rule for "is this a test": the builder records it, `Unit.get("is_test")` and
`evalpipe.core.unit.is_test_unit` answer with it for corpora that do not, and every ranker
(the test prior, the graph layer, winnow constraints) asks those.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

_TEST_DIRS = frozenset({"test", "tests", "__tests__", "testdata"})
_JS_TEST_DIRS = frozenset({"__mocks__", "spec", "specs", "e2e"})
_JS_FILE = re.compile(r"\.(?:test|spec|test-d|e2e)\.[cm]?[jt]sx?$", re.IGNORECASE)
_PY_FILE = re.compile(r"^(?:test_.*|.*_test|conftest)\.py$")
_JS_LANGUAGES = ("typescript", "javascript")
_OTHER_FILE = re.compile(
    r"(^|/)(tests?|testdata|__tests__|__mocks__|spec|specs|testing/fixtures)/"
    r"|(^|/)(test_[^/]*\.py|conftest\.py|[^/]*_test\.\w+|[^/]*_spec\.\w+"
    r"|[^/]*\.(test|spec)\.[cm]?[jt]sx?|[^/]*Tests?\.(java|kt|cs|scala))$"
)


def is_test_path(path: str, language: str = "") -> bool:
    """True when `path` (relative, POSIX) is a test file by its language's conventions."""
    if not path:
        return False
    path = path.replace("\\", "/")
    parts = PurePosixPath(path).parts
    name = parts[-1]
    dirs = {p.lower() for p in parts[:-1]}
    if dirs & _TEST_DIRS:
        return True
    if language == "go" or name.endswith(".go"):
        return name.endswith("_test.go")
    if language in _JS_LANGUAGES or re.search(r"\.[cm]?[jt]sx?$", name):
        return bool(_JS_FILE.search(name)) or bool(dirs & _JS_TEST_DIRS)
    if language == "python" or name.endswith(".py"):
        return bool(_PY_FILE.match(name))
    return bool(_OTHER_FILE.search(path))
