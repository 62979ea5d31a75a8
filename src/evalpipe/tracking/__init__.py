"""The MLflow store layer: everything that talks to an MLflow tracking store.

`mlflow_store` (opening a store, experiments, runs, batched logging), `record` (a run saved
locally, then uploaded), `sync` (uploading saved runs; `evalpipe sync`), `upload_worker` (the
warm process that does it while a run measures) and its `worker_errors`, `datasets` (the
fixture and corpus as MLflow dataset inputs), `links` (run pages in the MLflow UI), `traces`.
What a sweep asks of the store: `sweep_job` (which parent run a job belongs to), `sweep_store`
(the parent's store work, here or through the worker), `reuse` (a reused point as a child run),
`measured` (the run a reused point stands for), `sweep_summary` (the points, summary.md / .csv).
"""
