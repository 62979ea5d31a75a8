"""Every speed ratio of issues #13 and #21 in one run, with the load average beside each.

    python scripts/bench_perf.py                          # every section but dense, current code
    python scripts/bench_perf.py --baseline-src /path/to/old/src   # also time an older checkout: before/after
    python scripts/bench_perf.py --sections scoring --sizes 10000 100000
    python scripts/bench_perf.py --sections dense                 # engines/precisions on 320 SciFact docs
    python scripts/bench_perf.py --sections dense --dense-docs 0 --full-ndcg torch:fp32 torch:bf16

Sections (each prints a table of wall times and ratios):

* run:     `python -m evalpipe +bench=scifact ranker=bm25_prose` vs a bare bm25s script doing the same
           tokenising, indexing and per-query retrieval; and the gold BM25 run's wall time.
* scoring: `metrics.evaluate` and `scoring.score_results` vs pytrec_eval and ranx on synthetic runs
           (N queries x 100 results, 1-5 judged docs each, shared ID strings as a real run has).
* sweep:   a sequential 8-point BM25 sweep on gold vs one gold run (warm store, `force=true`).
* reuse:   a fully reused 12-point sweep (`-m +sweep=bm25_grid` run a second time) and a reused
           1-point one: the total, per point, and per extra point.
* imports: what a gold run's own process imports (`python -X importtime`), checked against a
           budget: no MLflow, SQLAlchemy, pandas or matplotlib in the run's process (the upload
           worker imports MLflow), and the total under `--import-budget-ms`; the worker's imports.
* dense_repo: issue #34: the first `code_search` run on a ~15k-unit Go corpus (`--go-corpus`, cold
           caches) vs `--baseline-src` on `--go-cold-corpus`, then fully warm re-runs vs re-runs
           after 1% of the units changed.
* dense:   (alias int8) documents/s embedding a SciFact sample with the semantic ranker per engine and
           precision (torch fp32/bf16/int8/int8_all, onnx fp32/int8), the ratio to fp32 torch, cosine
           to fp32 and how many docs exceed 128/256/512 tokens; `--full-ndcg` adds nDCG@10 on all of
           SciFact through the CLI's code (minutes per cold variant, cached after).

CLI timings are subprocesses (interpreter start-up and exit included, as a user waits for them),
interleaved across variants and repeated (`--repeat`); the median is reported. The machine may be
shared and noisy: read the ratios, not the absolute times, and the load average beside them.
Not part of the test suite (it takes minutes); SciFact is read from ../shared/datasets/scifact.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: ../shared beside the checkout; a git worktree under <repo>/../wt/<name> looks one more level up.
SCIFACT = (
    next(
        (
            p
            for p in (ROOT.parent / "shared", ROOT.parents[1] / "shared")
            if (p / "datasets" / "scifact").is_dir()
        ),
        ROOT.parent / "shared",
    )
    / "datasets"
    / "scifact"
)

BARE_BM25S = r"""
import csv, gzip, json, sys
import bm25s, numpy as np, Stemmer
root = sys.argv[1]
docs = [json.loads(l) for l in gzip.open(f"{root}/corpus.jsonl.gz", "rt", encoding="utf-8")]
queries = {q["_id"]: q["text"] for q in map(json.loads, gzip.open(f"{root}/queries.jsonl.gz", "rt"))}
with open(f"{root}/qrels/test.tsv", newline="") as fh:
    rows = list(csv.reader(fh, delimiter="\t"))[1:]
judged = list(dict.fromkeys(r[0] for r in rows))
stemmer = Stemmer.Stemmer("english")
tokens = bm25s.tokenize([d["title"] + " " + d["text"] for d in docs], stopwords="en", stemmer=stemmer,
                        show_progress=False)
model = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
model.index(tokens, show_progress=False)
for qid in judged:
    ids = bm25s.tokenize([queries[qid]], stopwords="en", stemmer=stemmer, show_progress=False,
                         return_ids=False)[0]
    ids = [model.vocab_dict[t] for t in ids if t in model.vocab_dict]
    scores = model.get_scores_from_ids(ids) if ids else np.zeros(len(docs))
    top = np.argsort(-scores, kind="stable")[:100]
