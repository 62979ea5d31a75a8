"""The MLflow store layer: everything that talks to an MLflow tracking store.

`mlflow_store` (opening a store, experiments, runs, batched logging), `record` (a run saved
locally, then uploaded), `sync` (uploading saved runs; `evalpipe sync`), `upload_worker` (the
warm process that does it while a run measures) and its `worker_errors`, `datasets` (the
fixture and corpus as MLflow dataset inputs), `links` (run pages in the MLflow UI), `traces`.
"""
