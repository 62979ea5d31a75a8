"""The `evalpipe <command>`s: the one list every part that needs it reads.

`evalpipe.__main__` dispatches a command line whose first word is one of these names to the
command's `main(argv) -> exit code` before Hydra parses anything, and lists them in
`evalpipe --help`; the upload worker (`tracking.upload_worker`) must know them too, because it
is started before that dispatch and a command is not a run with anything to upload. A command
added here is dispatched, listed and left alone by the worker; nothing else names them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subcommand:
    """A command run instead of an evaluation: its `main(argv) -> exit code`, and one line of help."""

    module: str
    function: str
    summary: str


SUBCOMMANDS: dict[str, Subcommand] = {
    "compare": Subcommand(
        "evalpipe.compare.cli", "main", "are differences between runs real? paired CIs and p-values"
    ),
    "check-fixture": Subcommand(
        "evalpipe.fixture_check.cli", "main", "does a fixture measure what its tiers claim? flagged cases"
    ),
    "merge-judgements": Subcommand(
        "evalpipe.judge.merge", "main", "add reviewed judge verdicts (judged.tsv) to a new fixture version"
    ),
    "sync": Subcommand(
        "evalpipe.tracking.sync", "main", "upload runs saved offline (or while the store was down) to MLflow"
    ),
    "gate": Subcommand(
        "evalpipe.gate.cli", "gate_main", "did a change make retrieval worse than a baseline? exit 0 / 1 / 2"
    ),
    "baseline": Subcommand(
        "evalpipe.gate.cli", "baseline_main", "name, list or export the baselines the gate compares with"
    ),
    "abstain": Subcommand(
        "evalpipe.abstain.cli",
        "main",
        "when should a RAG ranker return nothing? chosen on dev, shown on test",
    ),
    "pool": Subcommand(
        "evalpipe.labelling.pool_cli",
        "main",
        "pool several runs' unlabelled top-k candidates into a judging batch",
    ),
    "label": Subcommand(
        "evalpipe.labelling.label_cli", "main", "label a judging batch in a local web page (grades 0/1/2)"
    ),
    "judge-batch": Subcommand(
        "evalpipe.labelling.judge_batch_cli",
        "main",
        "the LLM judge labels a judging batch; its agreement with people and a canary fooled rate",
    ),
}