"""


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}"


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    print(f"\n### {title}\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    sys.stdout.flush()


def env_for(src: Path | None) -> dict[str, str]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(src or ROOT / "src"), str(ROOT / "tests")])
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def wall(cmd: list[str], env: dict[str, str], cwd: Path = ROOT) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
        raise SystemExit(f"bench_perf: command failed ({proc.returncode}): {' '.join(cmd)}\n{tail}")
    return seconds


def evalpipe_cmd(work: Path, *args: str) -> list[str]:
    """`python -m evalpipe` into `work` (store, outputs); Hydra wants `-m` before the overrides."""
    flags = [a for a in args if a == "-m"]
    args = tuple(a for a in args if a != "-m")
    uri = f"sqlite:///{work / 'mlflow.db'}"
    return [
        sys.executable,
        "-m",
        "evalpipe",
        *flags,
        f"tracking.uri={uri}",
        f"hydra.run.dir={work / 'out'}",
        f"hydra.sweep.dir={work / 'multirun'}",
        "progress=false",
        *args,
    ]


def interleaved(variants: dict[str, tuple[list[str], dict[str, str]]], repeat: int) -> dict[str, float]:
    """Median wall time of each command, run round-robin so load drifts hit all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeat):
        for name, (cmd, env) in variants.items():
            times[name].append(wall(cmd, env))
    return {name: statistics.median(t) for name, t in times.items()}


def codebases(args: argparse.Namespace) -> dict[str, Path | None]:
    out: dict[str, Path | None] = {"now": None}
    if args.baseline_src:
        out["before"] = Path(args.baseline_src).resolve()
    return out


# --- sections ------------------------------------------------------------------------------


def section_run(args: argparse.Namespace, tmp: Path) -> None:
    if not args.scifact.is_dir():
        print(f"\n(run: {args.scifact} not found, skipped)")
        return
    variants: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare bm25s": ([sys.executable, "-c", BARE_BM25S, str(args.scifact)], env_for(None))
    }
    for label, src in codebases(args).items():
        work = tmp / f"run-{label}"
        env = env_for(src)
        wall(evalpipe_cmd(work, "run_name=warmup"), env)  # creates the store: not what a run costs
        scifact = evalpipe_cmd(work, "+bench=scifact", f"fixture.path={args.scifact}", "ranker=bm25_prose")
        variants[f"scifact bm25 ({label})"] = (scifact, env)
        variants[f"gold bm25 ({label})"] = (evalpipe_cmd(work), env)
        if label == "now":  # what the caches save: no token cache; then no cache of any kind
            variants["scifact bm25, token cache off (now)"] = ([*scifact, "ranker.cache_dir=null"], env)
            cold = " ".join(shlex.quote(a) for a in [*scifact, "ranker.cache_dir=null"])
            fresh = "XDG_CACHE_HOME=$d TIKTOKEN_CACHE_DIR=$d/t"
            script = f'd=$(mktemp -d); {fresh} {cold}; rc=$?; rm -rf "$d"; exit $rc'
            variants["scifact bm25, every cache cold (now)"] = (["sh", "-c", script], env)
    before = load()
    med = interleaved(variants, args.repeat)
    bare = med["bare bm25s"]
    rows = [
        [name, f"{t:.2f}", f"{t / bare:.2f}x" if "scifact" in name or name == "bare bm25s" else ""]
        for name, t in med.items()
    ]
    rows = [r for r in rows if "cold" not in r[0] and "off" not in r[0]] + [
        r for r in rows if "cold" in r[0] or "off" in r[0]
    ]
    if "gold bm25 (before)" in med:
        rows.append(
            ["gold bm25: now / before", "", f"{med['gold bm25 (now)'] / med['gold bm25 (before)']:.2f}x"]
        )
        ratio = med["scifact bm25 (now)"] / med["scifact bm25 (before)"]
        rows.append(["scifact bm25: now / before", "", f"{ratio:.2f}x"])
    table(
        f"Whole run vs bare bm25s (median of {args.repeat}; {before} -> {load()})",
        ["command", "wall s", "vs bare bm25s"],
        rows,
    )


