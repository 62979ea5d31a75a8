"""YAML that refuses what PyYAML silently accepts: a key given twice in one mapping.

PyYAML keeps the last of two equal keys, so a fixture with two `cases:` blocks, or a
case with two `query:` lines, loses data without a word. Here that is an error
naming the file and both lines. Merge keys (`<<: *base`) still override as YAML
intends: only keys written out in the same mapping count as duplicates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from evalpipe.core.files import read_text
from evalpipe.safety import env_settings
from evalpipe.safety.errors import EvalpipeError

MERGE_TAG = "tag:yaml.org,2002:merge"


class YAMLFileError(EvalpipeError, ValueError):
    """A YAML file that cannot be read; the message names the file and line."""


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _TooDeep(yaml.MarkedYAMLError):
    pass


#: Deepest nesting of mappings and lists accepted (a fixture needs about 5); PyYAML composes
#: recursively, so a document nested thousands deep would end in "maximum recursion depth".
def max_depth() -> int:
    """EVALPIPE_MAX_YAML_DEPTH, read when a loader starts and checked (`safety.env_settings`)."""
    return int(env_settings.value("EVALPIPE_MAX_YAML_DEPTH"))  # type: ignore[arg-type]


class StrictLoader(yaml.SafeLoader):
    """SafeLoader plus a duplicate-key check on every mapping and a nesting limit."""

    _depth = 0

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._max_depth = max_depth()

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                raise _TooDeep(
                    None,
                    None,
                    f"nested more than {self._max_depth} levels deep (the limit; EVALPIPE_MAX_YAML_DEPTH=... "
                    "raises it)",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader explains that itself below
                continue
            if first is not None:
                raise _DuplicateKey(
                    None,
                    None,
                    f"duplicate key {key!r} (first given at line {first}); the later value would "
                    "silently replace the first: merge them or rename one",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


#: Most nodes a document may stand for once its aliases are expanded. A fixture of 100k cases
#: is ~1M nodes; an "alias bomb" (aliases of aliases) stands for billions in a few lines.
MAX_EXPANDED_NODES = 5_000_000


def expanded_size(root: yaml.Node) -> int:
    """How many nodes `root` stands for with every alias expanded, counted without expanding
    (each node's size is computed once; an alias costs its target's size each time it is used)."""
    sizes: dict[int, int] = {}
    order: list[yaml.Node] = []
    stack: list[yaml.Node] = [root]
    while stack:  # post-order without recursion (deep documents must not hit the recursion limit)
        node = stack.pop()
        if id(node) in sizes:
            continue
        sizes[id(node)] = -1  # on the stack
        order.append(node)
        for child in _children(node):
            if id(child) not in sizes:
                stack.append(child)
    for node in reversed(order):
        total = 1 + sum(max(sizes.get(id(child), 0), 0) for child in _children(node))
        sizes[id(node)] = min(total, MAX_EXPANDED_NODES + 1)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def parse(text: str, path: Path | str) -> Any:
    """Parse YAML text strictly; any error is a YAMLFileError `path:line: ...`."""
    try:
        loader = StrictLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None
            if expanded_size(root) > MAX_EXPANDED_NODES:
                raise YAMLFileError(
                    f"{path}:{root.start_mark.line + 1}: its aliases (*name) expand to more than "
                    f"{MAX_EXPANDED_NODES:,} values (an alias bomb?): write the data out, or use fewer "
                    "nested aliases"
                )
            return loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        kind = "" if isinstance(exc, _DuplicateKey | _TooDeep) else "invalid YAML: "
        hint = " (YAML indents with spaces, not tabs)" if "'\\t'" in problem else ""
        raise YAMLFileError(f"{path}{line}: {kind}{problem}{hint}") from None
    except yaml.reader.ReaderError as exc:  # a control character YAML does not allow (found by fuzzing)
        line = text[: exc.position].count("\n") + 1
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        raise YAMLFileError(
            f"{path}:{line}: invalid YAML: the control character #x{code:04x} is not allowed: remove it"
        ) from None
    except yaml.YAMLError as exc:
        raise YAMLFileError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:  # a nesting the composer's limit did not see (e.g. in flow style)
        raise YAMLFileError(f"{path}: nested too deeply to read (more than {max_depth()} levels)") from None


def load_file(path: Path) -> tuple[Any, str]:
    """(data, text) of a YAML file; the text is kept so callers can point at lines."""
    text = read_text(path)
    return parse(text, path), text
