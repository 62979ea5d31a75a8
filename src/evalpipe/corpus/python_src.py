"""Python source files -> symbol units (module, class, function, method) with relations.

IDs follow pytest node IDs so a gold case can name a symbol the way a developer
would: `src/pkg/mod.py` is the module unit, `src/pkg/mod.py::func`,
`src/pkg/mod.py::Class.method` and `src/pkg/mod.py::Outer.Inner.method` the symbols.
Functions defined inside functions (closures) are not units: their code and calls
belong to the enclosing function.

Building is two-phase because a `calls` edge can only be resolved once every
module's symbols are known: `extract_python` parses one file with `ast`, then
`resolve_python` turns raw names (`top_k`, `self.search`, `model.load`) into unit
IDs through the corpus-wide symbol and import tables. Names that do not resolve
to a corpus unit (stdlib, third-party, attributes of local variables) are dropped,
so every stored edge points at a real unit.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from evalpipe.core import Unit
from evalpipe.corpus.draft import Draft, Part, SourceParseError, compose_text, find_in_bases, merge_metadata
from evalpipe.corpus.qualify import qualified

DEFAULT_EXCERPT_CHARS = 1200
LANGUAGE = "python"
_MAX_ALIAS_DEPTH = 8


class PythonParseError(SourceParseError):
    """A Python file that `ast` cannot parse."""


@dataclass
class PythonFile:
    """The result of parsing one file: drafts in source order plus its import bindings."""

    path: str
    module: str
    drafts: list[Draft]
    # local name -> absolute dotted name, from every import statement in the file
    bindings: dict[str, str]
    # absolute dotted names of everything imported (modules or `module.name`)
    imported: list[str]


def module_names(paths: Iterable[str], root_package: str = "") -> dict[str, str]:
    """Dotted module name for each relative `.py` path, following package structure.

    A directory counts as a package when its `__init__.py` is among `paths`, so
    `src/evalpipe/evaluation/runner.py` is `evalpipe.evaluation.runner` (no `src/__init__.py`) and a loose
    script `scripts/build.py` is just `build`, as Python itself would import them.
    When the corpus root is itself a package (a top-level `__init__.py`),
    `root_package` is its import name and prefixes the modules inside it.
    """
    path_set = set(paths)
    out: dict[str, str] = {}
    for path in path_set:
        parts = list(PurePosixPath(path).parts)
        stem = parts[-1][: -len(".py")] if parts[-1].endswith(".py") else parts[-1]
        dotted = [] if stem == "__init__" else [stem]
        dirs = parts[:-1]
        while dirs and "/".join([*dirs, "__init__.py"]) in path_set:
            dotted.insert(0, dirs[-1])
            dirs = dirs[:-1]
        if not dirs and root_package and "__init__.py" in path_set:
            dotted.insert(0, root_package)
        if not dotted:  # a lone __init__.py outside any package
            dotted = [dirs[-1]] if dirs else ["__init__"]
        out[path] = ".".join(dotted)
    return out


# ---------------------------------------------------------------------------
# phase 1: extraction


def _default_text(expr: ast.expr, lines: Sequence[str] | None) -> str:
    """A default value as written (`1e-8`, `0x10`, `"x"`) when it fits on one line; `ast.unparse`
    would rewrite it (`1e-08`, `16`, `'x'`)."""
    if lines and expr.lineno == expr.end_lineno and expr.end_col_offset is not None:
        raw = lines[expr.lineno - 1].encode("utf-8")[expr.col_offset : expr.end_col_offset]
        return raw.decode("utf-8", errors="replace")
    return ast.unparse(expr)


def _fmt_arg(arg: ast.arg, default: ast.expr | None, lines: Sequence[str] | None = None) -> str:
    text = arg.arg
    if arg.annotation is not None:
        text += f": {ast.unparse(arg.annotation)}"
        if default is not None:
            text += f" = {_default_text(default, lines)}"
    elif default is not None:
        text += f"={_default_text(default, lines)}"
    return text


def format_arguments(args: ast.arguments, lines: Sequence[str] | None = None) -> str:
    """PEP 8 rendering of a parameter list (`ast.unparse` writes `x: int=1`); with the source
    `lines`, defaults are kept as written."""
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parts = [_fmt_arg(a, d, lines) for a, d in zip(positional, defaults, strict=True)]
    if args.posonlyargs:
        parts.insert(len(args.posonlyargs), "/")
    if args.vararg is not None:
        parts.append("*" + _fmt_arg(args.vararg, None))
    elif args.kwonlyargs:
        parts.append("*")
    parts.extend(_fmt_arg(a, d, lines) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True))
    if args.kwarg is not None:
        parts.append("**" + _fmt_arg(args.kwarg, None))
    return ", ".join(parts)


def signature_of(node: ast.AST, lines: Sequence[str] | None = None) -> str:
    """`def f(x: int) -> str`, `async def g()`, `class C(Base, metaclass=M)`."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
        type_params = getattr(node, "type_params", None)
        tp = f"[{', '.join(ast.unparse(t) for t in type_params)}]" if type_params else ""
        sig = f"{prefix} {node.name}{tp}({format_arguments(node.args, lines)})"
        if node.returns is not None:
            sig += f" -> {ast.unparse(node.returns)}"
        return sig
    if isinstance(node, ast.ClassDef):
        bases = [ast.unparse(b) for b in node.bases] + [ast.unparse(k) for k in node.keywords]
        return f"class {node.name}({', '.join(bases)})" if bases else f"class {node.name}"
    return ""


