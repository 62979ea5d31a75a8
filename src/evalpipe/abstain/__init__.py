"""`evalpipe abstain`: when to answer nothing, chosen on dev and reported on test."""
