"""Dense retrieval: the semantic ranker, its encoders and the on-disk embedding cache."""
