"""Choose what the semantic ranker embeds, and at which precision, on the code suite's dev splits.

    python scripts/dense_choices.py --markdown /tmp/dense_choices.md

Issue #34 items 2-4. Every configuration is `code_search` (the recommended ranker: the graph
over the hybrid whose dense component is the semantic ranker) with one change to its semantic
component, scored on the dev split of each fixture of `--suite` (mean R@5 over the fixtures,
the figure `tune_suite.py` optimises), in one process with one shared per-unit embedding cache
(`--cache-dir`), so a text two configurations render alike is embedded once.

* precision: fp32 (`quantize=null`) vs the default `auto` (bf16 on a CPU with native bf16),
  with the cosine of every unit's bf16 vector to its fp32 one;
* what is embedded: `max_seq_length` 128 vs 256 and the template (signature + docstring +
  leading body, `{text:.N}`, vs the whole text);
* the test-unit rule: `embed_tests=auto` (the default: test units embedded only when a query's
  top-k could hold one) and `false` vs true, counting the cases whose ranking changes.

Speed is not taken from these runs (the cache is shared); `--speed-units` units of the largest
corpus are embedded per setting with each setting's own model, the settings taking turns
batch by batch, so drifting load on a shared machine hits every setting alike. The choice is
the fastest setting whose dev mean R@5 is within `--tolerance` points of the best; the
chosen setting and the shipped one are then reported on `--report-split` (test), once.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import open_dict

from evalpipe.corpus import Corpus
from evalpipe.evaluation.runner import prepare_ranker, run_cases
from evalpipe.paths import PROJECT_ROOT
from evalpipe.rankers import base as base_mod
from evalpipe.rankers.dense.semantic import SemanticRanker, render_unit
from evalpipe.scoring.run import score_results
from evalpipe.scoring.tokens import get_token_counter

FULL = "{title}\n{signature}\n{docstring}\n{text}"


def lead(chars: int) -> str:
    """Signature + docstring + the first `chars` characters of the unit's text."""
    return "{title}\n{signature}\n{docstring}\n{text:." + str(chars) + "}"


@dataclass(frozen=True)
class Setting:
    label: str
    semantic: Mapping[str, Any]  # the semantic component's changed parameters


def settings(lead_chars: int) -> list[Setting]:
    return [
        Setting("fp32, 256, whole text", {"quantize": None}),
        Setting("auto, 256, whole text (shipped)", {}),
        Setting("auto, 128, whole text", {"max_seq_length": 128}),
        Setting(f"auto, 256, lead {lead_chars}", {"template": lead(lead_chars)}),
        Setting(f"auto, 128, lead {lead_chars}", {"max_seq_length": 128, "template": lead(lead_chars)}),
    ]


class Suite:
    """The suite's fixtures on one split, loaded once."""

    def __init__(self, suite: str, split: str, cache_dir: Path, fixtures: Sequence[str] = ()):
        self.split = split
        self.cache_dir = cache_dir
        cfg = compose(config_name="config", overrides=[f"suite={suite}"])
        self.names = list(fixtures) or [str(n) for n in cfg.suite.fixtures]
        self.fixtures = {
            n: instantiate(
                compose(config_name="config", overrides=[f"fixture={n}", f"fixture.split={split}"]).fixture
            )
            for n in self.names
        }
        self.counter = get_token_counter()

    def run(
        self, semantic: Mapping[str, Any]
    ) -> tuple[dict[str, float], dict[str, list[tuple[str, ...]]], dict]:
        """Per fixture: R@5, each case's ranked IDs, and the semantic component's stats."""
        recall: dict[str, float] = {}
        ranked: dict[str, list[tuple[str, ...]]] = {}
        stats: dict[str, Any] = {}
        for name, fixture in self.fixtures.items():
            cfg = compose(
                config_name="config",
                overrides=[f"fixture={name}", f"fixture.split={self.split}", "ranker=code_search"],
            )
            node = cfg.ranker.base.components.semantic
            with open_dict(node):
                node.cache_dir = str(self.cache_dir)
                for key, value in semantic.items():
                    node[key] = value
            base_mod.clear_built_cache()
            prepared = prepare_ranker(instantiate(cfg.ranker), fixture.corpus)
            if prepared.skipped:
                raise SystemExit(f"code_search skipped on {name}: {prepared.skipped}")
            results = run_cases(prepared.ranker, fixture, max(cfg.ks), self.counter.count)
            scores = score_results(results, list(cfg.ks), ["recall"], tiers=fixture.tiers)
            recall[name] = scores.metric("recall_at_5")
            ranked[name] = [tuple(h.id for h in r.hits) for r in results]
            stats[name] = {k: v for k, v in prepared.ranker.stats().items() if k.startswith("base_")}
        return recall, ranked, stats


