"""`evalpipe judge-batch BATCH`: the judge pre-labels a judging batch and is checked against the
people who labelled it (docs/growing_fixtures.md, "The judge checked against people").

    evalpipe judge-batch gold.pool.jsonl --backend openai --model gpt-4o-mini --base-url http://...

The judge is the run's own (`judge.asking.Judge`: the same client, cache, budget and circuit
breaker); its verdicts are appended to the batch's labels file as assessor
`judge:<backend>:<model>`. When people's labels are there too, the agreement (kappa with a
bootstrap CI, confusion counts, precision of rescues; overall and per tier) and the canaries'
fooled rate are printed and written to `<batch stem>.judge-agreement.json` (or `--out`).
Everything is checked before the first question (batch, fixture, settings, server): one line,
exit 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from evalpipe.inputs.fixture import load_fixture
from evalpipe.judge import against_people as ap
from evalpipe.judge.asking import Judge
from evalpipe.judge.backends import make_backend
from evalpipe.judge.batch import Label, append_label, check_fixture, current, read_batch, read_labels
from evalpipe.judge.probe import JudgeUnavailable, probe
from evalpipe.judge.prompt import load_prompt
from evalpipe.judge.settings import JudgeSettings
from evalpipe.safety.cli_parser import CommandParser
from evalpipe.safety.errors import EvalpipeError, print_error
from evalpipe.scoring.tokens import get_token_counter

PROG = "evalpipe judge-batch"


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog=PROG, description="The judge labels a judging batch; its agreement with people.")
    p.add_argument("batch", type=Path, help="the batch JSONL written by evalpipe pool")
    p.add_argument("--backend", default="openai", help="openai (any OpenAI-compatible server) or anthropic")
    p.add_argument("--model", required=True, help="the judge model")
    p.add_argument("--base-url", default=None, help="the server (default: the vendor's API)")
    p.add_argument("--api-key-env", default=None, help="environment variable holding the API key")
    p.add_argument("--fixture", type=Path, help="the fixture YAML (default: the one the batch names)")
    p.add_argument("--max-calls", type=int, default=500, help="at most this many questions (the budget)")
    p.add_argument("--cache-dir", default=None, help="the judgement cache folder (default: the user cache)")
    p.add_argument("--prompt", default="relevance_v1", help="the prompt template")
    p.add_argument(
        "--canaries",
        type=float,
        default=0.2,
        help="share of cases that get a canary pair (0 to 1; default 0.2)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the canary sample and the bootstrap")
    p.add_argument("--out", type=Path, default=None, help="agreement JSON (default: beside the batch)")
    return p


def _judge(args: argparse.Namespace) -> Judge:
    settings = JudgeSettings(
        backend=args.backend,
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        prompt=args.prompt,
        max_calls=args.max_calls,
        cache_dir=args.cache_dir,
        seed=args.seed,
    )
    settings.register_secrets()
    prompt = load_prompt(settings.prompt)
    backend = make_backend(settings)
    try:
        probe(settings)
    except JudgeUnavailable as exc:
        raise EvalpipeError(f"--base-url: {exc}") from None
    return Judge(settings, backend, prompt)


def run(args: argparse.Namespace) -> int:
    if not 0.0 <= args.canaries <= 1.0:
        raise EvalpipeError(f"--canaries {args.canaries}: give a share between 0 and 1")
    batch = read_batch(args.batch)
    named = args.fixture or Path(str(batch.header.get("fixture") or ""))
    if not str(named) or not named.is_file():
        raise EvalpipeError(f"{args.batch}: its fixture {str(named)!r} is not there; give --fixture PATH")
    fixture = load_fixture(named)
    check_fixture(batch, fixture.sha256, str(named))
    units = {u.id: u for u in fixture.corpus.units}
    labels = read_labels(batch.labels_path)
    judge = _judge(args)
    assessor = ap.judge_assessor(args.backend, args.model)
    expected = {c.id: tuple(c.expected) for c in fixture.cases}
    canaries, canary_units = ap.make_canaries(batch, units, expected, args.canaries, args.seed)
    counter = get_token_counter()
    verdicts, stats = judge.ask_all(ap.pairs_for(batch, canaries), {**units, **canary_units}, counter.count)
    mine = {(k[0], k[1]): lab.grade for k, lab in current(labels).items() if k[2] == assessor}
    now = datetime.now(UTC).isoformat(timespec="seconds")
    said: dict[tuple[str, str], bool] = {}
    written = 0
    for it in batch.items:
        j = verdicts.get(it.key)
        if j is None or j.verdict is None:
            continue
        said[it.key] = j.relevant
        grade = int(j.relevant)
        if mine.get(it.key) != grade:  # a re-run with the same verdicts appends nothing
            append_label(
                batch.labels_path,
                Label(it.case_id, it.candidate, grade, assessor, now, 0.0, assessor, batch.fixture_sha256),
            )
            written += 1
    print(
        f"{args.batch}: the judge {assessor} gave {len(said)} of {len(batch.items)} verdicts "
        f"({stats.cache_hits} cached, {stats.calls} calls, {stats.errors} errors, {stats.over_budget} over "
        f"budget); {written} new lines in {batch.labels_path}",
        flush=True,
    )
    if stats.stopped:
        print(f"evalpipe: warning: {stats.stopped}", flush=True)
    people = ap.people_relevance(labels)
    if not people:
        print("no people's labels in the batch yet: no agreement to report (label it with evalpipe label)")
        return 0
    canary_says = {
        c.unit_id: (
            None
            if verdicts[(c.case_id, c.unit_id)].verdict is None
            else verdicts[(c.case_id, c.unit_id)].relevant
        )
        for c in canaries
    }
    rep = ap.report(batch, said, people, canary_says, assessor, seed=args.seed)
    rep["canaries"]["pairs"] = [{"case_id": c.case_id, "unit": c.source} for c in canaries]
    for line in ap.lines(rep):
        print(line, flush=True)
    out = args.out or batch.path.with_name(batch.path.name.removesuffix(".jsonl") + ".judge-agreement.json")
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        tmp.write_text(json.dumps(rep, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise EvalpipeError(f"--out {out}: cannot write the agreement: {exc.strerror or exc}") from None
    print(f"agreement written to {out}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return run(args)
    except EvalpipeError as exc:
        print_error(exc, prog=PROG)
        return 2
