"""The code-aware tokenizer: identifier splitting, and bm25s parity in plain mode."""

from __future__ import annotations

import bm25s
import pytest
import Stemmer

from evalpipe.tokenize import CodeTokenizer, split_word

RAW = CodeTokenizer(stemmer=None, stopwords=None, code_aware=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HTTPServerError", ["httpservererror", "http", "server", "error"]),
        ("mergeSettings", ["mergesettings", "merge", "settings"]),
        ("merge_settings", ["merge_settings", "merge", "settings"]),
        ("Session.merge()", ["session.merge", "session", "merge"]),
        ("src/evalpipe/runner.py", ["src/evalpipe/runner.py", "src", "evalpipe", "runner", "py"]),
        ("std::vector<int>", ["std::vector", "std", "vector", "int"]),
        ("sha256sum", ["sha256sum", "sha", "256", "sum"]),
        # single-character pieces are dropped; the whole identifier survives
        ("get_x", ["get_x", "get"]),
        # a plain word is not repeated as its own "whole identifier"
        ("Settings", ["settings"]),
        # a sentence-final period is not part of a dotted name
        ("Call merge_settings.", ["call", "merge_settings", "merge", "settings"]),
    ],
)
def test_code_aware_splits(text, expected):
    assert RAW(text) == expected


def test_split_word_boundaries():
    assert split_word("HTTPServerError") == ["HTTP", "Server", "Error"]
    assert split_word("parseJSON2xml") == ["parse", "JSON", "2", "xml"]
    assert split_word("naïveValue") == ["naïve", "Value"]


def test_stopwords_and_stemmer_apply_to_pieces_not_whole_identifiers():
    tok = CodeTokenizer(stemmer="english", stopwords="en", code_aware=True)
    # Snowball english: merge -> merg, settings -> set; "is" is an English stopword.
    assert tok("merge_settings") == ["merge_settings", "merg", "set"]
    assert tok("is_valid") == ["is_valid", "valid"]
    assert tok("The settings are merged") == ["set", "merg"]


def test_custom_stopword_list_and_deterministic():
    tok = CodeTokenizer(stemmer=None, stopwords=["merge"], code_aware=True)
    assert tok("merge_settings") == ["merge_settings", "settings"]
    assert tok("merge_settings") == tok("merge_settings")


def test_plain_mode_matches_bm25s_default_pipeline():
    texts = [
        "Tumor necrosis factor-α (TNF-α) levels rose 2-fold in 3 of 10 mice.",
        "The HTTPServerError was raised by merge_settings in src/app.py; a b c.",
        "Vitamin D deficiency isn't associated with x; cells were treated for 24h.",
    ]
    tok = CodeTokenizer(stemmer="english", stopwords="en", code_aware=False)
    expected = bm25s.tokenize(
        texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), return_ids=False, show_progress=False
    )
    assert [tok(t) for t in texts] == expected
    # and the plain mode does not split identifiers
    assert CodeTokenizer(None, None, code_aware=False)("mergeSettings a merge_settings") == [
        "mergesettings",
        "merge_settings",
    ]


def test_empty_text_and_bad_params():
    assert RAW("") == []
    assert RAW("  ... !! ") == []
    with pytest.raises(ValueError, match="unknown stemmer 'klingon'"):
        CodeTokenizer(stemmer="klingon")
    with pytest.raises(ValueError, match="unknown stopwords 'xx'"):
        CodeTokenizer(stopwords="xx")


def test_each_distinct_word_is_stemmed_once_and_results_match(monkeypatch):
    tok = CodeTokenizer(stemmer="english", stopwords="en", code_aware=False)
    calls: list[list[str]] = []
    real = tok._stemmer.stemWords

    class Counting:
        def stemWords(self, words):
            calls.append(list(words))
            return real(words)

    monkeypatch.setattr(tok, "_stemmer", Counting())
    text = "the running runners ran; running again, the runners running"
    # hand-worked Snowball stems, in text order ("the" is a stopword)
    expected = ["run", "runner", "ran", "run", "again", "runner", "run"]
    assert tok(text) == expected
    assert tok(text) == expected
    assert sorted(w for batch in calls for w in batch) == ["again", "ran", "runners", "running"]
