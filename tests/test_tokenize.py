"""The code-aware tokenizer: identifier keys and pieces, compound splitting, query word runs,
and bm25s parity in plain mode."""

from __future__ import annotations

import bm25s
import pytest
import Stemmer

from evalpipe.rankers.tokenize import CodeTokenizer, CompoundSplitter, identifier_key, split_word

RAW = CodeTokenizer(stemmer=None, stopwords=None, code_aware=True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("HTTPServerError", ["httpservererror", "http", "server", "error"]),
        ("mergeSettings", ["mergesettings", "merge", "settings"]),
        # snake, kebab, upper snake and camelCase spellings share one key: the pieces joined
        ("merge_settings", ["mergesettings", "merge", "settings"]),
        ("merge-settings", ["mergesettings", "merge", "settings"]),
        ("MERGE_SETTINGS", ["mergesettings", "merge", "settings"]),
        # a dotted name: the whole (each name's key, joined by "."), then the key of each
        # name of several pieces, then the pieces
        ("Session.mergeSettings", ["session.mergesettings", "mergesettings", "session", "merge", "settings"]),
        ("Session.merge()", ["session.merge", "session", "merge"]),
        ("src/evalpipe/runner.py", ["src.evalpipe.runner.py", "src", "evalpipe", "runner", "py"]),
        ("std::vector<int>", ["std.vector", "std", "vector", "int"]),
        ("sha256sum", ["sha256sum", "sha", "256", "sum"]),
        # single-character pieces are dropped; the key keeps them
        ("get_x", ["getx", "get"]),
        # leading/trailing underscores are no pieces: `__init__` is the word init
        ("__init__", ["init"]),
        # a plain word is not repeated as its own "whole identifier"
        ("Settings", ["settings"]),
        # a sentence-final period is not part of a dotted name
        ("Call merge_settings.", ["call", "mergesettings", "merge", "settings"]),
    ],
)
def test_code_aware_splits(text, expected):
    assert RAW(text) == expected


def test_split_word_ascii_regex_agrees_with_the_character_walk():
    """split_word takes a regex for ASCII words; it must cut exactly where the walk over
    character classes (the path every non-ASCII word takes) cuts."""
    import random

    rng = random.Random(7)
    for _ in range(20000):
        word = "".join(rng.choice("aAbBzZ09") for _ in range(rng.randint(2, 9)))
        assert split_word(word) == _walk(word), word


def _walk(word: str) -> list[str]:
    """The character-class walk of split_word, written out again as the oracle."""

    def cls(ch: str) -> str:
        return "d" if ch.isdigit() else "u" if ch.isupper() else "l" if ch.isalpha() else "o"

    pieces, start = [], 0
    for i in range(1, len(word)):
        prev, cur = cls(word[i - 1]), cls(word[i])
        nxt = cls(word[i + 1]) if i + 1 < len(word) else ""
        if (
            (prev == "l" and cur == "u")
            or ((prev in "ul") != (cur in "ul"))
            or (prev == cur == "u" and nxt == "l")
        ):
            pieces.append(word[start:i])
            start = i
    pieces.append(word[start:])
    return pieces


def test_split_word_boundaries():
    assert split_word("HTTPServerError") == ["HTTP", "Server", "Error"]
    assert split_word("parseJSON2xml") == ["parse", "JSON", "2", "xml"]
    assert split_word("naïveValue") == ["naïve", "Value"]


def test_stopwords_and_stemmer_apply_to_pieces_keys_are_stemmed_never_stopped():
    tok = CodeTokenizer(stemmer="english", stopwords="en", code_aware=True)
    snowball = Stemmer.Stemmer("english").stemWord
    # Snowball english: merge -> merg, settings -> set, mergesettings -> mergeset;
    # "is" is an English stopword (dropped as a piece, kept inside the key).
    assert [snowball(w) for w in ("merge", "settings", "mergesettings")] == ["merg", "set", "mergeset"]
    assert tok("merge_settings") == ["mergeset", "merg", "set"]
    assert tok("is_valid") == [snowball("isvalid"), "valid"]
    assert tok("The settings are merged") == ["set", "merg"]


