"""A Hydra sweeper over current Optuna's ask/tell API, shipped with evalpipe.

`hydra/sweeper=evalpipe_optuna` (the presets in conf/sweep/*_optuna.yaml select it).

Why not hydra-optuna-sweeper: 1.3.0 pins optuna<3, and that Optuna's database storage fails on
the SQLAlchemy 2 that MLflow needs, so studies could only live in one process's memory. This
plugin keeps its config keys (`sampler`, `direction`, `study_name`, `storage`, `n_trials`,
`n_jobs`, `params` with the `interval` / `choice` / `range` grammar) and adds what a shared
study needs: several processes join one study and split its trials, a killed process's
running trials end FAIL (Optuna's heartbeat), and the next `-m` continues the study.
"""
