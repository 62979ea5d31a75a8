#!/usr/bin/env python
"""Build a corpus JSONL from a source tree; same as `python -m evalpipe.corpus` (see --help)."""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from evalpipe.corpus.__main__ import main
except ModuleNotFoundError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from evalpipe.corpus.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
