"""Lexical rankers: bm25, bm25f, exact, grep, winnow, and the on-disk token cache they share
(the code-aware tokenizer and bm25s loading sit one level up: priors and fixture checks use them)."""
