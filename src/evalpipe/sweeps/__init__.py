"""Sweeps: the multirun callback, hold-out re-runs, compose-once and the config cache (the store
side of a sweep is in `evalpipe.tracking`: `sweep_job`, `sweep_store`, `reuse`, `sweep_summary`)."""
