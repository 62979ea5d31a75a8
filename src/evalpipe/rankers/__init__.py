"""Rankers: every retrieval strategy behind one small protocol (`base.Ranker`: `search`).

    base            the protocol, `CorpusRanker` (index memo, parameter kind checks), `top_k`
    tokenize        the code-aware tokenizer (lexical rankers, priors, fixture checks share it)
    bm25s_loader    bm25s imported without numba
    lexical/        word matching: bm25, bm25f (fields), exact (symbol names), grep, winnow
                    (constraint filter + fan-in), the on-disk token cache
    dense/          embeddings: semantic (sentence-transformers / ONNX encoders), the embedding cache
    fusion/         several rankers as one: rrf (reciprocal rank fusion), hybrid (min-max linear)
    structure/      the code graph: graph (relational questions walked along relations), its
                    relation intent and set questions
    priors/         re-ordering rules shared by rankers: test_prior, module_prior
    replay/         runfile: a TREC or JSONL run file replayed as a ranker
    plugin_example  a complete plug-in to copy (docs/rankers.md)

conf/ranker/<name>.yaml names each one's class in `_target_`. Nothing is imported here, so
loading one ranker costs only its own imports.
"""
