"""Run names from overrides: `bm25 k1=0.9 b=0.4`, with Optuna's long floats cut to 4 significant digits.

Optuna suggests values such as 1.5073897086401147; as a run name that is noise, and the
exact value stays in the run's params. Only the name is rounded.
"""

from __future__ import annotations

import re

FLOAT = re.compile(r"(?<![\w.])-?\d+\.\d{5,}(?:[eE][-+]?\d+)?(?![\w.])")


def round_floats(text: str, digits: int = 4) -> str:
    """Every float literal with more than 4 decimals, written with `digits` significant digits."""
    return FLOAT.sub(lambda m: f"{float(m.group(0)):.{digits}g}", text)


def point_name(ranker_choice: str, overrides: list[str]) -> str:
    """The ranker's config name followed by the `ranker.*` overrides without the `ranker.` prefix."""
    swept = [o.split("ranker.", 1)[1] for o in overrides if o.startswith("ranker.")]
    return round_floats(" ".join([ranker_choice, *swept]))
