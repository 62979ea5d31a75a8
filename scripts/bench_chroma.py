"""ranker=chroma beside the in-process dense ranker on a documents fixture: agreement and cost.

Why: issue 31 asks that the same embeddings searched in process and through Chroma give the same
document hits "up to ties and Chroma's approximate search; say how close, measured", and for the
time to build and search the collection beside the in-process ranker. Both rankers here share one
encoder, template and embedding cache, so the only difference is the search: exact cosine top-K
over a numpy matrix versus Chroma's HNSW index.

    python scripts/bench_chroma.py                          # fixture=flask, chunker=tokens 256/0, K=5
    python scripts/bench_chroma.py --size 128 --overlap 64 --k 10 --repeat 3

Printed: per-case agreement (same top-K IDs in the same order, same set, same document hit@K,
same first expected-document rank), document hit@K of each, and the seconds to embed (cold, or
0 from the embedding cache), to add the vectors to a fresh Chroma store, and to search every case
(batched, and one query at a time), median of --repeat rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from evalpipe.corpus.chunkers import TokenChunker  # noqa: E402
from evalpipe.inputs.fixture import load_fixture  # noqa: E402
from evalpipe.rankers.base import clear_built_cache  # noqa: E402
from evalpipe.rankers.dense.chroma import ChromaRanker  # noqa: E402
from evalpipe.rankers.dense.semantic import SemanticRanker  # noqa: E402


def first_doc_rank(hits, corpus, docs) -> int | None:
    for rank, hit in enumerate(hits, start=1):
        if corpus.get(hit.id).get("document_id") in docs:
            return rank
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixture", default=str(ROOT / "fixtures" / "flask.yaml"))
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--overlap", type=int, default=0)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cache-dir", default=".cache/evalpipe/embeddings")
    args = parser.parse_args()

    fixture = load_fixture(args.fixture, chunker=TokenChunker(args.size, args.overlap), chunk_cache=None)
    corpus, cases = fixture.corpus, fixture.cases
    queries = [c.query for c in cases]
    dense = SemanticRanker(template="{title}\n{text}", cache_dir=args.cache_dir, test_prior="off")
    t0 = time.perf_counter()
    dense.prepare(corpus)
    dense_prepare = time.perf_counter() - t0
    builds, batch_dense, batch_chroma, single_dense, single_chroma = [], [], [], [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as store:
            clear_built_cache()  # a fresh store each round: the build is measured, not reused
            chroma = ChromaRanker(cache_dir=args.cache_dir, store_dir=store)
            chroma.prepare(corpus)
            builds.append(chroma.stats()["build_seconds"])
            t0 = time.perf_counter()
            want = dense.search_batch(queries, args.k)
            batch_dense.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            got = chroma.search_batch(queries, args.k)
            batch_chroma.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for q in queries:
                dense.search(q, args.k)
            single_dense.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            for q in queries:
                chroma.search(q, args.k)
            single_chroma.append(time.perf_counter() - t0)
            stats = chroma.stats()
    same_order = sum([h.id for h in a] == [h.id for h in b] for a, b in zip(want, got, strict=True))
    same_set = sum({h.id for h in a} == {h.id for h in b} for a, b in zip(want, got, strict=True))
    answerable = [i for i, c in enumerate(cases) if c.expected_documents]
    hit_dense = [first_doc_rank(want[i], corpus, cases[i].expected_documents) for i in answerable]
    hit_chroma = [first_doc_rank(got[i], corpus, cases[i].expected_documents) for i in answerable]
    same_hit = sum((a is not None) == (b is not None) for a, b in zip(hit_dense, hit_chroma, strict=True))
    same_rank = sum(a == b for a, b in zip(hit_dense, hit_chroma, strict=True))
    n, m = len(cases), len(answerable)
    med = statistics.median
    print(
        f"fixture {fixture.name}: {n} cases ({m} answerable), {len(corpus)} chunks "
        f"(tokens size={args.size} overlap={args.overlap}), K={args.k}, {args.repeat} rounds"
    )
    print(f"  same top-{args.k} IDs in the same order: {same_order}/{n}; same set: {same_set}/{n}")
    print(f"  same document hit@{args.k}: {same_hit}/{m}; same first expected-document rank: {same_rank}/{m}")
    print(
        f"  document hit@{args.k}: in-process {sum(h is not None for h in hit_dense) / m:.4f}, "
        f"chroma {sum(h is not None for h in hit_chroma) / m:.4f} (over answerable cases)"
    )
    print(
        f"  in-process prepare (model load + embed or cache read): {dense_prepare:.2f} s; "
        f"embed {dense.stats()['embed_seconds']:.2f} s (cache hit: {dense.stats()['cache_hit']})"
    )
    print(
        f"  chroma build (add {stats['vectors']} x {stats['dimension']} vectors to a new store): "
        f"{med(builds):.3f} s; store {stats['store_bytes'] / 1e6:.2f} MB"
    )
    print(
        f"  search {n} queries batched: in-process {med(batch_dense):.3f} s, chroma {med(batch_chroma):.3f} s"
    )
    print(
        f"  search {n} queries one by one: in-process {med(single_dense):.3f} s, "
        f"chroma {med(single_chroma):.3f} s (query embedding included in both)"
    )


if __name__ == "__main__":
    main()