SCORING_WORKER = r"""
import json, sys, time
import numpy as np
from evalpipe.scoring import metrics
from evalpipe.core import Hit
from evalpipe.scoring.results import CaseResult
from evalpipe.scoring.run import score_results

n, which = int(sys.argv[1]), sys.argv[2].split(",")
rng = np.random.default_rng(0)
names = [f"doc{j}" for j in range(500_000)]
picks = rng.integers(0, len(names), size=(n, 100))
ranked, qrels = [], []
for i in range(n):
    ids = [names[j] for j in picks[i]]
    ranked.append(ids)
    q = {}
    for t in range(int(rng.integers(1, 6))):
        q[ids[int(rng.integers(0, 100))] if t % 2 == 0 else names[int(rng.integers(0, len(names)))]] = int(
            rng.integers(1, 3))
    qrels.append(q)
ks = [1, 5, 10, 20, 100]
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
out = {}
results = [CaseResult(f"q{i}", "t", "q", qrels[i],
                      tuple(Hit(d, float(100 - r)) for r, d in enumerate(ids)), 100, 10)
           for i, ids in enumerate(ranked)] if "score_results" in which else []
run = {f"q{i}": {d: float(100 - r) for r, d in enumerate(ids)} for i, ids in enumerate(ranked)}
qr = {f"q{i}": q for i, q in enumerate(qrels)}
if "pytrec_eval" in which:
    import pytrec_eval
    cut = ",".join(map(str, ks))
    measures = {f"ndcg_cut.{cut}", f"map_cut.{cut}", f"P.{cut}", f"recall.{cut}", f"success.{cut}"}
    measures.add("recip_rank")
times = {name: [] for name in ("evaluate", "score_results", "pytrec_eval") if name in which}
for _ in range(reps):  # interleaved, so a load spike hits every engine of the round alike
    if "evaluate" in which:
        t = time.perf_counter()
        metrics.evaluate(ranked, qrels, ks)
        times["evaluate"].append(time.perf_counter() - t)
    if "score_results" in which:
        t = time.perf_counter()
        score_results(results, ks)
        times["score_results"].append(time.perf_counter() - t)
    if "pytrec_eval" in which:
        t = time.perf_counter()
        pytrec_eval.RelevanceEvaluator(qr, measures).evaluate(run)
        times["pytrec_eval"].append(time.perf_counter() - t)
for name, ts in times.items():
    out[name] = sorted(ts)[len(ts) // 2]
if "evaluate" in times and "score_results" in times:  # the paired ratio, median over rounds
    pairs = sorted(b / a for a, b in zip(times["evaluate"], times["score_results"]))
    out["score_results/evaluate"] = pairs[len(pairs) // 2]
if "evaluate" in times and "pytrec_eval" in times:
    pairs = sorted(a / b for a, b in zip(times["evaluate"], times["pytrec_eval"]))
    out["evaluate/pytrec_eval"] = pairs[len(pairs) // 2]
del results
if "ranx" in which:
    from ranx import Qrels, Run, evaluate
    names_ = [f"{m}@{k}" for k in ks for m in ("ndcg", "map", "precision", "recall", "hit_rate", "mrr")]
    # numba JIT warm-up, not timed
    evaluate(Qrels.from_dict({"a": {"x": 1}}), Run.from_dict({"a": {"x": 1.0, "y": 0.5}}), names_)
    t = time.perf_counter()
    evaluate(Qrels.from_dict(qr), Run.from_dict(run), names_)
    out["ranx"] = time.perf_counter() - t
print(json.dumps(out))
"""


def section_scoring(args: argparse.Namespace, tmp: Path) -> None:
    rows = []
    before = load()
    for n in args.sizes:
        got: dict[str, float] = {}
        for label, src in codebases(args).items():
            which = "evaluate,score_results" + (",pytrec_eval,ranx" if label == "now" else "")
            proc = subprocess.run(
                [sys.executable, "-c", SCORING_WORKER, str(n), which, str(args.repeat)],
                env=env_for(src),
                capture_output=True,
                text=True,
                timeout=3600,
            )
            if proc.returncode != 0:
                raise SystemExit(f"bench_perf: scoring worker failed:\n{proc.stderr[-2000:]}")
            for name, seconds in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                got[name if label == "now" else f"{name} (before)"] = seconds
        trec, ranx = got["pytrec_eval"], got["ranx"]
        for name in ("evaluate", "score_results", "evaluate (before)", "score_results (before)"):
            if name in got:
                t = got[name]
                rows.append(
                    [
                        f"{n:,}",
                        name,
                        f"{t:.2f}",
                        f"{t / trec:.2f}x",
                        f"{t / ranx:.2f}x",
                        f"{t / got['evaluate']:.2f}x",
                    ]
                )
        rows.append([f"{n:,}", "pytrec_eval", f"{trec:.2f}", "1.00x", f"{trec / ranx:.2f}x", ""])
        rows.append([f"{n:,}", "ranx (dicts in)", f"{ranx:.2f}", f"{ranx / trec:.2f}x", "1.00x", ""])
        # the targets, as medians of the per-round ratios (each round times the engines back to back)
        rows.append(
            [
                f"{n:,}",
                "**score_results / evaluate, paired** (target <= 1.2x)",
                "",
                "",
                "",
                f"**{got['score_results/evaluate']:.2f}x**",
            ]
        )
        rows.append(
            [
                f"{n:,}",
                "**evaluate / pytrec_eval, paired** (target <= 0.4x)",
                "",
                f"**{got['evaluate/pytrec_eval']:.2f}x**",
                "",
                "",
            ]
        )
    table(
        f"Scoring N queries x 100 results, ks 1,5,10,20,100, median of {args.repeat} interleaved rounds "
        f"({before} -> {load()})",
        ["queries", "engine", "s", "vs pytrec_eval", "vs ranx", "vs evaluate"],
        rows,
    )


