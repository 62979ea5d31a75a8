"""LangChain and LlamaIndex retrievers as rankers (`ranker=langchain`, `ranker=llamaindex`).

Each is the retriever object the application already builds (over its own vector store, pgvector,
Qdrant, FAISS, ...), given by import path (`retriever_object.RetrieverObjectRanker`). What differs
is how it is asked and what it answers:

- LangChain: `retriever.invoke(query, k=k)`, a list of `Document`s. `k` reaches a
  `VectorStoreRetriever` (it overrides `search_kwargs`); a retriever whose method takes no extra
  arguments keeps its own k (`index/k_set_by` says which). The ID is `Document.id`, or the
  metadata at `id_field`; LangChain documents carry no score unless `score_field` names one.
- LlamaIndex: `retriever.retrieve(query)`, a list of `NodeWithScore`; k is the retriever's
  `similarity_top_k` when it has one. The ID is the node's `node_id`, the score its `score`.

Both frameworks are optional (`pip install 'evalpipe[frameworks]'`) and imported on first use.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from evalpipe.rankers.base import RankerUnavailable
from evalpipe.rankers.external.retriever_object import RetrieverObjectRanker

INSTALL_HINT = "install with: pip install 'evalpipe[frameworks]'"


class LangChainRanker(RetrieverObjectRanker):
    """A LangChain `BaseRetriever` (by import path), its documents' metadata mapped to document /
    section / chunk."""

    name = "langchain"
    framework = "a LangChain BaseRetriever (langchain_core.retrievers.BaseRetriever)"

    def _is_retriever(self, obj: Any) -> bool:
        try:
            # lazy: langchain-core (optional), ~5 s at load 14
            from langchain_core.retrievers import BaseRetriever
        except ImportError as exc:
            raise RankerUnavailable(
                f"langchain ranker: langchain-core is not importable ({exc}); {INSTALL_HINT}"
            ) from None
        return isinstance(obj, BaseRetriever)

    def _k_setting(self) -> str | None:
        return "invoke(k=...)" if getattr(self.retriever, "_expects_other_args", False) else None

    def _ask(self, query: str, k: int) -> list[tuple[str | None, float | None, Mapping[str, Any]]]:
        documents = self.retriever.invoke(query, k=k) if self.k_setting else self.retriever.invoke(query)
        out = []
        for document in documents:
            metadata = getattr(document, "metadata", None)
            if not isinstance(metadata, Mapping):
                raise TypeError(f"the retriever answered a {type(document).__name__}, not a Document")
            out.append((getattr(document, "id", None), None, metadata))
        return out


class LlamaIndexRanker(RetrieverObjectRanker):
    """A LlamaIndex retriever (`llama_index.core.base.base_retriever.BaseRetriever`, by import
    path), its nodes' metadata mapped to document / section / chunk."""

    name = "llamaindex"
    framework = "a LlamaIndex retriever (llama_index.core.base.base_retriever.BaseRetriever)"
    _k_lock = threading.Lock()

    def _is_retriever(self, obj: Any) -> bool:
        try:
            # lazy: llama-index-core (optional), ~10 s at load 14
            from llama_index.core.base.base_retriever import BaseRetriever
        except ImportError as exc:
            raise RankerUnavailable(
                f"llamaindex ranker: llama-index-core is not importable ({exc}); {INSTALL_HINT}"
            ) from None
        return isinstance(obj, BaseRetriever)

    def _k_setting(self) -> str | None:
        return "similarity_top_k" if hasattr(self.retriever, "similarity_top_k") else None

    def _ask(self, query: str, k: int) -> list[tuple[str | None, float | None, Mapping[str, Any]]]:
        if self.k_setting:
            with self._k_lock:  # one k per run; set once, before the first query that needs it
                if self.retriever.similarity_top_k != k:
                    self.retriever.similarity_top_k = k
        out = []
        for found in self.retriever.retrieve(query):
            node = getattr(found, "node", None)
            if node is None:
                raise TypeError(f"the retriever answered a {type(found).__name__}, not a NodeWithScore")
            score = getattr(found, "score", None)
            out.append((node.node_id, None if score is None else float(score), node.metadata or {}))
        return out
