"""Replay: a ranker that answers from a saved run file (TREC or JSONL)."""
