"""Fusion: several rankers answered as one (rrf: reciprocal rank fusion; hybrid: min-max linear)."""