def section_sweep(args: argparse.Namespace, tmp: Path) -> None:
    variants = {}
    for label, src in codebases(args).items():
        work = tmp / f"sweep-{label}"
        env = env_for(src)
        wall(evalpipe_cmd(work, "run_name=warmup"), env)
        variants[f"one gold run ({label})"] = (evalpipe_cmd(work, "force=true"), env)
        sweep = evalpipe_cmd(work, "-m", "ranker.k1=0.9,1.2,1.5,1.8", "ranker.b=0.4,0.75", "force=true")
        variants[f"8-point sweep ({label})"] = (sweep, env)
    before = load()
    med = interleaved(variants, args.repeat)
    rows = []
    for label in codebases(args):
        one, eight = med[f"one gold run ({label})"], med[f"8-point sweep ({label})"]
        rows.append([label, f"{one:.2f}", f"{eight:.2f}", f"{eight / one:.2f}x"])
    table(
        f"Sequential 8-point BM25 sweep on gold vs one run (median of {args.repeat}; {before} -> {load()})",
        ["code", "one run s", "sweep s", "sweep / one run"],
        rows,
    )


#: Engine/precision variants of the dense section, "engine:quantize" (fp32 torch first: the reference).
DENSE_VARIANTS = ["torch:fp32", "torch:bf16", "onnx:fp32", "onnx:int8", "torch:int8", "torch:int8_all"]


def parse_variant(variant: str) -> tuple[str, str | None]:
    engine, _, quant = variant.partition(":")
    return engine, None if quant in ("", "fp32", "null") else quant


