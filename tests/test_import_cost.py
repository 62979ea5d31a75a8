"""What a BM25 run imports: bm25s without numba (its optional backend is never used)."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_bm25_imports_no_numba_and_numba_still_works_afterwards():
    code = (
        "import sys\n"
        "from evalpipe.rankers.lexical.bm25 import BM25Ranker\n"
        "from evalpipe.core import Unit\n"
        "from evalpipe.corpus import Corpus\n"
        "r = BM25Ranker(); r.prepare(Corpus([Unit('a', 'doc', text='merge settings')], name='c'))\n"
        "print('numba' in sys.modules, [h.id for h in r.search('merge', 1)])\n"
        "import numba, bm25s\n"
        "print(bm25s.NUMBA_AVAILABLE, bool(numba.__version__))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "MLFLOW_DISABLE_TELEMETRY": "true"},
        timeout=120,
    )
    assert out.stdout.split("\n")[:2] == ["False ['a']", "False True"], out.stderr
