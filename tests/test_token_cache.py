"""BM25's tokenized corpus kept on disk (`cache_dir`): the same rankings, no second tokenizing pass."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evalpipe.inputs.fixture import load_fixture
from evalpipe.rankers.base import clear_built_cache
from evalpipe.rankers.lexical import bm25
from evalpipe.rankers.lexical.bm25 import BM25Ranker

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def gold():
    return load_fixture(ROOT / "fixtures" / "gold.yaml")


def rankings(ranker: BM25Ranker, fixture) -> list[list[tuple[str, float]]]:
    ranker.prepare(fixture.corpus)
    return [[(h.id, round(h.score, 9)) for h in ranker.search(c.query, 10)] for c in fixture.cases]


def new_process() -> None:
    """What a new process starts with: no index or tokenized corpus in memory."""
    clear_built_cache()


def entries(folder: Path) -> list[str]:
    return sorted(p.name.split(".")[0] for p in folder.glob("*.json"))


@pytest.mark.parametrize(
    "settings",
    [{}, {"code_aware": False, "split_compounds": False, "fields": ["title", "text"]}, {"stemmer": None}],
    ids=["code-aware-split", "prose", "unstemmed"],
)
def test_kept_tokens_give_the_same_rankings_without_tokenizing(gold, tmp_path, monkeypatch, settings):
    expected = rankings(BM25Ranker(**settings), gold)  # no cache at all
    splitter = BM25Ranker(**settings)._tokenize(gold.corpus)[2]
    new_process()
    cold = rankings(BM25Ranker(cache_dir=str(tmp_path), **settings), gold)
    assert cold == expected
    assert len(entries(tmp_path)) == 1
    new_process()

    def no_tokenizing(self, corpus):
        raise AssertionError("tokenized again although the entry is on disk")

    monkeypatch.setattr(BM25Ranker, "_tokenize", no_tokenizing)
    warm = rankings(BM25Ranker(cache_dir=str(tmp_path), **settings), gold)
    assert warm == expected
    # the query side splits compounds with the splitter the index was built with
    new_process()
    ranker = BM25Ranker(cache_dir=str(tmp_path), **settings)
    ranker.prepare(gold.corpus)
    if splitter is None:
        assert ranker.tokenizer.splitter is None
    else:
        assert ranker.tokenizer.splitter.words == splitter.words and splitter.words


def test_one_entry_serves_every_k1_and_b_but_not_another_tokenizer(gold, tmp_path):
    for k1, b in [(1.2, 0.75), (0.9, 0.4), (2.0, 1.0)]:
        new_process()
        rankings(BM25Ranker(k1=k1, b=b, cache_dir=str(tmp_path)), gold)
    assert len(entries(tmp_path)) == 1
    new_process()
    rankings(BM25Ranker(stopwords=None, cache_dir=str(tmp_path)), gold)
    new_process()
    rankings(BM25Ranker(fields=["title", "text"], cache_dir=str(tmp_path)), gold)
    assert len(entries(tmp_path)) == 3


@pytest.mark.parametrize("damage", ["truncated ids", "ids out of range", "bad json", "fewer units"])
def test_a_damaged_entry_is_a_miss_and_is_rewritten(gold, tmp_path, damage):
    expected = rankings(BM25Ranker(), gold)
    new_process()
    rankings(BM25Ranker(cache_dir=str(tmp_path)), gold)
    (key,) = entries(tmp_path)
    ids_file, meta_file = tmp_path / f"{key}.ids.npy", tmp_path / f"{key}.json"
    offsets_file = tmp_path / f"{key}.offsets.npy"
    good_ids = np.load(ids_file)
    if damage == "truncated ids":
        ids_file.write_bytes(ids_file.read_bytes()[:100])
    elif damage == "ids out of range":
        np.save(ids_file, good_ids + 10**6)
    elif damage == "bad json":
        meta_file.write_text("{", encoding="utf-8")
    else:
        np.save(offsets_file, np.load(offsets_file)[:-1])
    new_process()
    assert rankings(BM25Ranker(cache_dir=str(tmp_path)), gold) == expected
    assert np.array_equal(np.load(ids_file), good_ids)  # rewritten whole
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_unwritable_cache_costs_nothing_but_time(gold, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory", encoding="utf-8")
    expected = rankings(BM25Ranker(), gold)
    new_process()
    assert rankings(BM25Ranker(cache_dir=str(blocked / "tokens")), gold) == expected


def test_the_in_process_memo_still_comes_first(gold, tmp_path, monkeypatch):
    rankings(BM25Ranker(cache_dir=str(tmp_path)), gold)
    from evalpipe.rankers import base

    base._BUILT.clear()  # a k1 sweep in one process: the index is rebuilt, the tokens are not
    monkeypatch.setattr(bm25.token_cache, "load", lambda *a, **k: pytest.fail("read the disk"))
    rankings(BM25Ranker(k1=1.1, cache_dir=str(tmp_path)), gold)