def scifact_sample(scifact: Path, n: int) -> list:
    """Every 10th SciFact document up to `n` (spread over the file, not its first topics)."""
    from evalpipe.core import Unit

    units = []
    with gzip.open(scifact / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i % 10 == 0:
                d = json.loads(line)
                units.append(Unit(d["_id"], "document", d.get("title", ""), d.get("text", "")))
                if len(units) >= n:
                    break
    return units


REUSED_POINT = ["ranker.k1=0.9", "ranker.b=0.4", "ranker.method=lucene"]  # one point of bm25_grid


def section_reuse(args: argparse.Namespace, tmp: Path) -> None:
    variants = {}
    for label, src in codebases(args).items():
        work = tmp / f"reuse-{label}"
        env = env_for(src)
        wall(evalpipe_cmd(work, "-m", "+sweep=bm25_grid"), env)  # measures the 12 points once
        variants[f"12 ({label})"] = (evalpipe_cmd(work, "-m", "+sweep=bm25_grid"), env)
        variants[f"1 ({label})"] = (evalpipe_cmd(work, "-m", "+sweep=bm25_grid", *REUSED_POINT), env)
    before = load()
    med = interleaved(variants, args.repeat)
    rows = []
    for label in codebases(args):
        twelve, one = med[f"12 ({label})"], med[f"1 ({label})"]
        rows.append(
            [label, f"{twelve:.2f}", f"{one:.2f}", f"{twelve / 12:.3f}", f"{(twelve - one) / 11:.3f}"]
        )
    table(
        f"Fully reused `-m +sweep=bm25_grid` (median of {args.repeat}; {before} -> {load()})",
        ["code", "12 points s", "1 point s", "per point s (12-point / 12)", "per extra point s"],
        rows,
    )


#: Modules a single run's own process must not import (the upload worker does what needs them).
IMPORT_FORBIDDEN = ("mlflow", "sqlalchemy", "alembic", "pandas", "matplotlib", "torch")


def import_profile(stderr: str) -> tuple[float, dict[str, float]]:
    """(total ms, {top-level module: cumulative ms}) from `python -X importtime` output."""
    top: dict[str, float] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit() or name.startswith("  "):
            continue  # the header, or an import nested in another
        top[name.strip()] = top.get(name.strip(), 0.0) + int(cumulative) / 1000.0
    return sum(top.values()), top


def imported(stderr: str) -> set[str]:
    return {
        line.split("|", 2)[2].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and line.count("|") >= 2
    }


def section_imports(args: argparse.Namespace, tmp: Path) -> None:
    rows = []
    before = load()
    for label, src in codebases(args).items():
        work = tmp / f"imports-{label}"
        env = env_for(src)
        wall(evalpipe_cmd(work, "run_name=warmup"), env)
        totals, forbidden, tops = [], set(), {}
        for _ in range(args.repeat):
            cmd = evalpipe_cmd(work)
            proc = subprocess.run(
                [cmd[0], "-X", "importtime", *cmd[1:]], cwd=ROOT, env=env, capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise SystemExit(f"bench_perf: gold run failed:\n{proc.stderr[-2000:]}")
            total, top = import_profile(proc.stderr)
            totals.append(total)
            tops = top
            forbidden |= imported(proc.stderr) & set(IMPORT_FORBIDDEN)
        worker = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "evalpipe.tracking.upload_worker"],
            cwd=ROOT, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        worker_ms = import_profile(worker.stderr)[0] if worker.returncode == 0 else float("nan")
        total = statistics.median(totals)
        ok = not forbidden and total <= args.import_budget_ms
        heavy = ", ".join(f"{n} {ms:.0f}" for n, ms in sorted(tops.items(), key=lambda x: -x[1])[:5])
        rows.append(
            [
                label,
                f"{total:.0f}",
                "PASS" if ok else "FAIL",
                ", ".join(sorted(forbidden)) or "none",
                f"{worker_ms:.0f}" if label == "now" else "-",
                heavy,
            ]
        )
    table(
        f"Imports of a gold run's own process, budget {args.import_budget_ms:.0f} ms "
        f"(median of {args.repeat}; {before} -> {load()})",
        ["code", "import ms", "budget", "forbidden imported", "upload worker import ms", "heaviest (ms)"],
        rows,
    )


def section_dense(args: argparse.Namespace, tmp: Path) -> None:
    """Corpus embedding per engine/precision: units/s, speed vs fp32 torch, cosine to fp32.

    Every variant embeds the same length-sorted batches; batch by batch the variants take
    turns (rotating which goes first), so load drift on a shared machine hits all alike, and
    each variant's time is the sum of its per-batch medians over `--repeat` rounds."""
    sys.path.insert(0, str(ROOT / "src"))
    import numpy as np

    from evalpipe.rankers.base import RankerUnavailable
    from evalpipe.rankers.dense.semantic import SemanticRanker, render_unit

    if not args.scifact.is_dir():
        print(f"\n(dense: {args.scifact} not found, skipped)")
        return
    if args.dense_docs > 0:
        units = scifact_sample(args.scifact, args.dense_docs)
        rankers: dict[str, SemanticRanker] = {}
        skipped: list[str] = []
        for variant in ["torch:fp32", *[v for v in args.dense_variants if v != "torch:fp32"]]:
            engine, quant = parse_variant(variant)
            r = SemanticRanker(
                cache_dir=str(tmp / "dense-cache"),
                quantize=quant,
                engine=engine,
                max_seq_length=args.max_seq_length,
            )
            location, _, fingerprint = r._model_location()
            try:
                r._encoder = r._load_encoder(location, fingerprint)
            except RankerUnavailable as exc:
                skipped.append(f"{variant}: {exc}")
                continue
            r._encoder.max_seq_length = r.max_seq_length
            rankers[variant] = r
        base = rankers["torch:fp32"]
        texts = [render_unit(u, base.template, base._fields) for u in units]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches = [
            [texts[i] for i in order[lo : lo + base.batch_size]]
            for lo in range(0, len(order), base.batch_size)
        ]
        tokenizer = base._encoder.tokenizer
        lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=True)["input_ids"]]
        before = load()
        names = list(rankers)
        per_batch: dict[str, list[list[float]]] = {v: [[] for _ in batches] for v in names}
        vectors: dict[str, list[np.ndarray]] = {v: [] for v in names}
        for rep in range(args.repeat):
            for n, batch in enumerate(batches):
                turn = (n + rep) % len(names)
                for v in names[turn:] + names[:turn]:
                    start = time.perf_counter()
                    encoded = rankers[v]._encode_batch(batch)
                    per_batch[v][n].append(time.perf_counter() - start)
                    if rep == 0:
                        vectors[v].append(encoded)
        after = load()
        seconds = {v: sum(statistics.median(t) for t in per_batch[v]) for v in names}
        ref = np.concatenate(vectors["torch:fp32"])
        rows = []
        for v in names:
            got = np.concatenate(vectors[v])
            cos = (ref * got).sum(axis=1) / (np.linalg.norm(ref, axis=1) * np.linalg.norm(got, axis=1))
            rows.append(
                [
                    v,
                    f"{len(texts) / seconds[v]:.1f}",
                    f"{seconds['torch:fp32'] / seconds[v]:.2f}x",
                    f"{cos.mean():.5f}",
                    f"{cos.min():.5f}",
                ]
            )
        over = {m: sum(x > m for x in lengths) for m in (128, 256, 512)}
        table(
            f"Embedding {len(texts)} SciFact docs (max_seq_length {args.max_seq_length}, batch "
            f"{base.batch_size}, {len(batches)} batches x {args.repeat} rounds interleaved, "
            f"per-batch medians; {before} -> {after})",
            ["engine:quantize", "docs/s", "vs torch:fp32", "cosine mean", "cosine min"],
            rows,
        )
        print(
            f"\ntokens per doc (with special tokens): median {statistics.median(lengths):.0f}, "
            + ", ".join(f"> {m}: {c} of {len(lengths)}" for m, c in over.items())
        )
        for line in skipped:
            print(f"(skipped {line})")
    if args.full_ndcg is not None:
        full_ndcg(args.scifact, args.full_ndcg, args.max_seq_length)


