"""The `chunker` config group, applied to whatever documents fixture a run has.

`chunker=tokens chunker.size=128` is a top-level group, not a key of one fixture's YAML, so it
must reach the fixture loader however the fixture was given: `fixture=flask`, `fixture=docs`,
or `fixture.path=my_docs.yaml` on the default fixture config. Before this module the group was
read only through `conf/fixture/flask.yaml`'s own `chunker:` key: on any other documents fixture
it was dropped and the heading sections were measured instead, so a sweep over `chunker.size`
measured the same chunking at every point.

The rule, applied once to the resolved config before the fixture is built:

- the fixture's loader is `load_fixture` (YAML fixtures): the group becomes its `chunker`
  argument (a fixture config that sets its own `fixture.chunker` keeps it); `load_fixture`
  itself refuses a chunker for a fixture with a `corpus:` (nothing to cut);
- any other loader (BEIR, TREC) has no documents to cut: a chunker given is refused, one line.

The injected value is written into `resolved["fixture"]`, so the params (`fixture.chunker.size`)
and the config hash record the chunking that was measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalpipe.safety.errors import EvalpipeError

#: The `_target_` of the YAML fixture loader, the one loader with documents to cut.
YAML_LOADER = "evalpipe.inputs.fixture.load_fixture"


class ChunkerGroupError(EvalpipeError):
    """A `chunker=` that cannot apply to the fixture; the message says why and what to remove."""


def apply_chunker_group(resolved: dict[str, Any]) -> None:
    """Put the top-level `chunker` group into `resolved["fixture"]` (in place), or refuse it."""
    chunker = resolved.get("chunker")
    fixture = resolved.get("fixture")
    if chunker is None or not isinstance(fixture, dict):
        return
    if not isinstance(chunker, Mapping):
        raise ChunkerGroupError(
            f"chunker must be a chunker config (chunker=heading|tokens|recursive), got {chunker!r}"
        )
    target = str(fixture.get("_target_") or "")
    if target != YAML_LOADER:
        raise ChunkerGroupError(
            f"chunker={chunker.get('_target_', '?').rsplit('.', 1)[-1]} cuts the documents of a fixture "
            f"with 'documents:', but this fixture is loaded by {target or 'no loader'} (a prepared "
            "corpus with nothing to cut): remove chunker=..."
        )
    if fixture.get("chunker") is None:
        fixture["chunker"] = dict(chunker)
