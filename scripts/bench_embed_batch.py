"""Units/s of the semantic ranker's model per batch size, precision and thread count.

    python scripts/bench_embed_batch.py --corpus /tmp/gosrc_corpus/corpus.jsonl
    python scripts/bench_embed_batch.py --threads 1 --batches 32 --precisions bf16

What chose `batch_size: 32` (docs/performance.md, "The benchmark" under code search): a
sample of `--texts` unit texts (rendered with the shipped template), sorted longest first as
the ranker does, embedded batch by batch with sentence-transformers; every setting takes its
turn in each of `--rounds` rounds, and the fastest round is kept (drifting load hits all alike).
Run two copies with `--threads 1` side by side to measure one process per core.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/gosrc_corpus/corpus.jsonl"))
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--precisions", nargs="+", default=["bf16", "fp32"], choices=["bf16", "fp32"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from evalpipe.corpus import load_jsonl_corpus
    from evalpipe.rankers.dense.semantic import SemanticRanker, render_unit

    if args.threads:
        torch.set_num_threads(args.threads)
    corpus = load_jsonl_corpus(args.corpus)
    shipped = SemanticRanker(cache_dir=None)
    rng = np.random.default_rng(args.seed)
    picked = rng.choice(len(corpus), size=min(args.texts, len(corpus)), replace=False)
    texts = sorted((render_unit(corpus.units[i], shipped.template, shipped._fields) for i in picked), key=len)
    texts.reverse()
    model_dir = shipped._model_location()[0]
    fp32 = SentenceTransformer(model_dir, device="cpu")
    fp32.max_seq_length = shipped.max_seq_length
    models = {"fp32": fp32}
    if "bf16" in args.precisions:
        models["bf16"] = copy.deepcopy(fp32).to(torch.bfloat16)

    def run(model, batch: int) -> float:
        t0 = time.perf_counter()
        with torch.inference_mode():
            for lo in range(0, len(texts), batch):
                model.encode(texts[lo : lo + batch], batch_size=batch, convert_to_tensor=True)
        return time.perf_counter() - t0

    settings = [(p, b) for p in args.precisions for b in args.batches]
    for p, b in settings[:2]:  # oneDNN builds its kernels for each shape on first use
        run(models[p], b)
    best = {s: float("inf") for s in settings}
    for _ in range(args.rounds):
        for p, b in settings:
            best[(p, b)] = min(best[(p, b)], run(models[p], b))
    load = os.getloadavg()[0]
    print(
        f"| precision | batch | units/s | ({len(texts)} texts of {args.corpus.name}, "
        f"{torch.get_num_threads()} threads, load {load:.2f}) |"
    )
    print("|---|---|---|---|")
    for (p, b), seconds in best.items():
        print(f"| {p} | {b} | {len(texts) / seconds:.1f} | |")
    print(json.dumps({f"{p}:{b}": round(len(texts) / s, 1) for (p, b), s in best.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
