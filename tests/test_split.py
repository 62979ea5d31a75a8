"""Dev/test splits: deterministic across processes, stratified by tier, disjoint, dev + test = all,
the same for YAML, BEIR and TREC inputs, and part of what a run records (tag, params, hash, header)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from cli_helpers import cli_env
from cli_in_process import run_cli as cli
from conftest import ROOT
from evalpipe.inputs import fixture_memo, split
from evalpipe.inputs.beir import load_beir, load_trec
from evalpipe.inputs.fixture import load_fixture

GOLD = ROOT / "fixtures" / "gold.yaml"


def gold():
    return load_fixture(GOLD)


def by_hand(cases, seed, fraction) -> dict[str, str]:
    """The documented rule, written out independently: per tier, order by blake2b-128 of
    f"{seed}\\0{id}", the first floor(n*f + 0.5) (at least 1, at most n-1) are test."""
    tiers: dict[str, list[str]] = {}
    for c in cases:
        tiers.setdefault(c.tier, []).append(c.id)
    out = {}
    for ids in tiers.values():
        ordered = sorted(ids, key=lambda i: hashlib.blake2b(f"{seed}\0{i}".encode(), digest_size=16).digest())
        k = min(max(math.floor(len(ids) * fraction + 0.5), 1), len(ids) - 1)
        out.update({i: ("test" if n < k else "dev") for n, i in enumerate(ordered)})
    return out


def test_split_is_stratified_disjoint_and_complete_on_gold():
    fx = gold()
    counts = fx.tier_counts()
    assert counts == {"exact": 81, "concept": 83, "multi_hop": 40}
    dev, _ = split.apply(fx, split.SplitSettings("dev", 0, 0.5))
    test, _ = split.apply(fx, split.SplitSettings("test", 0, 0.5))
    dev_ids, test_ids = {c.id for c in dev.cases}, {c.id for c in test.cases}
    assert not dev_ids & test_ids
    assert dev_ids | test_ids == {c.id for c in fx.cases}
    # floor(81*.5+.5)=41, floor(83*.5+.5)=42, 20 of 40 go to test
    assert test.tier_counts() == {"exact": 41, "concept": 42, "multi_hop": 20}
    assert dev.tier_counts() == {"exact": 40, "concept": 41, "multi_hop": 20}
    assert split.assign(fx.cases, 0, 0.5) == by_hand(fx.cases, 0, 0.5)
    # Cases keep their fixture order; the corpus is shared, untouched.
    order = [c.id for c in fx.cases]
    assert [c.id for c in dev.cases] == [i for i in order if i in dev_ids]
    assert dev.corpus is fx.corpus and dev.split == "dev" and dev.label.startswith("gold [dev split")


def test_fraction_and_seed_change_the_split():
    fx = gold()
    a = split.assign(fx.cases, 0, 0.3)
    assert Counter(a.values())["test"] == 24 + 25 + 12  # floor(81*.3+.5), floor(83*.3+.5), 40*.3
    assert a == by_hand(fx.cases, 0, 0.3)
    other = split.assign(fx.cases, 1, 0.3)
    assert other != a and Counter(other.values()) == Counter(a.values())
    assert split.assign(fx.cases, "1", 0.3) == other  # the seed is hashed as text: 1 and "1" agree


def test_tiny_tier_warns_and_bad_settings_are_refused():
    fx = gold()
    _, warnings = split.apply(fx, split.SplitSettings("test", 0, 0.5))
    assert warnings == []  # every tier has >= 10 cases on the test side
    _, warnings = split.apply(fx, split.SplitSettings("test", 0, 0.2))
    assert len(warnings) == 1 and "multi_hop=8" in warnings[0] and "fewer than 10" in warnings[0]
    for bad, needle in (
        ({"split": "train"}, "fixture.split must be one of all, dev, test"),
        ({"split": "dev", "test_fraction": 1.0}, "strictly between 0 and 1"),
        ({"split": "dev", "test_fraction": "half"}, "test_fraction"),
        ({"split": "dev", "split_seed": True}, "split_seed"),
    ):
        with pytest.raises(split.SplitError, match=needle):
            split.settings_from(bad)
    assert split.settings_from({}) == split.SplitSettings("all", 0, 0.5)


def case_ids(out: Path) -> list[str]:
    rows = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines() if line.strip()]
    return [r["case_id"] for r in rows]


def run_offline(tmp: Path, name: str, *args: str, hashseed: str = "0") -> Path:
    out = tmp / name
    env = cli_env(PYTHONHASHSEED=hashseed)
    proc = cli(ROOT, "tracking.offline=true", f"hydra.run.dir={out}", "progress=false", *args, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_split_through_the_cli_is_the_same_in_two_processes_and_recorded(tmp_path):
    dev_a = run_offline(tmp_path, "dev_a", "fixture.split=dev", hashseed="1")
    dev_b = run_offline(tmp_path, "dev_b", "fixture.split=dev", hashseed="987")  # another str hash salt
    test = run_offline(tmp_path, "test", "fixture.split=test")
    every = run_offline(tmp_path, "all", "fixture.split_seed=7")  # a seed means nothing for split=all
    assert case_ids(dev_a) == case_ids(dev_b)
    dev_ids, test_ids = set(case_ids(dev_a)), set(case_ids(test))
    assert not dev_ids & test_ids and dev_ids | test_ids == set(case_ids(every))
    assert dev_ids == {i for i, s in by_hand(gold().cases, 0, 0.5).items() if s == "dev"}
    tags = {
        name: json.loads((tmp_path / name / "tags.json").read_text()) for name in ("dev_a", "test", "all")
    }
    assert [tags[n]["evalpipe.split"] for n in ("dev_a", "test", "all")] == ["dev", "test", "all"]
    hashes = {tags[n]["evalpipe.config_hash"] for n in tags}
    assert len(hashes) == 3  # the split is part of the run's identity
    params = json.loads((dev_a / "params.json").read_text())
    assert params["fixture.split"] == "dev" and params["fixture.split_seed"] == "0"
    assert params["fixture.test_fraction"] == "0.5"
    assert "_Fixture: `gold [dev split (seed 0, test fraction 0.5)]`" in (dev_a / "report.md").read_text()


def test_config_hash_ignores_the_seed_only_when_no_split_is_taken():
    from evalpipe.evaluation.identity import config_hash

    base = {
        "ranker": {"k1": 1.2},
        "fixture": {"path": "x", "split": "all", "split_seed": 0, "test_fraction": 0.5},
    }
    reseeded = {**base, "fixture": {**base["fixture"], "split_seed": 3}}
    assert config_hash(base, "f") == config_hash(reseeded, "f")
    dev = {**base, "fixture": {**base["fixture"], "split": "dev"}}
    dev3 = {**dev, "fixture": {**dev["fixture"], "split_seed": 3}}
    assert len({config_hash(base, "f"), config_hash(dev, "f"), config_hash(dev3, "f")}) == 3


def make_beir(folder: Path, n: int) -> Path:
    (folder / "qrels").mkdir(parents=True)
    docs = [{"_id": f"d{i}", "title": f"doc {i}", "text": f"word{i} text"} for i in range(n)]
    queries = [{"_id": f"q{i}", "text": f"word{i}"} for i in range(n)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(n))
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


def test_beir_and_trec_inputs_split_the_same_way(tmp_path):
    folder = make_beir(tmp_path / "ds", 30)
    fx = load_beir(folder)
    expected = by_hand(fx.cases, 0, 0.5)
    assert Counter(expected.values()) == {"dev": 15, "test": 15}
    (tmp_path / "q.tsv").write_text("".join(f"q{i}\tword{i}\n" for i in range(30)))
    (tmp_path / "qrels.txt").write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(30)))
    (tmp_path / "c.jsonl").write_text(
        "".join(
            json.dumps({"id": f"d{i}", "title": f"doc {i}", "text": f"word{i}"}) + "\n" for i in range(30)
        )
    )
    trec = load_trec(tmp_path / "qrels.txt", tmp_path / "q.tsv", tmp_path / "c.jsonl")
    assert split.assign(trec.cases, 0, 0.5) == expected  # same IDs, same split, whatever the loader
    out = tmp_path / "beir_test"
    proc = cli(
        tmp_path, "fixture=beir", f"fixture.path={folder}", "fixture.split=test", "ks=[1,5]",
        "tracking.offline=true", f"hydra.run.dir={out}", "progress=false", "ranker=bm25_prose",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(case_ids(out)) == {i for i, s in expected.items() if s == "test"}
    # 15 cases in tier `all`: no warning; 30 * 0.2 = 6 test cases: a warning naming the tier.
    assert "fewer than 10" not in proc.stderr
    proc = cli(
        tmp_path, "fixture=beir", f"fixture.path={folder}", "fixture.split=test", "fixture.test_fraction=0.2",
        "ks=[1,5]", "tracking.offline=true", f"hydra.run.dir={tmp_path / 'small'}", "progress=false",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (
        "evalpipe: warning: the test split of ds has tier(s) with fewer than 10 cases (all=6)" in proc.stderr
    )


def test_bad_split_value_is_one_line_exit_2(tmp_path):
    proc = cli(tmp_path, f"fixture.path={GOLD}", "fixture.split=train", "tracking.offline=true")
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "evalpipe: error: fixture.split must be one of all, dev, test"
    )
    assert not (tmp_path / "mlruns").exists()


def test_memo_keeps_the_unsplit_fixture(tmp_path):
    """dev and test runs in one process (a sweep, a hold-out) parse the fixture once."""
    from evalpipe.evaluation import preflight

    fixture_memo.clear()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        dev = compose(config_name="config", overrides=[f"fixture.path={GOLD}", "fixture.split=dev"])
        test = compose(config_name="config", overrides=[f"fixture.path={GOLD}", "fixture.split=test"])
    a, b = preflight.check(dev), preflight.check(test)
    assert len(fixture_memo._MEMO) == 1
    assert a.fixture.corpus is b.fixture.corpus
    assert len(a.fixture.cases) + len(b.fixture.cases) == 204
    assert a.split == split.SplitSettings("dev", 0, 0.5)
    assert os.path.isfile(GOLD)


def test_a_fixture_config_instantiated_directly_applies_its_split():
    """Scripts build `cfg.fixture` with hydra.utils.instantiate: the split keys are loader arguments."""
    from hydra.utils import instantiate

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["fixture.split=test"])
    fx = instantiate(cfg.fixture)
    assert fx.split == "test" and fx.tier_counts() == {"exact": 41, "concept": 42, "multi_hop": 20}
