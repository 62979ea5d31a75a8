"""A planted ranker for the hold-out tests: it has memorised the dev cases of its fixture.

`Memoriser(fixture, memorise=f)` answers the first `f` of the dev cases (by the split's own order)
with their expected IDs, and every other query with `k` units picked by a hash of the query, the
same whatever `memorise` is: perfect on dev when f = 1, chance on test for every f. A sweep over
`memorise` on the dev split therefore "finds" f = 1, and on the test split that point is exactly
the default (f = 0).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from evalpipe.inputs.fixture import load_fixture
from evalpipe.inputs.split import assign


class Memoriser:
    def __init__(self, fixture: str, memorise: float = 0.0, split_seed: int = 0, test_fraction: float = 0.5):
        fx = load_fixture(fixture)
        side = assign(fx.cases, split_seed, test_fraction)
        dev = [c for c in fx.cases if side[c.id] == "dev"]
        keep = dev[: round(len(dev) * float(memorise))]
        self.answers = {c.query: c.expected for c in keep}
        self.units = [u.id for u in fx.corpus]

    def search(self, query: str, k: int, constraints=None) -> list[str]:
        if query in self.answers:
            return list(self.answers[query])[:k]
        start = int(hashlib.sha256(query.encode()).hexdigest(), 16) % len(self.units)
        return [self.units[(start + 7 * i) % len(self.units)] for i in range(min(k, len(self.units)))]


def write_fixture(folder: Path, n_per_tier: int = 20, n_units: int = 50) -> Path:
    """Two tiers of `n_per_tier` cases, one relevant unit each among `n_units` (word<i> units)."""
    folder.mkdir(parents=True, exist_ok=True)
    units = [
        {"id": f"pkg/m{i}.py::word{i}", "kind": "function", "title": f"word{i}", "path": f"pkg/m{i}.py",
         "text": f"word{i} does thing {i}", "language": "python"}
        for i in range(n_units)
    ]  # fmt: skip
    (folder / "corpus.jsonl").write_text("".join(json.dumps(u) + "\n" for u in units))
    lines = ["name: planted", "corpus: corpus.jsonl", "cases:"]
    for t, tier in enumerate(("exact", "concept")):
        for j in range(n_per_tier):
            i = (t * n_per_tier + j) % n_units
            lines.append(
                f"  - {{id: {tier}-{j:03d}, tier: {tier}, query: 'word{i} thing {i}', "
                f"expected: ['pkg/m{i}.py::word{i}']}}"
            )
    (folder / "planted.yaml").write_text("\n".join(lines) + "\n")
    return folder / "planted.yaml"
