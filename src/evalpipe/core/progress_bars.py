"""Whether progress bars may be drawn in this process: the run's `progress` setting, once.

`progress=false` is read at the entry (`evaluation.preflight.Checked.progress`) and said here by
`evaluation.stages.check` before the ranker prepares, so code far below the config (the semantic
ranker's embedding bar, the model loader's own tqdm bars from transformers / huggingface_hub)
stays quiet too, without the setting passed through every constructor.
"""

from __future__ import annotations

_allowed = True


def allow(enabled: bool) -> None:
    """Set by each run from its checked `progress` value (a sweep's points each set their own)."""
    global _allowed
    _allowed = bool(enabled)


def allowed() -> bool:
    return _allowed
