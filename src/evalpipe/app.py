"""The Hydra task: config -> fixture + ranker -> per-case results -> metrics -> report and MLflow.

Bad input exits with code 2 and one line naming what to fix; once cases have
run, their results are written to the job's output directory before MLflow is
touched, so a tracking failure never throws finished work away. The work itself
is a short list of stages over one run state (`evalpipe.evaluation.stages`).
"""

from __future__ import annotations

from omegaconf import DictConfig

from evalpipe.evaluation import stages
from evalpipe.safety import signals


def evaluate(cfg: DictConfig) -> float:
    """Run one evaluation and return `cfg.objective` (so sweepers can optimise it)."""
    with signals.handled():
        if cfg.get("suite"):  # several fixtures, one child run each (evalpipe.suite.run)
            # lazy: evalpipe.suite.run, ~9 ms
            from evalpipe.suite.run import evaluate_suite

            return evaluate_suite(cfg)
        return _stages(cfg)


def _stages(cfg: DictConfig) -> float:
    state = stages.check(cfg)
    stages.open_store(state)
    reused = stages.reuse(state)
    if reused is not None:
        return reused
    stages.start(state)  # an MLflow run is open from here: every way out ends it
    stages.guarded(state, stages.measure)
    stages.guarded(state, stages.judge)
    with signals.deferred():  # a second Ctrl-C must not cost what the first one saves
        stages.record(state)
        stages.show(state)  # the results, as soon as they are saved
        stages.upload(state)
    return stages.report(state)