def speed(corpus: Corpus, options: Sequence[Setting], units: int, batch: int) -> dict[str, float]:
    """Units/s of each setting on the same `units` units (longest-first batches, turns per batch)."""
    rng = np.random.default_rng(0)
    picked = [
        corpus.units[i] for i in sorted(rng.choice(len(corpus), size=min(units, len(corpus)), replace=False))
    ]
    rankers = []
    for option in options:
        r = SemanticRanker(cache_dir=None, batch_size=batch, **option.semantic)
        r.prepare(Corpus(picked[:2], name="warm"))  # loads the model of this precision
        texts = [render_unit(u, r.template, r._fields) for u in picked]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        rankers.append(
            (r, [[texts[i] for i in order[lo : lo + batch]] for lo in range(0, len(order), batch)])
        )
    spent = [float("inf")] * len(options)
    for _ in range(2):  # the first round also builds oneDNN's kernels for each shape: keep the faster
        took = [0.0] * len(options)
        for b in range(len(rankers[0][1])):
            for i, (r, batches) in enumerate(rankers):
                r._encoder.max_seq_length = r.max_seq_length
                t0 = time.perf_counter()
                r._encode_batch(batches[b])
                took[i] += time.perf_counter() - t0
        spent = [min(a, b) for a, b in zip(spent, took, strict=True)]
    return {o.label: len(picked) / s for o, s in zip(options, spent, strict=True)}


def token_costs(suite: Suite, options: Sequence[Setting]) -> dict[str, int]:
    """Tokens a cold run of each setting feeds the model over every suite corpus (distinct texts,
    each up to its max_seq_length): the embedding work, independent of the machine's load."""
    out = {}
    for option in options:
        r = SemanticRanker(cache_dir=None, **option.semantic)
        tokenizer = None
        total = 0
        for fixture in suite.fixtures.values():
            if tokenizer is None:
                r.prepare(Corpus(fixture.corpus.units[:1], name="tok"))
                tokenizer = r._encoder.tokenizer
            texts = list(dict.fromkeys(render_unit(u, r.template, r._fields) for u in fixture.corpus))
            ids = tokenizer(texts, add_special_tokens=True)["input_ids"]
            total += sum(min(len(x), r.max_seq_length) for x in ids)
        out[option.label] = total
    return out


