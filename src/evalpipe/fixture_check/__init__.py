"""The fixture checker: does each case measure what its tier claims?

`evalpipe check-fixture FIXTURE` (cli.py) measures every case (check.py): word overlap
between the query and its expected units (words.py), name leakage and multi_hop name
matching (leakage.py), expected-set size and ambiguity candidates (ambiguity.py), then
applies per-tier thresholds (thresholds.py) and prints/writes the result (render.py).
`difficulty_metrics` (summary.py) is the cheap per-run subset logged to MLflow.
"""
