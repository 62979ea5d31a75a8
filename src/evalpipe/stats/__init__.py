"""Comparison statistics: how sure a mean is and whether a difference between runs is real.

Pure functions of per-case values (no MLflow, no files), used by `compare`, `gate`, `suite` and
`sweeps`: resampling (bootstrap CIs, the paired randomization test), the paired comparison of
runs over their shared cases (`comparison`) and the per-case wins and losses (`case_diff`).
"""