#: Where `--sections dense_repo` looks for the ~15k-unit Go corpus (README: how to build it).
GO_CORPUS = Path("/tmp/gosrc_corpus/corpus.jsonl")
GO_SUBSET = Path("/tmp/gosrc_corpus/subset.jsonl")
GO_BUILD = (
    "python -m evalpipe.corpus /usr/share/go-1.19/src --include 'net/**/*.go' 'crypto/**/*.go' "
    "'encoding/**/*.go' 'os/**/*.go' 'io/**/*.go' --exclude testdata vendor -o /tmp/gosrc_corpus/corpus.jsonl"
)


def go_fixture(corpus: Path, out: Path, cases: int = 40) -> Path:
    """A fixture of exact-name cases over `corpus`: every n-th non-test function or method with a
    name no other unit has (the timing needs real searches, not a quality figure)."""
    units = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    names: dict[str, int] = {}
    for u in units:
        names[str(u.get("name") or "")] = names.get(str(u.get("name") or ""), 0) + 1
    picked = [
        u
        for u in units
        if u["kind"] in ("function", "method")
        and not u["path"].endswith("_test.go")
        and names[str(u.get("name") or "")] == 1
    ]
    step = max(1, len(picked) // cases)
    rows = [
        {"id": f"go-{i:03d}", "tier": "exact", "query": u["name"], "expected": [u["id"]]}
        for i, u in enumerate(picked[::step][:cases])
    ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"name": "gosrc", "version": 1, "corpus": str(corpus), "cases": rows}), encoding="utf-8"
    )
    return out


def edited_corpus(corpus: Path, out: Path, fraction: float, round_: int) -> int:
    """A copy of `corpus` with `fraction` of its units' text edited (a line appended), a different
    set each round; returns how many units changed."""
    lines = corpus.read_text(encoding="utf-8").splitlines()
    every = max(1, round(1 / fraction))
    changed = 0
    with out.open("w", encoding="utf-8") as fh:
        for i, line in enumerate(lines):
            if line.strip() and i % every == round_ % every:
                unit = json.loads(line)
                unit["text"] += f"\n// edited in round {round_}"
                line = json.dumps(unit)
                changed += 1
            fh.write(line + "\n")
    return changed


