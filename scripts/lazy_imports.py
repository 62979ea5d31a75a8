"""Imports inside functions in src/: what each one saves at start-up, measured.

Why: an import inside a function is for start-up cost only (docs/architecture.md), and says what
it saves in a comment (`# lazy: mlflow, ~700 ms`). This measures every such import: in one fresh
process per module, the module is imported, then each of its function-level imports is run
alone in a fork of that process and timed (CPU time, so a busy machine inflates it little),
with the modules it newly loads. An import that loads nothing new
(its target is already loaded once its module is) or only a little of evalpipe and the standard
library (under `--threshold-ms`) saves nothing measurable and belongs at the top of the file.

    python scripts/lazy_imports.py                 # a table: every lazy import, its cost, its comment
    python scripts/lazy_imports.py --json out.json
    python scripts/lazy_imports.py --apply         # move the cheap ones up, comment the others

`tests/test_lazy_imports.py` checks that every import inside a function carries its comment.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGES = ("evalpipe", "hydra_plugins")
LINE_LENGTH = 110  # ruff's, pyproject.toml


@dataclass
class Lazy:
    module: str
    path: str
    line: int  # first line of the statement
    end: int
    function: str
    statement: str
    in_try: bool  # inside a try block (an optional dependency): never moved
    comment: str  # the `# lazy: ...` comment it carries ("" if none)
    ms: float = 0.0
    new: tuple[str, ...] = ()  # top-level packages it newly loads


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def lazy_comment(lines: list[str], node: ast.stmt) -> str:
    """The `# lazy:` comment on the statement's first line, or on the comment line just above the
    block of consecutive imports it belongs to (blank lines between import groups included)."""
    first = lines[node.lineno - 1]
    if "# lazy:" in first:
        return first.split("# lazy:", 1)[1].strip()
    i = node.lineno - 2
    while i >= 0:
        text = lines[i].strip()
        if text.startswith("# lazy:"):
            return text.split("# lazy:", 1)[1].strip()
        if not text or text.startswith(("import ", "from ")) or text[0] in ")" or text.endswith(","):
            i -= 1
            continue
        break
    return ""


def find(path: Path) -> list[Lazy]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    out: list[Lazy] = []

    def visit(node: ast.AST, function: str, in_try: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name if not function else f"{function}.{child.name}", in_try)
            elif isinstance(child, ast.Try):
                visit(child, function, in_try=True)
            elif isinstance(child, ast.Import | ast.ImportFrom) and function:
                out.append(
                    Lazy(
                        module_name(path),
                        str(path.relative_to(ROOT.parent)),
                        child.lineno,
                        child.end_lineno or child.lineno,
                        function,
                        ast.unparse(child),
                        in_try,
                        lazy_comment(lines, child),
                    )
                )
            else:
                visit(child, function, in_try)

    visit(tree, "", False)
    return out


PROBE = r"""
import importlib, json, os, sys, time
module, statements, package = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
importlib.import_module(module)
out = []
for text in statements:  # each in a fork of the process that has imported only the module
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        loaded = set(sys.modules)
        t0 = time.process_time()
        try:
            exec(compile(text, "<lazy>", "exec"), {"__name__": module, "__package__": package})
        except Exception:
            pass
        ms = (time.process_time() - t0) * 1000
        new = sorted({m.split(".")[0] for m in set(sys.modules) - loaded})
        os.write(write, json.dumps([ms, new]).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    out.append(json.loads(b"".join(chunks)))
print(json.dumps(out))
"""


def measure(module: str, found: list[Lazy], is_package: bool) -> None:
    package = module if is_package else module.rpartition(".")[0]
    statements = [f.statement for f in found]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, module, json.dumps(statements), package],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true", "PATH": "/usr/bin:/bin"},
    )
    if proc.returncode != 0:
        print(f"{module}: cannot import ({proc.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
        return
    for f, (ms, new) in zip(found, json.loads(proc.stdout.strip().splitlines()[-1]), strict=True):
        f.ms, f.new = round(ms, 2), tuple(new)


def collect(measured: bool = True) -> list[Lazy]:
    everything: list[Lazy] = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found = find(path)
            if found and measured:
                measure(module_name(path), found, path.name == "__init__.py")
            everything += found
    return everything


#: Not third-party packages worth naming in a comment (C-extension helpers, the interpreter's own).
NOT_NAMED = ("cython_runtime", "__mp_main__", "evalpipe", "hydra_plugins")


def third_party(f: Lazy) -> list[str]:
    std = set(sys.stdlib_module_names)
    return [n for n in f.new if n not in std and not n.startswith("_") and n not in NOT_NAMED]


def cheap(f: Lazy, threshold_ms: float) -> bool:
    """Saves nothing measurable: under the threshold and loads no third-party package."""
    return not f.in_try and f.ms < threshold_ms and not third_party(f)


#: Packages worth naming when an import pulls them in (the ones that cost start-up time).
HEAVY = (
    "mlflow", "sqlalchemy", "pandas", "matplotlib", "torch", "sentence_transformers", "transformers",
    "onnxruntime", "onnx", "chromadb", "ray", "optuna", "openai", "anthropic", "scipy", "numpy",
    "hydra", "omegaconf", "rich", "bm25s", "Stemmer", "tiktoken", "tree_sitter", "yaml", "requests",
)  # fmt: skip


def what(group: list[Lazy]) -> str:
    """`mlflow, rich, ~720 ms`: what a block of lazy imports keeps out of start-up."""
    names: list[str] = []
    for f in group:
        target = f.statement.split()[1]
        top = target.split(".")[0]
        own = [target] if top in PACKAGES else [top] if top in third_party(f) else []
        for n in own + [h for h in HEAVY if h in f.new]:
            if n not in names:
                names.append(n)
    ms = sum(f.ms for f in group)
    cost = f"~{ms:.0f} ms" if ms >= 1 else "<1 ms"
    optional = " (in a try)" if any(f.in_try for f in group) else ""
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return f"{shown or 'standard library'}, {cost}{optional}"


def bound_names(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    return [a.asname or a.name for a in node.names]


def movable(tree: ast.Module, func: ast.AST, node: ast.Import | ast.ImportFrom) -> bool:
    """Moving `node` to the top binds the same names globally without changing what they mean."""
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "__future__":
        return False
    names = set(bound_names(node))
    if "*" in names:
        return False
    top: dict[str, str] = {}
    for stmt in tree.body:  # what the module binds at top level (TYPE_CHECKING blocks included)
        for sub in ast.walk(stmt) if isinstance(stmt, ast.If) else [stmt]:
            if isinstance(sub, ast.Import | ast.ImportFrom):
                for n in bound_names(sub):
                    top[n] = ast.unparse(sub)
            elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                top[sub.name] = "def"
            elif isinstance(sub, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            top[n.id] = "assign"
    if names & set(top):
        return False  # already bound at the top: a duplicate (or TYPE_CHECKING) import, or a clash
    for sub in ast.walk(func):  # the function must not bind the name otherwise (it would be local)
        if sub is node:
            continue
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id in names:
            return False
        if isinstance(sub, ast.arg) and sub.arg in names:
            return False
        same = isinstance(sub, ast.Import | ast.ImportFrom) and set(bound_names(sub)) & names
        if same and ast.unparse(sub) != ast.unparse(node):
            return False
    return True


def functions_of(tree: ast.Module) -> dict[int, ast.AST]:
    """The innermost function around each import line."""
    out: dict[int, ast.AST] = {}

    def visit(node: ast.AST, func: ast.AST | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else func
            if isinstance(child, ast.Import | ast.ImportFrom) and func is not None:
                out[child.lineno] = func
            visit(child, inner)

    visit(tree, None)
    return out


def apply(found: list[Lazy], threshold_ms: float) -> tuple[int, int]:
    """Move the cheap lazy imports to the top of their file; put a `# lazy:` comment above each
    block of the others. Returns (moved, commented). Run `ruff check --fix` and `ruff format` after."""
    moved = commented = 0
    by_path: dict[str, list[Lazy]] = {}
    for f in found:
        by_path.setdefault(f.path, []).append(f)
    for rel, items in by_path.items():
        path = ROOT.parent / rel
        source = path.read_text(encoding="utf-8")
        if "noqa: E402" in source:
            movers: set[int] = set()  # imports placed after code on purpose: leave the top alone
        else:
            tree = ast.parse(source)
            funcs = functions_of(tree)
            nodes = {n.lineno: n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)}
            movers = {
                f.line
                for f in items
                if not f.comment and cheap(f, threshold_ms) and movable(tree, funcs[f.line], nodes[f.line])
            }
        lines = source.splitlines(keepends=True)
        # blocks of consecutive lazy imports (comment once per block)
        keep = [f for f in items if f.line not in movers and not f.comment]
        blocks: list[list[Lazy]] = []
        for f in sorted(keep, key=lambda f: f.line):
            if blocks and _adjacent(lines, blocks[-1][-1].end, f.line):
                blocks[-1].append(f)
            else:
                blocks.append([f])
        inserts: dict[int, str] = {}
        for block in blocks:
            first = lines[block[0].line - 1]
            indent = first[: len(first) - len(first.lstrip())]
            comment = f"{indent}# lazy: {what(block)}"
            if len(comment) > LINE_LENGTH:  # fewer names
                names, _, rest = what(block).rpartition(", ~")
                comment = f"{indent}# lazy: {names.split(', ')[0]}, ..., ~{rest}"
            inserts[block[0].line] = comment + "\n"
            commented += len(block)
        removed: set[int] = set()
        top_statements: list[str] = []
        for f in items:
            if f.line in movers:
                removed.update(range(f.line, f.end + 1))
                statement = "".join(lines[f.line - 1 : f.end]).strip()
                if statement not in top_statements:
                    top_statements.append(statement)
                moved += 1
        out: list[str] = []
        for i, line in enumerate(lines, 1):
            if i in inserts:
                out.append(inserts[i])
            if i not in removed:
                out.append(line)
        text = "".join(out)
        if top_statements:
            text = _add_top_imports(text, [_dedent(s) for s in top_statements])
        path.write_text(text, encoding="utf-8")
    return moved, commented


def _adjacent(lines: list[str], end: int, line: int) -> bool:
    return all(not lines[i].strip() or lines[i].lstrip().startswith("#") for i in range(end, line - 1)) and (
        line - end <= 2
    )


def _dedent(statement: str) -> str:
    return "\n".join(
        part.strip() if i == 0 else "    " + part.strip() for i, part in enumerate(statement.splitlines())
    )


def _add_top_imports(text: str, statements: list[str]) -> str:
    """After the module's last top-level import (ruff's isort puts them in place)."""
    tree = ast.parse(text)
    last = 0
    for stmt in tree.body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            last = stmt.end_lineno or stmt.lineno
        elif isinstance(stmt, ast.Expr) and isinstance(getattr(stmt, "value", None), ast.Constant):
            last = last or (stmt.end_lineno or stmt.lineno)  # after the docstring when no import yet
        elif last:
            break
    lines = text.splitlines(keepends=True)
    block = "".join(s + "\n" for s in statements)
    return "".join(lines[:last]) + block + "".join(lines[last:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every lazy import with its cost here")
    parser.add_argument("--threshold-ms", type=float, default=1.0, help="below: saves nothing measurable")
    parser.add_argument("--apply", action="store_true", help="move the cheap ones up, comment the others")
    parser.add_argument("--from-json", type=Path, help="use an earlier --json measurement")
    args = parser.parse_args(argv)
    if args.from_json:
        found = [Lazy(**{**d, "new": tuple(d["new"])}) for d in json.loads(args.from_json.read_text())]
    else:
        found = collect()
    if args.apply:
        moved, commented = apply(found, args.threshold_ms)
        print(f"moved to the top: {moved}; commented: {commented}")
        return 0
    if args.json:
        args.json.write_text(json.dumps([asdict(f) for f in found], indent=1), encoding="utf-8")
    few = [f for f in found if cheap(f, args.threshold_ms)]
    print(f"imports inside functions: {len(found)}")
    print(f"  with a `# lazy:` comment: {sum(1 for f in found if f.comment)}")
    print(f"  under {args.threshold_ms:g} ms, no third-party package: {len(few)}")
    for f in sorted(found, key=lambda f: -f.ms):
        new = ",".join(f.new)
        print(f"{f.ms:9.2f} ms  {f.path}:{f.line}  {f.statement[:70]}  [{new}]  # {f.comment}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