def test_lowercase_identifier_meets_the_key_on_both_sides():
    """The issue's bug: the index kept `registeredhandlers` unstemmed while the query word was
    stemmed, so the lowercase spelling of `registeredHandlers` never matched. Now the key is
    stemmed like the word, so both sides give the same term."""
    tok = CodeTokenizer(stemmer="english", stopwords="en", code_aware=True)
    key = Stemmer.Stemmer("english").stemWord("registeredhandlers")
    assert key == "registeredhandl"
    spellings = ("registeredHandlers", "registered_handlers", "registered-handlers", "RegisteredHandlers")
    for spelling in spellings:
        assert tok(spelling)[0] == key, spelling
        assert tok.query_terms(spelling)[0] == key, spelling
    assert tok.query_terms("registeredhandlers") == [key]
    assert key in tok.query_terms("registered handlers")  # the run of two words as a key
    assert {identifier_key(s) for s in spellings} == {"registeredhandlers"}


def test_query_terms_add_keys_of_adjacent_word_runs():
    # runs stop at punctuation and at dotted names; up to three words are joined
    assert RAW.query_terms("merge settings loader, now") == [
        "merge",
        "settings",
        "loader",
        "now",
        "mergesettings",
        "settingsloader",
        "mergesettingsloader",
    ]
    assert RAW.query_terms("call Session.merge now") == ["call", "session.merge", "session", "merge", "now"]
    assert RAW.query_terms("one two three four")[4:] == [
        "onetwo",
        "twothree",
        "threefour",
        "onetwothree",
        "twothreefour",
    ]
    plain = CodeTokenizer(None, None, code_aware=False)
    assert plain.query_terms("merge settings") == plain("merge settings") == ["merge", "settings"]


def test_compound_splitter_frequency_rule():
    # file*ops = 10*4 = 40 > fileops^2 = 3^2: split. With fileops seen 7 times, 49 > 40: not.
    assert CompoundSplitter({"file": 10, "ops": 4, "fileops": 3}).split("fileops") == ("file", "ops")
    assert CompoundSplitter({"file": 10, "ops": 4, "fileops": 7}).split("fileops") == ()
    # a query word the corpus never uses splits whenever both parts are corpus words
    assert CompoundSplitter({"load": 2, "config": 2}).split("loadconfig") == ("load", "config")
    # parts: at least 3 letters, seen at least twice, never stopwords; alphabetic words only
    assert CompoundSplitter({"file": 10, "op": 9}).split("fileop") == ()
    assert CompoundSplitter({"file": 10, "ops": 1}).split("fileops") == ()
    assert CompoundSplitter({"with": 9, "out": 9}, stopwords={"with"}).split("without") == ()
    assert CompoundSplitter({"file": 10, "ops": 4}).split("file2ops") == ()
    # the best product wins; equal products go to the leftmost split
    sp = CompoundSplitter({"aaa": 2, "bbbccc": 2, "aaabbb": 2, "ccc": 2})
    assert sp.split("aaabbbccc") == ("aaa", "bbbccc")
    sp = CompoundSplitter({"aaa": 2, "bbbccc": 2, "aaabbb": 3, "ccc": 2})
    assert sp.split("aaabbbccc") == ("aaabbb", "ccc")


def test_tokenizer_with_a_corpus_splitter_splits_on_both_sides():
    texts = ["def file_reader(ops): ...", "class FileWriter: ops = []", "import fileops"]
    splitter = RAW.build_splitter(texts)
    # pieces: file 2, reader 1, ops 2, class 1, writer 1, fileops 1, def 1, import 1
    assert splitter.counts["file"] == 2 and splitter.counts["ops"] == 2 and splitter.counts["fileops"] == 1
    tok = RAW.with_splitter(splitter)
    assert tok("fileops") == ["fileops", "file", "ops"]
    assert tok("FileOps") == ["fileops", "file", "ops"]
    assert tok("fileops.Copy") == ["fileops.copy", "fileops", "file", "ops", "copy"]
    assert RAW("fileops") == ["fileops"]  # the original is unchanged


def test_custom_stopword_list_and_deterministic():
    tok = CodeTokenizer(stemmer=None, stopwords=["merge"], code_aware=True)
    assert tok("merge_settings") == ["mergesettings", "settings"]
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
