"""Suites: one ranker over a named list of fixtures, one run per fixture under one suite run."""
