"""Turning measured cases into figures: IR metrics, RAG measures, tokens and outcomes."""