def cosines(suite: Suite, a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[float, float]:
    """Mean and min cosine between the unit vectors of two settings over every suite corpus."""
    values = []
    for fixture in suite.fixtures.values():
        mats = []
        for semantic in (a, b):
            r = SemanticRanker(cache_dir=str(suite.cache_dir), **{**semantic, "embed_tests": True})
            base_mod.clear_built_cache()
            r.prepare(fixture.corpus)
            mats.append(r._embeddings)
        values.append((mats[0] * mats[1]).sum(axis=1))  # both L2-normalised
    allv = np.concatenate(values)
    return float(allv.mean()), float(allv.min())


def changed(a: Mapping[str, list[tuple[str, ...]]], b: Mapping[str, list[tuple[str, ...]]], k: int) -> str:
    parts = []
    for name in a:
        n = sum(x[:k] != y[:k] for x, y in zip(a[name], b[name], strict=True))
        parts.append(f"{name} {n}/{len(a[name])}")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="code")
    parser.add_argument("--fixtures", nargs="+", default=[], help="these fixtures instead of the suite's")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--report-split", default="test")
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/evalpipe-dense-choices"))
    parser.add_argument("--lead-chars", type=int, default=300)
    parser.add_argument("--tolerance", type=float, default=0.5, help="points of mean R@5")
    parser.add_argument("--speed-units", type=int, default=256)
    parser.add_argument("--markdown", type=Path)
    parser.add_argument(
        "--no-speed", action="store_true", help="rank settings by tokens embedded instead of timing them"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    out: list[str] = [f"load average at start: {os.getloadavg()[0]:.2f}\n"]
    options = settings(args.lead_chars)
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        dev = Suite(args.suite, args.split, args.cache_dir, args.fixtures)
        rows = {}
        for option in options:
            t0 = time.perf_counter()
            recall, ranked, stats = dev.run(option.semantic)
            rows[option.label] = (recall, ranked)
            print(
                f"{option.label}: {100 * statistics.fmean(recall.values()):.2f} "
                f"({time.perf_counter() - t0:.0f} s)",
                file=sys.stderr,
            )
        largest = max(dev.fixtures.values(), key=lambda f: len(f.corpus)).corpus
        tokens = token_costs(dev, options)
        if args.no_speed:  # fewer tokens is faster: rate as the inverse of the work
            rates = {label: 1e9 / t for label, t in tokens.items()}
        else:
            rates = speed(largest, options, args.speed_units, SemanticRanker().batch_size)
        head = ["setting", f"{args.split} mean R@5", *dev.names, "tokens (cold)", "speed vs shipped"]
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        shipped = options[1].label
        for option in options:
            recall = rows[option.label][0]
            cells = [option.label, f"{100 * statistics.fmean(recall.values()):.2f}"]
            cells += [f"{100 * recall[n]:.1f}" for n in dev.names]
            cells += [f"{tokens[option.label]:,}", f"{rates[option.label] / rates[shipped]:.2f}x"]
            lines.append("| " + " | ".join(cells) + " |")
        out.append(f"### {args.split} split, code_search, one change to its semantic component\n")
        out += lines
        mean, low = cosines(dev, {"quantize": None}, {})
        out.append(
            "\ncosine of bf16 (auto) to fp32 unit vectors over every suite corpus: "
            f"mean {mean:.5f}, min {low:.5f}\n"
        )
        auto = [o for o in options if o.semantic.get("quantize", "auto") == "auto"]
        best = max(statistics.fmean(rows[o.label][0].values()) for o in auto)
        within = [
            o for o in auto if statistics.fmean(rows[o.label][0].values()) >= best - args.tolerance / 100
        ]
        chosen = max(within, key=lambda o: rates[o.label])
        out.append(
            f"chosen (fastest within {args.tolerance} points of the best auto setting): **{chosen.label}**\n"
        )

        ranked_auto = rows[chosen.label][1]  # embed_tests: auto, the default
        _, ranked_all, _ = dev.run({**chosen.semantic, "embed_tests": True})
        _, ranked_without, _ = dev.run({**chosen.semantic, "embed_tests": False})
        out.append(
            f"embed_tests=auto (default) vs true ({chosen.label}), {args.split} cases whose whole "
            f"ranking changes: {changed(ranked_all, ranked_auto, 1000)}\n"
        )
        out.append(
            f"embed_tests=false vs true ({chosen.label}), {args.split} cases whose top-10 changes: "
            f"{changed(ranked_all, ranked_without, 10)}; whose whole ranking changes: "
            f"{changed(ranked_all, ranked_without, 1000)}\n"
        )

        test = Suite(args.suite, args.report_split, args.cache_dir, args.fixtures)
        lines = [
            f"### {args.report_split} split, reported once after choosing\n",
            "| setting | mean R@5 | " + " | ".join(test.names) + " |",
            "|" + "---|" * (2 + len(test.names)),
        ]
        for option in [options[0], options[1], chosen] if chosen is not options[1] else options[:2]:
            recall, _, _ = test.run(option.semantic)
            lines.append(
                f"| {option.label} | {100 * statistics.fmean(recall.values()):.2f} | "
                + " | ".join(f"{100 * recall[n]:.1f}" for n in test.names)
                + " |"
            )
        out += lines
    out.append(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    report = "\n".join(out)
    print(report)
    if args.markdown:
        args.markdown.write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
