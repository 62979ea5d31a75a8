"""HNSW index parameters on fixture=flask: recall against exact search vs latency, and why each miss happened.

The flask fixture's chunks are embedded once (the semantic ranker's packaged MiniLM and its
embedding cache), put into FAISS HNSW indexes (inner product on normalised vectors = cosine) for
each `M`, written to files and read back as `ranker=faiss` reads them; every `efSearch` is then
measured on the same query vectors:

- `recall_vs_exact`: the share of the exact top k (numpy brute force over the same vectors) the
  index returned (what `index/recall_vs_exact` logs);
- document hit@k and the document misses split into lost by the index / by the embedding
  (`evalpipe.scoring.misses`, the same rule the run uses);
- the search time per query: one batched `index.search` over all queries on `--threads` OpenMP
  threads (1 by default), best of `--repeat`, divided by the number of queries (the query
  embedding is the same for every point and left out).

Writes points.csv, points.md and recall_latency.png (the Pareto front marked) to --out, and with
--tracking-uri logs them to MLflow as one run (metrics per point as steps, the plot as an artifact).

    python scripts/sweep_faiss_index.py --size 128 --overlap 64 --m 4 8 16 --ef 1 2 4 8 16 32 64
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from evalpipe.corpus.chunkers import TokenChunker  # noqa: E402
from evalpipe.inputs.fixture import load_fixture  # noqa: E402
from evalpipe.rankers.dense.semantic import SemanticRanker  # noqa: E402


def pareto(points: list[dict]) -> list[dict]:
    """Points no other point beats on both recall (higher) and latency (lower)."""
    front = []
    for p in points:
        dominated = any(
            q["recall_vs_exact"] >= p["recall_vs_exact"]
            and q["us_per_query"] <= p["us_per_query"]
            and (q["recall_vs_exact"] > p["recall_vs_exact"] or q["us_per_query"] < p["us_per_query"])
            for q in points
        )
        if not dominated:
            front.append(p)
    return front


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--overlap", type=int, default=64)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--m", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--ef", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--ef-construction", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument(
        "--threads", type=int, default=1, help="FAISS OpenMP threads (1: no thread wake-ups in the timing)"
    )
    parser.add_argument("--out", type=Path, default=Path("out/faiss_sweep"))
    parser.add_argument("--tracking-uri", default=None)
    args = parser.parse_args(argv)
    import faiss

    faiss.omp_set_num_threads(args.threads)
    fixture = load_fixture(
        ROOT / "fixtures" / "flask.yaml",
        name="flask",
        chunker=TokenChunker(size=args.size, overlap=args.overlap),
        chunk_cache=None,
    )
    dense = SemanticRanker(
        template="{title}\n{text}", cache_dir=".cache/evalpipe/embeddings", test_prior="off"
    )
    t0 = time.perf_counter()
    dense.prepare(fixture.corpus)
    vectors = np.ascontiguousarray(dense._embeddings, dtype=np.float32)
    queries = np.ascontiguousarray(dense._encode([c.query for c in fixture.cases]), dtype=np.float32)
    print(
        f"{len(vectors)} chunks, {len(queries)} queries embedded in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    docs = [u.get("document_id") for u in fixture.corpus.units]
    scores = queries @ vectors.T
    rows = np.arange(len(vectors))
    exact = [np.lexsort((rows, -s))[: args.k] for s in scores]
    expected = [set(c.expected_documents) for c in fixture.cases]
    points = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in args.m:
            built = faiss.IndexHNSWFlat(vectors.shape[1], m, faiss.METRIC_INNER_PRODUCT)
            built.hnsw.efConstruction = args.ef_construction
            built.add(vectors)
            path = Path(tmp) / f"hnsw_m{m}.faiss"
            faiss.write_index(built, str(path))
            index = faiss.read_index(str(path))  # as ranker=faiss reads the store
            for ef in args.ef:
                faiss.ParameterSpace().set_index_parameter(index, "efSearch", ef)
                best = float("inf")
                for _ in range(args.repeat):
                    start = time.perf_counter()
                    _, labels = index.search(queries, args.k)
                    best = min(best, time.perf_counter() - start)
                overlap = sum(
                    len(set(e.tolist()) & set(lab.tolist())) for e, lab in zip(exact, labels, strict=True)
                )
                hit = by_index = by_embedding = 0
                for want, lab, ex in zip(expected, labels, exact, strict=True):
                    if not want:
                        continue
                    if {docs[i] for i in lab if i >= 0} & want:
                        hit += 1
                    elif {docs[i] for i in ex} & want:
                        by_index += 1
                    else:
                        by_embedding += 1
                points.append(
                    {
                        "M": m,
                        "ef_search": ef,
                        "recall_vs_exact": overlap / (args.k * len(queries)),
                        "document_hit": hit / len(queries),
                        "misses": by_index + by_embedding,
                        "lost_by_index": by_index,
                        "lost_by_embedding": by_embedding,
                        "us_per_query": best / len(queries) * 1e6,
                    }
                )
                print(points[-1], flush=True)
    exact_hits = sum(
        bool({docs[i] for i in ex} & want) for ex, want in zip(exact, expected, strict=True) if want
    )
    front = pareto(points)
    for p in points:
        p["pareto"] = p in front
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "points.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(points[0]))
        writer.writeheader()
        writer.writerows(points)
    lines = [
        f"fixture=flask, chunker=tokens {args.size}/{args.overlap}: {len(vectors)} chunks, "
        f"{len(queries)} cases; "
        f"k={args.k}; exact search: document hit {exact_hits / len(queries):.3f}",
        "",
        "| M | efSearch | recall vs exact | document hit@k | misses | lost by index | lost by embedding "
        "| us/query | Pareto |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        lines.append(
            f"| {p['M']} | {p['ef_search']} | {p['recall_vs_exact']:.3f} | {p['document_hit']:.3f} "
            f"| {p['misses']} | {p['lost_by_index']} | {p['lost_by_embedding']} | {p['us_per_query']:.1f} "
            f"| {'*' if p['pareto'] else ''} |"
        )
    (args.out / "points.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    plot = plot_front(points, front, args.out / "recall_latency.png")
    if args.tracking_uri:
        log_mlflow(args, points, plot)
    return 0


def plot_front(points: list[dict], front: list[dict], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for m in sorted({p["M"] for p in points}):
        mine = [p for p in points if p["M"] == m]
        ax.plot([p["us_per_query"] for p in mine], [p["recall_vs_exact"] for p in mine], "o-", label=f"M={m}")
        for p in mine:
            ax.annotate(str(p["ef_search"]), (p["us_per_query"], p["recall_vs_exact"]), fontsize=7)
    front = sorted(front, key=lambda p: p["us_per_query"])
    ax.plot(
        [p["us_per_query"] for p in front],
        [p["recall_vs_exact"] for p in front],
        "k--",
        lw=1,
        label="Pareto front",
    )
    ax.set_xscale("log")
    ax.set_xlabel("search time per query (us, batched, best of repeats)")
    ax.set_ylabel("recall vs exact search @k")
    ax.set_title("FAISS HNSW on fixture=flask (labels: efSearch)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def log_mlflow(args: argparse.Namespace, points: list[dict], plot: Path) -> None:
    import mlflow

    mlflow.set_tracking_uri(args.tracking_uri)
    mlflow.set_experiment("faiss-index-sweep")
    with mlflow.start_run(run_name=f"hnsw flask tokens {args.size}/{args.overlap}"):
        mlflow.log_params({"size": args.size, "overlap": args.overlap, "k": args.k, "M": str(args.m)})
        for step, p in enumerate(points):
            mlflow.log_metrics({k: float(v) for k, v in p.items()}, step=step)
        mlflow.log_artifact(str(plot))
        mlflow.log_artifact(str(args.out / "points.md"))


if __name__ == "__main__":
    raise SystemExit(main())
