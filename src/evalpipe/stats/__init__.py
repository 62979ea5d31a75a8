"""Comparison statistics: how sure a mean is, whether a difference between runs is real, and how
small a difference a fixture could see.

Pure functions of per-case values (no MLflow, no files), used by `compare`, `gate`, `suite` and
`sweeps`: resampling (bootstrap CIs, the paired randomization test), the paired comparison of
runs over their shared cases (`comparison`), the per-case wins and losses (`case_diff`), the
minimum detectable effect (`power`), multiple-comparison corrections (`corrections`) and the
points tied with the best (`ties`).
"""
