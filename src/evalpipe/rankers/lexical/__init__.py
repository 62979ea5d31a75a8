"""Lexical rankers: bm25, bm25f, exact, grep, winnow; the code-aware tokenizer, bm25s loading
and the on-disk token cache they share."""