def _body_without_docstring(body: Sequence[ast.stmt]) -> list[ast.stmt]:
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return list(body[1:])
    return list(body)


def _clip(text: str, limit: int) -> str:
    """Cut `text` to at most `limit` chars, at a line end when one is reasonably close."""
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit + 1)
    return text[: cut if cut >= limit // 2 else limit].rstrip()


def _segment(lines: list[str], node: ast.AST) -> str:
    start = getattr(node, "lineno", 1) - 1
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        start = min(d.lineno for d in decorators) - 1
    end = getattr(node, "end_lineno", start + 1)
    return textwrap.dedent("\n".join(lines[start:end]))


def _outline(lines: list[str], body: Sequence[ast.stmt], signatures: bool = True) -> str:
    """Module/class body with nested defs reduced to their signatures (or left out).

    Method bodies have their own units, so repeating them in the class text would
    only make the class look relevant to every query about one of its methods. A
    module leaves its definitions out entirely (`signatures=False`): in a
    one-function-per-file layout their signatures would make the module a copy of
    the function, outranking it.
    """
    out = []
    for stmt in _body_without_docstring(body):
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if signatures:
                out.append(signature_of(stmt, lines))
        else:
            out.append(_segment(lines, stmt))
    return "\n".join(out)


def _function_body(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The body after the docstring, with the comment lines just above its first statement."""
    body = _body_without_docstring(node.body)
    if not body:
        return ""
    start = min([body[0].lineno, *(d.lineno for d in getattr(body[0], "decorator_list", ()))]) - 1
    floor = node.body[0].end_lineno if body[0] is not node.body[0] else node.lineno
    while start - 1 >= (floor or 0) and (
        not lines[start - 1].strip() or lines[start - 1].strip().startswith("#")
    ):
        start -= 1
    while not lines[start].strip():
        start += 1
    return textwrap.dedent("\n".join(lines[start : node.end_lineno]))


def _header_comments(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    """Comments in a definition's decorators and signature (`# noqa: C901`, a comment on one
    parameter, a comment between the `def` line and the docstring): `signature_of` rebuilds the
    signature from the tree, which keeps no comments."""
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    first = node.body[0]
    end = first.lineno - 1
    if lines[end][: first.col_offset].strip():  # `def f(): ...` : the header shares the line
        end += 1
    if len(_body_without_docstring(node.body)) < len(node.body):  # `"""Doc."""  # noqa: D212`
        end = max(end, first.end_lineno or end)
    segment = textwrap.dedent("\n".join(lines[start:end]))
    try:
        tokens = tokenize.generate_tokens(io.StringIO(segment + "\n").readline)
        return "\n".join(t.string for t in tokens if t.type == tokenize.COMMENT)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return "\n".join(m.group(0) for line in segment.splitlines() if (m := re.search(r"#.*$", line)))


def _is_placeholder(stmt: ast.stmt) -> bool:
    """`...`: the body of a stub (a `pass` body is kept, it is what the source says)."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and stmt.value.value is ...


def is_overload(decorators: Sequence[ast.expr]) -> bool:
    """`@overload`, `@typing.overload`, `@t.overload`, `@typing_extensions.overload`."""
    for dec in decorators:
        chain = _name_chain(dec)
        if chain and chain[-1] == "overload":
            return True
    return False


def _name_chain(expr: ast.expr) -> tuple[str, ...] | None:
    """`a.b.c` -> ("a", "b", "c"); `super().m` -> ("super()", "m"); None for anything else."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if isinstance(expr, ast.Name):
        parts.append(expr.id)
    elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super" and parts:
        parts.append("super()")
    else:
        return None
    return tuple(reversed(parts))


def _calls_in(nodes: Iterable[ast.AST]) -> list[tuple[str, ...]]:
    """Call targets in source order, not descending into nested classes/methods that are units."""
    found: list[tuple[int, int, tuple[str, ...]]] = []
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            chain = _name_chain(node.func)
            if chain:
                found.append((node.lineno, node.col_offset, chain))
        for child in ast.iter_child_nodes(node):
            stack.append(child)
    found.sort()
    return [chain for _, _, chain in found]


def _decorator_refs(decorators: Sequence[ast.expr]) -> list[tuple[str, ...]]:
    """Decorators are calls at definition time; a bare `@register` is a call too."""
    out = []
    for dec in decorators:
        target = dec.func if isinstance(dec, ast.Call) else dec
        chain = _name_chain(target)
        if chain:
            out.append(chain)
        if isinstance(dec, ast.Call):
            out.extend(_calls_in([*dec.args, *(k.value for k in dec.keywords)]))
    return out


def _absolute_module(module: str, is_package: bool, level: int, name: str | None) -> str:
    """Resolve `from ..x import y` relative to `module`."""
    if level == 0:
        return name or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
    if name:
        parts.append(name)
    return ".".join(p for p in parts if p)


def _collect_imports(tree: ast.Module, module: str, is_package: bool) -> tuple[dict[str, str], list[str]]:
    bindings: dict[str, str] = {}
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imported.append(alias.name)
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:  # `import a.b` binds `a`
                    head = alias.name.split(".")[0]
                    bindings.setdefault(head, head)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute_module(module, is_package, node.level, node.module)
            for alias in node.names:
                if alias.name == "*":
                    imported.append(base)
                    continue
                target = f"{base}.{alias.name}" if base else alias.name
                imported.append(target)
                bindings[alias.asname or alias.name] = target
    return bindings, imported


def extract_python(
    source: str, path: str, module: str, excerpt_chars: int = DEFAULT_EXCERPT_CHARS
) -> PythonFile:
    """Parse one file into drafts; raises PythonParseError naming the file and line."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise PythonParseError(path, exc.lineno or 0, f"SyntaxError: {exc.msg}") from None
    except ValueError as exc:  # e.g. source contains NUL bytes
        raise PythonParseError(path, 0, str(exc)) from None
    lines = source.splitlines()
    is_package = PurePosixPath(path).name == "__init__.py"
    bindings, imported = _collect_imports(tree, module, is_package)
    drafts: list[Draft] = []

    doc = ast.get_docstring(tree) or ""
    # what only the module has: its docstring, imports and top-level statements (its
    # definitions are units of their own; `contains` links them)
    mod_text = [f"module {module}"]
    if doc:
        mod_text.append(doc)
    outline = _clip(_outline(lines, tree.body, signatures=False), excerpt_chars)
    if outline:
        mod_text.append(outline)
    mod = Draft(
        id=path,
        kind="module",
        qualname="",
        title=module,
        text="\n\n".join(mod_text),
        metadata={
            "name": module.rsplit(".", 1)[-1],
            "qualname": "",
            "signature": "",
            "docstring": doc,
            "line": 1,
            "end_line": max(len(lines), 1),
            "module": module,
            "imports_raw": sorted(set(imported)),
        },
    )
    defs_top = [
        s for s in tree.body if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    mod.raw_calls = _calls_in(defs_top)
    drafts.append(mod)

    by_id: dict[str, Draft] = {}

    def visit(node: ast.AST, parent: Draft, prefix: str, class_qualname: str) -> None:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return
        qualname = f"{prefix}.{node.name}" if prefix else node.name
        is_class = isinstance(node, ast.ClassDef)
        kind = "class" if is_class else ("method" if class_qualname else "function")
        sig = signature_of(node, lines)
        doc = ast.get_docstring(node) or ""
        decorators = [ast.unparse(d) for d in node.decorator_list]
        body = _outline(lines, node.body) if is_class else _function_body(lines, node)
        stub = not is_class and is_overload(node.decorator_list)
        if stub and all(_is_placeholder(b) for b in _body_without_docstring(node.body)):
            body = ""  # `def f(x: int) -> int: ...`: the signature is all there is
        part = Part(
            kind=kind,
            signature="\n".join([*(f"@{d}" for d in decorators), sig]),
            doc=doc,
            body=_clip(body, excerpt_chars),
            overload=stub,
            notes=_header_comments(lines, node) if node.body else "",
        )
        draft = Draft(
            id=f"{path}::{qualname}",
            kind=kind,
            qualname=qualname,
            title=qualname,
            text=compose_text([part]),
            metadata={
                "name": node.name,
                "qualname": qualname,
                "signature": sig,
                "docstring": doc,
                "line": node.lineno,
                "end_line": node.end_lineno,
                "module": module,
                "parent": parent.id,
                "decorators": decorators,
            },
            class_qualname=class_qualname,
            parts=[part],
        )
        existing = by_id.get(draft.id)
        if existing is not None:
            # a redefinition (@overload stubs and their implementation, a property setter):
            # one unit whose text holds every definition and whose calls cover them all
            existing.metadata["end_line"] = max(existing.metadata["end_line"], node.end_lineno or 0)
            existing.parts.append(part)
            existing.text = compose_text(existing.parts)
            merge_metadata(existing.metadata, existing.parts)
            known = existing.metadata["decorators"]
            known.extend(d for d in decorators if d not in known)
            draft = existing
        else:
            by_id[draft.id] = draft
            parent.contains.append(draft.id)
            drafts.append(draft)
        refs = _decorator_refs(node.decorator_list)
        if is_class:
            draft.raw_bases += [c for c in (_name_chain(b) for b in node.bases) if c]
            members = [
                s
                for s in node.body
                if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            ]
            draft.raw_calls += refs + _calls_in([*members, *node.bases, *(k.value for k in node.keywords)])
            for stmt in node.body:
                visit(stmt, draft, qualname, qualname)
        else:
            # closures and classes defined inside a function are part of the function
            defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            draft.raw_calls += refs + _calls_in([*node.body, *defaults])

    for stmt in tree.body:
        visit(stmt, mod, "", "")
    return PythonFile(path=path, module=module, drafts=drafts, bindings=bindings, imported=imported)


# ---------------------------------------------------------------------------
# phase 2: resolution


class _Resolver:
    """Corpus-wide tables: dotted name -> unit ID, and import aliases (re-exports)."""

    def __init__(self, files: Sequence[PythonFile]):
        self.symbols: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        self.aliases: dict[str, str] = {}
        self.modules: dict[str, str] = {}
        ambiguous: set[str] = set()
        for f in files:
            if f.module in self.modules:
                ambiguous.add(f.module)
            self.modules[f.module] = f.path
        for name in ambiguous:  # e.g. two loose `conftest.py`: never guess which one
            del self.modules[name]
        for f in files:
            if f.module in ambiguous:
                continue
            for d in f.drafts:
                dotted = f"{f.module}.{d.qualname}" if d.qualname else f.module
                self.symbols[dotted] = d.id
                self.kinds[d.id] = d.kind
            for local, target in f.bindings.items():
                self.aliases.setdefault(f"{f.module}.{local}", target)

    def dotted(self, name: str, depth: int = 0) -> str | None:
        """Unit ID for an absolute dotted name, following re-exports (`from .model import X`)."""
        if name in self.symbols:
            return self.symbols[name]
        if depth >= _MAX_ALIAS_DEPTH:
            return None
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            prefix = ".".join(parts[:i])
            target = self.aliases.get(prefix)
            if target is not None and target != prefix:
                rest = parts[i:]
                return self.dotted(".".join([target, *rest]), depth + 1)
        return None

    def module_id(self, name: str) -> str | None:
        return self.modules.get(name)


def _lookup_method(
    resolver: _Resolver, class_id: str, name: str, bases_of: Mapping[str, list[str]]
) -> str | None:
    """Find `name` on a class or, breadth-first, on its corpus base classes."""
    return find_in_bases(
        class_id, bases_of, lambda cid: f"{cid}.{name}" if f"{cid}.{name}" in resolver.kinds else None
    )


def _resolve_chain(
    resolver: _Resolver, f: PythonFile, chain: tuple[str, ...], bindings: Mapping[str, str]
) -> str | None:
    head, rest = chain[0], list(chain[1:])
    if head in bindings:
        return resolver.dotted(".".join([bindings[head], *rest]))
    return resolver.dotted(".".join([f.module, *chain]))


def resolve_python(files: Sequence[PythonFile]) -> list[Unit]:
    """Resolve every draft's references and return units (file order, then source order)."""
    resolver = _Resolver(files)
    callable_kinds = {"function", "method", "class"}

    bases_of: dict[str, list[str]] = {}
    for f in files:
        for d in f.drafts:
            if d.kind != "class":
                continue
            ids = []
            for chain in d.raw_bases:
                target = _resolve_chain(resolver, f, chain, f.bindings)
                if target and resolver.kinds.get(target) == "class" and target != d.id and target not in ids:
                    ids.append(target)
            bases_of[d.id] = ids

    units: list[Unit] = []
    for f in files:
        module_imports: list[str] = []
        for name in f.imported:
            target = resolver.module_id(name)
            if target is None and "." in name:  # `from pkg.mod import func` imports pkg.mod
                target = resolver.module_id(name.rsplit(".", 1)[0])
            if target and target != f.path and target not in module_imports:
                module_imports.append(target)
        for d in f.drafts:
            calls: list[str] = []
            for chain in d.raw_calls:
                target: str | None = None
                if chain[0] in ("self", "cls") and d.class_qualname and len(chain) == 2:
                    class_id = f"{f.path}::{d.class_qualname}"
                    target = _lookup_method(resolver, class_id, chain[1], bases_of)
                elif chain[0] == "super()" and d.class_qualname and len(chain) == 2:
                    class_id = f"{f.path}::{d.class_qualname}"
                    for base in bases_of.get(class_id, []):
                        target = _lookup_method(resolver, base, chain[1], bases_of)
                        if target:
                            break
                elif chain[0] not in ("self", "cls", "super()"):
                    target = _resolve_chain(resolver, f, chain, f.bindings)
                if (
                    target
                    and target != d.id
                    and resolver.kinds.get(target) in callable_kinds
                    and target not in calls
                ):
                    calls.append(target)
            bases = bases_of.get(d.id, []) if d.kind == "class" else []
            relations = d.relations(calls, module_imports, bases)
            metadata = {
                **d.metadata,
                "qualifier": f.module,
                "qualified_name": qualified(f.module, d.qualname),
            }
            units.append(
                Unit(
                    id=d.id,
                    kind=d.kind,
                    title=d.title,
                    text=d.text,
                    path=f.path,
                    language=LANGUAGE,
                    relations=relations,
                    metadata=metadata,
                )
            )
    return units


def build_python_units(
    sources: Sequence[tuple[str, str]],
    excerpt_chars: int = DEFAULT_EXCERPT_CHARS,
    on_error: Callable[[str, int, str], None] | None = None,
    root_package: str = "",
) -> list[Unit]:
    """Units for `(relative_path, source)` pairs; unparsable files go to `on_error` (or raise)."""
    names = module_names((p for p, _ in sources), root_package)
    files = []
    for path, source in sources:
        try:
            files.append(extract_python(source, path, names[path], excerpt_chars))
        except PythonParseError as exc:
            if on_error is None:
                raise
            on_error(exc.path, exc.line, exc.message)
    return resolve_python(files)
