"""Import-graph figures of src/evalpipe: parts, dependencies, upward imports, cycles, lazy imports.

Why: issue 33 asks for before/after figures of the package structure that count every import,
including the ones inside functions (a lazy import hides a reverse dependency from anyone reading
the top of a file, and every cycle we had closed through one). grimp (shipped with import-linter)
also sees function-level imports, but it does not say which ones are lazy, so this reads the
source with ``ast`` directly: no import of evalpipe, no side effects, a fraction of a second.

    python scripts/import_graph.py            # the summary
    python scripts/import_graph.py --edges    # also every part -> part dependency and each upward import

Counted:
- *parts*: top-level packages and modules of ``evalpipe`` (``evalpipe.sweeps``, ``evalpipe.paths``);
- *dependencies*: distinct part -> part pairs with at least one import between them;
- *internal imports*: import statements (one per imported evalpipe module per statement) whose target
  is inside evalpipe; *inside functions* those nested in a ``def`` (``if TYPE_CHECKING`` blocks count
  as top-level: they are never executed);
- *upward imports*: module -> module imports from a lower layer to a higher one (``LAYERS`` below, the
  suggestion in the design note; parts on one layer may import each other);
- *cycles*: strongly connected groups of modules (module level, not part level), each listed.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"  # --src: another checkout's src/
PKG = "evalpipe"

# Lowest first. A part not named here is reported as "unplaced" (and never counted as upward).
LAYERS: list[tuple[str, set[str]]] = [
    ("ground", {"__init__", "safety", "atomic", "paths", "heap", "core", "types"}),
    ("corpus", {"corpus"}),
    ("inputs", {"inputs"}),
    ("rankers", {"rankers", "tokenize", "embed_cache", "bm25s_loader"}),
    ("scoring", {"scoring", "stats"}),
    ("around", {"judge", "tracking", "reporting", "fixture_check"}),
    ("evaluation", {"evaluation", "preflight", "runner", "batching", "progress"}),
    ("commands", {"compare", "gate", "suite", "sweeps"}),
    ("entry", {"__main__", "app"}),
]
# The same layers as the import-linter contracts in pyproject.toml (docs/architecture.md).
# Modules placed on another layer than their part: commands whose library sits lower (the
# fixture analysis is recorded with every run; `evalpipe merge-judgements` edits the judge's files).
MODULE_LAYER = {
    "evalpipe.judge.merge": "commands",
    "evalpipe.fixture_check.cli": "commands",
    "evalpipe.fixture_check.__main__": "commands",
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def collect_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PKG).rglob("*.py"))}


def resolve(base: str, level: int, mod: str | None, modules: dict[str, Path], here_pkg: str) -> str:
    if level:
        pkg = here_pkg.split(".")
        pkg = pkg[: len(pkg) - (level - 1)]
        return ".".join(pkg + ([mod] if mod else []))
    return mod or base


def targets_of(node: ast.AST, here: str, here_is_pkg: bool, modules: dict[str, Path]) -> list[str]:
    """The evalpipe modules one import statement loads (the deepest existing module per name)."""
    here_pkg = here if here_is_pkg else here.rpartition(".")[0]
    out: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            name = alias.name
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith(PKG):
                out.append(name)
    elif isinstance(node, ast.ImportFrom):
        base = resolve("", node.level, node.module, modules, here_pkg)
        if base.split(".")[0] != PKG:
            return out
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in modules:
                out.append(sub)
            else:
                name = base
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name:
                    out.append(name)
    return sorted(set(out))


class Finder(ast.NodeVisitor):
    def __init__(self) -> None:
        self.depth = 0
        self.found: list[tuple[ast.AST, bool]] = []

    def visit_FunctionDef(self, node: ast.AST) -> None:  # noqa: N802
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # noqa: N815
    visit_Lambda = visit_FunctionDef  # noqa: N815

    def visit_Import(self, node: ast.AST) -> None:  # noqa: N802
        self.found.append((node, self.depth > 0))

    visit_ImportFrom = visit_Import  # noqa: N815


def part_of(module: str) -> str:
    bits = module.split(".")
    return bits[1] if len(bits) > 1 else "__init__"


def layer_of(module: str) -> int | None:
    name = MODULE_LAYER.get(module)
    for i, (layer, parts) in enumerate(LAYERS):
        if name == layer or (name is None and part_of(module) in parts):
            return i
    return None


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (the graph is small but deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edges", action="store_true", help="list part dependencies and upward imports")
    ap.add_argument("--largest", type=int, default=10, help="how many of the largest files to list")
    ap.add_argument("--src", type=Path, help="another checkout's src/ (e.g. a worktree of 1efd3df)")
    args = ap.parse_args(argv)
    if args.src is not None:
        global ROOT
        ROOT = args.src.resolve()
    modules = collect_modules()
    graph: dict[str, set[str]] = defaultdict(set)
    imports = lazy = 0
    part_edges: set[tuple[str, str]] = set()
    upward: list[tuple[str, str, bool]] = []
    lazy_by_part: dict[str, int] = defaultdict(int)
    for mod, path in modules.items():
        graph.setdefault(mod, set())
        finder = Finder()
        finder.visit(ast.parse(path.read_text(), str(path)))
        for node, in_func in finder.found:
            for tgt in targets_of(node, mod, is_package(path), modules):
                if tgt == mod:
                    continue
                imports += 1
                lazy += in_func
                if in_func:
                    lazy_by_part[part_of(mod)] += 1
                graph[mod].add(tgt)
                a, b = part_of(mod), part_of(tgt)
                if a != b:
                    part_edges.add((a, b))
                la, lb = layer_of(mod), layer_of(tgt)
                if la is not None and lb is not None and lb > la:
                    upward.append((mod, tgt, in_func))

    parts = sorted({part_of(m) for m in modules} - {"__init__"})
    cycles = sccs(graph)
    unplaced = sorted(p for p in parts if layer_of(f"{PKG}.{p}") is None)
    sizes = sorted(
        ((len(p.read_text().splitlines()), str(p.relative_to(ROOT))) for p in modules.values()),
        reverse=True,
    )
    upward_pairs = sorted({(a, b) for a, b, _ in upward})

    print(f"top-level parts:        {len(parts)}  ({', '.join(parts)})")
    print(f"part dependencies:      {len(part_edges)}")
    print(f"modules:                {len(modules)}")
    print(f"internal imports:       {imports}")
    print(f"  inside functions:     {lazy} ({100 * lazy / max(imports, 1):.0f}%)")
    print(f"upward imports:         {len(upward_pairs)} module pairs ({len(upward)} statements)")
    for a, b in upward_pairs:
        print(f"    {a} -> {b}")
    print(f"cycles (module SCCs):   {len(cycles)}")
    for comp in cycles:
        print(f"    {' <-> '.join(comp)}")
    if unplaced:
        print(f"parts on no layer:      {', '.join(unplaced)}")
    print(f"largest files (lines):  {sum(n for n, _ in sizes)} lines in all")
    for n, name in sizes[: args.largest]:
        print(f"    {n:5d}  {name}")
    if args.edges:
        print("part dependencies:")
        for a, b in sorted(part_edges):
            print(f"    {a} -> {b}")
        print("lazy imports by part:")
        for p, n in sorted(lazy_by_part.items(), key=lambda kv: -kv[1]):
            print(f"    {n:4d}  {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