def section_dense_repo(args: argparse.Namespace, tmp: Path) -> None:
    """issue #34: the first `code_search` run on a ~15k-unit Go repository (cold caches) against
    an older checkout (`--baseline-src`, e.g. 1efd3df), and a re-run after 1% of the units
    changed against a fully warm re-run. Each CLI run starts in its own empty working directory
    with its own XDG_CACHE_HOME, so "cold" means every cache (embeddings, tokens, difficulty)."""
    corpus, subset = args.go_corpus.resolve(), args.go_cold_corpus.resolve()
    if not corpus.is_file():
        print(f"\n(dense_repo: {corpus} not found, skipped; build it with: {GO_BUILD})")
        return
    n_units = sum(1 for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip())

    def run(src: Path | None, fixture: Path, home: Path) -> tuple[float, str]:
        home.mkdir(parents=True, exist_ok=True)
        env = {**env_for(src), "XDG_CACHE_HOME": str(home / "xdg")}
        cmd = evalpipe_cmd(
            home,
            "fixture=gold",
            f"fixture.path={fixture}",
            "fixture.name=gosrc",
            "ranker=code_search",
            "force=true",
            "plots=none",
        )
        before = load()
        return wall(cmd, env, cwd=home), f"{before} -> {load()}"

    rows = []
    cold_fixture = go_fixture(subset if subset.is_file() else corpus, tmp / "go" / "cold.yaml")
    cold_units = sum(1 for line in (subset if subset.is_file() else corpus).read_text().splitlines() if line)
    cold: dict[str, float] = {}
    for label, src in reversed(list(codebases(args).items())):  # the baseline first, then this code
        seconds, loads = run(src, cold_fixture, tmp / "go" / f"cold-{label}")
        cold[label] = seconds
        ratio = f"{cold['before'] / seconds:.2f}x faster" if label == "now" and "before" in cold else ""
        rows.append([f"first run, cold caches ({cold_units} units)", label, f"{seconds:.1f}", ratio, loads])
    table(
        f"dense_repo: first code_search run, {cold_units} Go units",
        ["run", "code", "s", "ratio", "load"],
        rows,
    )

    # this code on --go-corpus: cold once (which fills the caches; skipped when it is the corpus
    # just run cold, whose caches are warm now), then fully warm re-runs vs 1%-edited re-runs
    if corpus == (subset if subset.is_file() else corpus):
        work, fixture, rows = tmp / "go" / "cold-now", cold_fixture, []
    else:
        work = tmp / "go" / "full"
        fixture = go_fixture(corpus, tmp / "go" / "full.yaml")
        seconds, loads = run(None, fixture, work)
        rows = [[f"first run, cold caches ({n_units} units)", f"{seconds:.1f}", "", loads]]
    warm, edited = [], []
    for rnd in range(args.repeat):
        t, loads = run(None, fixture, work)
        warm.append(t)
        rows.append([f"warm re-run {rnd + 1}", f"{t:.1f}", "", loads])
        copy = tmp / "go" / f"edited-{rnd}.jsonl"
        changed = edited_corpus(corpus, copy, 0.01, rnd)
        t, loads = run(None, go_fixture(copy, tmp / "go" / f"edited-{rnd}.yaml"), work)
        edited.append(t)
        rows.append([f"re-run after editing {changed} units (1%), round {rnd + 1}", f"{t:.1f}", "", loads])
    ratio = statistics.median(edited) / statistics.median(warm)
    rows.append(
        [
            "median: 1% edited / fully warm",
            f"{statistics.median(edited):.1f} / {statistics.median(warm):.1f}",
            f"{ratio:.2f}x",
            load(),
        ]
    )
    table(
        f"dense_repo: re-runs of code_search on {n_units} Go units (this code)",
        ["run", "s", "ratio", "load"],
        rows,
    )


