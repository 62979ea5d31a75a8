"""Every retriever kind on fixture=flask through the CLI, over the same vectors: RAG figures and latency.

The flask chunks (`chunker=tokens` 256 / 0) are embedded once with the tests' deterministic
hashed bag of words (`tests/rag_retrievers.py`: no model, so the figures isolate what each path
costs) and served as: an HTTP service (stdlib server in this process, exact search), a LangChain
InMemoryVectorStore retriever, a LlamaIndex VectorStoreIndex retriever, a FAISS flat index and a
FAISS HNSW index (M=4, efSearch=2, to show an index that loses answers). Each is one
`python -m evalpipe` run with `batch=false` (every query timed), on `fixture.split` (default test).

    python scripts/bench_retriever_kinds.py --split test --out /tmp/kinds
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import rag_retrievers as rr  # noqa: E402

KEYS = ["ranker.document_field=doc", "ranker.section_field=sec", "ranker.chunk_field=idx"]
FIGURES = [
    ("document hit@5", "rag/document_hit_rate"),
    ("section hit", "rag/section_hit_rate"),
    ("citation validity", "rag/citation_validity_rate"),
    ("misses", "rag/misses"),
    ("lost by index", "rag/misses_lost_by_index"),
    ("recall vs exact", "index/recall_vs_exact"),
    ("p50 ms", "cost/latency_p50_us"),
    ("p95 ms", "cost/latency_p95_us"),
]


def run(out: Path, name: str, split: str, args: list[str]) -> dict[str, float]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    db = out / "mlruns.db"
    command = [
        sys.executable,
        "-m",
        "evalpipe",
        f"hydra.run.dir={out / name}",
        f"tracking.uri=sqlite:///{db}",
        "plots=false",
        "progress=false",
        "fixture=flask",
        f"fixture.path={ROOT / 'fixtures' / 'flask.yaml'}",
        f"fixture.split={split}",
        "fixture.chunk_cache=null",
        "chunker=tokens",
        "chunker.size=256",
        "chunker.overlap=0",
        "ks=[1,5]",
        "batch=false",
        *args,
    ]
    proc = subprocess.run(command, cwd=out, capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    runs = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], order_by=["start_time DESC"]
    )
    return dict(runs[0].data.metrics)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="test")
    parser.add_argument("--out", type=Path, default=Path("/tmp/evalpipe-kinds"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    flat, records = rr.write_faiss_store(args.out / "flat", "flat")
    hnsw, hnsw_records = rr.write_faiss_store(args.out / "hnsw", "hnsw", m=4, ef_construction=8)
    faiss_args = ["ranker=faiss", "ranker.encoder=rag_retrievers.embed_texts", "ranker.id_field=rid", *KEYS]
    retriever = rr.Retriever(rr.cached_fixture())
    rows = {}
    with rr.serving(retriever) as url:
        kinds = {
            "http": [
                "ranker=http",
                f"ranker.url={url}/search",
                "ranker.body={q:'{query}',top_k:'{k}'}",
                "ranker.results_field=data.hits",
                "ranker.id_field=chunk_id",
                "ranker.score_field=similarity",
                "ranker.document_field=meta.doc",
                "ranker.section_field=meta.sec",
                "ranker.chunk_field=meta.idx",
            ],
            "langchain": [
                "ranker=langchain",
                "ranker.retriever=rag_retrievers.make_langchain_retriever",
                *KEYS,
            ],
            "llamaindex": [
                "ranker=llamaindex",
                "ranker.retriever=rag_retrievers.make_llamaindex_retriever",
                *KEYS,
            ],
            "faiss flat": [*faiss_args, f"ranker.index_path={flat}", f"ranker.records_path={records}"],
            "faiss hnsw M=4 ef=2": [
                *faiss_args,
                f"ranker.index_path={hnsw}",
                f"ranker.records_path={hnsw_records}",
                "ranker.ef_search=2",
            ],
        }
        for name, extra in kinds.items():
            rows[name] = run(args.out, name.replace(" ", "_").replace("=", ""), args.split, extra)
            print(name, {label: rows[name].get(key) for label, key in FIGURES}, flush=True)
    lines = [
        f"| fixture=flask split={args.split} | " + " | ".join(label for label, _ in FIGURES) + " |",
        "|---" * (len(FIGURES) + 1) + "|",
    ]
    for name, m in rows.items():
        cells = []
        for _label, key in FIGURES:
            value = m.get(key)
            if value is None:
                cells.append("")
            elif key.startswith("cost/"):
                cells.append(f"{value / 1000:.2f}")
            elif key.startswith("rag/misses"):
                cells.append(f"{value:.0f}")
            else:
                cells.append(f"{value:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    (args.out / "kinds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
