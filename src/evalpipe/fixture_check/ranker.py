"""The checker's own ambiguity ranker: a BM25 pinned here, not read from `conf/ranker/bm25.yaml`.

`check-fixture`'s ambiguity step asks a lexical ranker which unlisted unit it puts
first; a strong candidate flags the case until a reviewer judges it. If that ranker were
the shipped `ranker=bm25`, every tuning of the shipped ranker (k1, b, fields, the test
prior, compound splitting) would move the candidates and re-open the review of every
fixture, though no case changed. So the checker builds its BM25 from the configuration
below, every parameter explicit; it changes only deliberately, with the fixtures'
reviews. The values are those the shipped fixtures (gold, fixgo, fixts) were last
reviewed with. A change to the BM25 code itself (the tokenizer) still shows: the pinned
configuration freezes what a YAML can change, not the implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

#: Passed to `hydra.utils.instantiate`; recorded in `--json` as `ambiguity_ranker_config`.
CHECKER_BM25: Mapping[str, object] = MappingProxyType(
    {
        "_target_": "evalpipe.rankers.lexical.bm25.BM25Ranker",
        "k1": 1.5,
        "b": 0.75,
        "method": "lucene",
        "delta": 0.5,
        "stemmer": "english",
        "stopwords": "en",
        "code_aware": True,
        "fields": ["title", "text", "identifiers"],
        "split_compounds": True,
        "test_prior": "last",
        "module_prior": "off",
        "min_score": None,
        "cache_dir": None,  # how fast, not what: no token cache written by the checker
    }
)


def checker_bm25():
    """A fresh, unprepared BM25 ranker built from CHECKER_BM25."""
    # lazy: hydra, omegaconf, yaml, ~150 ms
    from hydra.utils import instantiate

    return instantiate(dict(CHECKER_BM25))
