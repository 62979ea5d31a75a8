"""Dense retrieval: the semantic ranker, its encoders, the on-disk embedding cache, and the
same embeddings searched through a ChromaDB collection (`chroma`)."""
