"""The module prior: a file's module unit ranks just below the best definition of its file.

A module unit holds what only the module has (its doc comment, imports, top-level
statements), but it shares the file's words with the definitions in it, and in a
one-definition-per-file layout (rxjs, many TypeScript and Go packages) it matches a
query about that definition as well as the definition does, or better: it then takes a
top-5 slot above the unit the developer wants. With `module_prior: below_definitions`
a module unit that scores above every definition of its own file is moved to just below
the best of them; a module whose file has no matching definition keeps its score, and
so does every module when the query asks for modules (a word of MODULE_WORDS: "which
module", "the file that", "package", "imports").

Like the test prior it works on scores, so fusion, `min_score` and the order agree;
`off` keeps the ranker's scores. Whether it is on by default was measured both ways on
the dev splits of every code fixture (docs/rankers.md, "Module units").
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from evalpipe.corpus import Corpus
from evalpipe.rankers.tokenize import TOKEN_PATTERN, identifier_pieces

#: `module_prior` values: `below_definitions` moves a module under its file's best definition.
MODULE_PRIOR_MODES = ("below_definitions", "off")
#: Unit kinds that are a whole file.
MODULE_KINDS = frozenset({"module", "file"})
#: Words that make a query ask for modules (then the prior is lifted).
MODULE_WORDS = frozenset(
    {
        "module",
        "modules",
        "file",
        "files",
        "package",
        "packages",
        "import",
        "imports",
        "imported",
        "importing",
    }
)


def check_mode(ranker: str, mode: object) -> str:
    """The validated `module_prior` value (`false`/`null` read as `off`, `true` as `below_definitions`)."""
    if mode is None or mode is False:
        return "off"
    if mode is True:
        return "below_definitions"
    if not isinstance(mode, str) or mode not in MODULE_PRIOR_MODES:
        raise ValueError(
            f"{ranker}: module_prior must be one of {', '.join(MODULE_PRIOR_MODES)}, got {mode!r}"
        )
    return mode


def asks_for_modules(query: str) -> bool:
    """True when a word of the query (or a piece of an identifier in it) is a module word."""
    return any(p in MODULE_WORDS for w in TOKEN_PATTERN.findall(query) for p in identifier_pieces(w))


class ModulePrior:
    """Which rows are module units and which file each row belongs to, built once per index."""

    def __init__(self, corpus: Corpus):
        groups: dict[str, int] = {}
        group = np.full(len(corpus), -1, dtype=np.int64)
        module = np.zeros(len(corpus), dtype=bool)
        for row, unit in enumerate(corpus):
            path = unit.path or (unit.id.split("::", 1)[0] if "::" in unit.id else "")
            if path:
                group[row] = groups.setdefault(path, len(groups))
            module[row] = unit.kind in MODULE_KINDS
        has_definition = np.zeros(len(groups) + 1, dtype=bool)  # + 1: rows with no path index -1
        defined = (~module) & (group >= 0)
        has_definition[group[defined]] = True
        #: module rows whose file also has definitions: the only rows the prior can move
        self.module_rows = np.flatnonzero(module & (group >= 0) & has_definition[group])
        self.group = group
        self.groups = len(groups)
        self.definition = defined
        self.module_set = frozenset(self.module_rows.tolist())
        self.any = bool(self.module_rows.size)

    def applies(self, query: str, mode: str) -> bool:
        return mode != "off" and self.any and not asks_for_modules(query)

    def demote(self, scores: np.ndarray, query: str, mode: str) -> np.ndarray:
        """`scores` with each module row above its file's best definition moved just below it."""
        if not self.applies(query, mode):
            return scores
        rows = self.module_rows
        module_scores = scores[rows]
        if not (module_scores > 0).any():
            return scores
        best = np.zeros(self.groups, dtype=np.float64)
        defined = self.definition & (scores > 0)
        np.maximum.at(best, self.group[defined], scores[defined])
        ceiling = best[self.group[rows]]
        moving = (module_scores > 0) & (ceiling > 0) & (module_scores >= ceiling)
        if not moving.any():
            return scores
        out = np.array(scores, dtype=np.float64, copy=True)
        out[rows[moving]] = np.nextafter(ceiling[moving], 0.0)
        return out

    def demote_fused(
        self, fused: Mapping[str, tuple[float, int]], index_of: Mapping[str, int], query: str, mode: str
    ) -> dict[str, tuple[float, int]]:
        """The same on a fused list (id -> (score, best rank)); a moved module also takes its
        definition's best rank, so the tie-break cannot lift it back above."""
        if not fused or not self.applies(query, mode):
            return dict(fused)
        best: dict[int, tuple[float, int]] = {}
        modules: list[tuple[str, int]] = []
        for uid, (score, rank) in fused.items():
            row = index_of.get(uid)
            if row is None or score <= 0 or self.group[row] < 0:
                continue
            g = int(self.group[row])
            if self.definition[row]:
                if g not in best or score > best[g][0]:
                    best[g] = (score, rank)
            elif row in self.module_set:
                modules.append((uid, g))
        out = dict(fused)
        for uid, g in modules:
            if g in best and out[uid][0] >= best[g][0]:
                score, rank = best[g]
                out[uid] = (float(np.nextafter(score, 0.0)), max(rank, out[uid][1]) + 1)
        return out