def full_ndcg(scifact: Path, variants: list[str], max_seq_length: int = 256) -> None:
    """nDCG@10 on all of SciFact per engine:quantize, through the same code as the CLI (embeddings
    cached in ./.cache). Each row is printed as soon as it is measured (a cold pass takes minutes)."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from evalpipe.evaluation.batching import run_search
    from evalpipe.evaluation.runner import prepare_ranker
    from evalpipe.scoring.run import score_results
    from evalpipe.scoring.tokens import get_token_counter

    counter = get_token_counter()
    print(f"\n### nDCG@10 on SciFact (5,183 docs, 300 queries, max_seq_length {max_seq_length}; {load()})\n")
    print("| engine:quantize | nDCG@10 | vs torch:fp32 | embed s | docs/s | cache hit |")
    print("|---|---|---|---|---|---|")
    base = None
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for variant in variants:
            engine, quant = parse_variant(variant)
            overrides = ["+bench=scifact", f"fixture.path={scifact}", "ranker=semantic"]
            overrides += [f"ranker.engine={engine}", f"ranker.quantize={quant or 'null'}"]
            overrides.append(f"ranker.max_seq_length={max_seq_length}")
            cfg = compose("config", overrides=overrides)
            fixture = instantiate(cfg.fixture)
            prepared = prepare_ranker(instantiate(cfg.ranker), fixture.corpus)
            if prepared.skipped:
                print(f"| {variant} | skipped: {prepared.skipped} | | | | |")
                continue
            results, _ = run_search(prepared.ranker, fixture, max(cfg.ks), counter.count, batch=True)
            ndcg = score_results(results, list(cfg.ks)).metric("ndcg_at_10")
            if variant == "torch:fp32":
                base = ndcg
            stats = prepared.ranker.stats()
            delta = f"{ndcg - base:+.5f}" if base is not None else "n/a (no torch:fp32 row)"
            cells = [
                variant,
                f"{ndcg:.5f}",
                delta,
                f"{stats['embed_seconds']:.0f}",
                f"{stats.get('embed_units_per_second', 0):.1f}",
                str(stats["cache_hit"]),
            ]
            print("| " + " | ".join(cells) + " |")
            sys.stdout.flush()
    print(f"\n({load()})")


SECTIONS = {
    "run": section_run,
    "scoring": section_scoring,
    "sweep": section_sweep,
    "reuse": section_reuse,
    "imports": section_imports,
    "dense": section_dense,
    "int8": section_dense,  # the old name of the dense section
    "dense_repo": section_dense_repo,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sections",
        nargs="+",
        choices=list(SECTIONS),
        default=[name for name in SECTIONS if name not in ("dense", "int8", "dense_repo")],
        help="default: all but dense and dense_repo (minutes of embedding; ask for them by name)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="interleaved repetitions per timing (median)")
    parser.add_argument("--baseline-src", help="another checkout's src/ to time the same commands with")
    parser.add_argument(
        "--sizes", nargs="+", type=int, default=[20_000, 100_000], help="scoring: query counts"
    )
    parser.add_argument(
        "--import-budget-ms",
        type=float,
        default=900.0,
        help="imports: the most a gold run's own process may spend importing (quiet machine)",
    )
    parser.add_argument(
        "--dense-docs",
        "--int8-docs",
        type=int,
        default=320,
        help="dense: SciFact documents embedded (0: none)",
    )
    parser.add_argument(
        "--dense-variants",
        nargs="+",
        default=DENSE_VARIANTS,
        metavar="ENGINE:QUANTIZE",
        help=f"dense: what to time (default {' '.join(DENSE_VARIANTS)}; torch:fp32 always, first)",
    )
    parser.add_argument("--max-seq-length", type=int, default=256, help="dense: the ranker's max_seq_length")
    parser.add_argument(
        "--full-ndcg",
        nargs="*",
        metavar="ENGINE:QUANTIZE",
        help="dense: also nDCG@10 on all of SciFact for these (default: the --dense-variants), in order",
    )
    parser.add_argument("--scifact", type=Path, default=SCIFACT, help=f"BEIR SciFact directory ({SCIFACT})")
    parser.add_argument(
        "--go-corpus", type=Path, default=GO_CORPUS, help=f"dense_repo: the corpus ({GO_CORPUS})"
    )
    parser.add_argument(
        "--go-cold-corpus",
        type=Path,
        default=GO_SUBSET,
        help=f"dense_repo: the corpus of the cold before/after run (default {GO_SUBSET}, a subset: the "
        "baseline's full cold run takes ~30 min; pass --go-corpus's file for the whole corpus)",
    )
    args = parser.parse_args(argv)
    args.scifact = args.scifact.resolve()
    if args.full_ndcg is not None and not args.full_ndcg:
        args.full_ndcg = list(args.dense_variants)
    print(f"# bench_perf on {os.cpu_count()} CPUs, {load()}, python {sys.version.split()[0]}")
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        for name in args.sections:
            SECTIONS[name](args, Path(tmp))
    print(f"\n(done, {load()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
