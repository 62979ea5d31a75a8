"""Sweeps and comparison: job-side sweep context, the multirun callback, summaries, `evalpipe compare`."""
