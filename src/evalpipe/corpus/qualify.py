"""Package/module qualifiers: how a developer names a symbol from outside its file.

Go developers type `store.Node` (package name + symbol), Python developers
`evalpipe.rankers.base.top_k` or `base.top_k`, TypeScript developers `util.helper`
(module file + export). The builder records `qualifier` and `qualified_name` on every
code unit; corpora built before that (the frozen gold corpus) get the same values
derived here, so the new fields stay optional on load.
"""

from __future__ import annotations

import posixpath
import re

from evalpipe.core import Unit

_PARTS = re.compile(r"::|[./\\]")


def qualified(qualifier: str, qualname: str) -> str:
    """`qualifier.qualname`, or whichever of the two is present."""
    return ".".join(p for p in (qualifier, qualname) if p)


def unit_qualifier(unit: Unit) -> str:
    """The unit's package/module qualifier: Go package name, Python dotted module, TS/JS module path.

    Derived when the corpus predates the `qualifier` field: Go falls back to `package`
    metadata, then the directory name (Go's convention); Python to the `module` metadata.
    """
    stored = unit.metadata.get("qualifier")
    if stored:
        return str(stored)
    if unit.language == "go":
        return str(unit.metadata.get("package") or posixpath.basename(posixpath.dirname(unit.path)))
    if unit.language == "python":
        module = str(unit.metadata.get("module") or "")
        return module if "/" not in module else ""
    if unit.language in ("typescript", "javascript"):
        return posixpath.splitext(unit.path)[0]
    return ""


def unit_qualified_name(unit: Unit) -> str:
    """`qualifier.qualname` (`shapes.Rect.Area`, `evalpipe.rankers.base.top_k`, `web/util.helper`)."""
    stored = unit.metadata.get("qualified_name")
    if stored:
        return str(stored)
    if unit.kind not in ("module", "section", "document"):
        qualname = str(unit.metadata.get("qualname") or "")
        return qualified(unit_qualifier(unit), qualname) if qualname else ""
    return unit_qualifier(unit) if unit.kind == "module" else ""


def name_parts(name: str) -> tuple[str, ...]:
    """Components of a dotted, `::` or path name: `web/util.helper` -> (web, util, helper)."""
    return tuple(p for p in _PARTS.split(name) if p)


def suffix_match(query_parts: tuple[str, ...], name_parts_: tuple[str, ...]) -> bool:
    """True when the query's components are the trailing components of the name.

    `store.Node` matches `store.Node`; `base.top_k` matches `evalpipe.rankers.base.top_k`.
    """
    n = len(query_parts)
    return 0 < n <= len(name_parts_) and name_parts_[-n:] == query_parts
