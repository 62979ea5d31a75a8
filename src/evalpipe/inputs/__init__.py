"""Fixture inputs: YAML fixtures, BEIR and TREC collections, and the strict readers behind them."""
