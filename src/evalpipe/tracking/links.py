"""Where a run can be seen in the MLflow UI, and how evalpipe experiments open there.

MLflow 3.17's UI opens every experiment on its GenAI "Overview" (traces) unless the URL says
`workflowType=machine_learning`: its workflow switch is always on, so the UI takes the
experiment's kind from the URL or from the browser's last toggle (local storage key
`mlflow.workflowType`), not from the `mlflow.experimentKind` tag. evalpipe therefore tags its
experiments `custom_model_development` (what UIs that read the tag use to pick the runs table),
prints links that carry `workflowType=machine_learning`, and gives each experiment a description
(a banner above every experiment page, the GenAI view included) that links the runs table.

The runs table shows no metric columns until someone picks them. The UI restores a "shared
view" (columns, their widths, the sort and the search filter) from an experiment tag
`mlflow.sharedViewState.<key>` when the URL carries `viewStateShareKey=<key>` (and no filter or
sort of its own), so evalpipe stores one that reads at a glance, and its experiment links open it:

- only measured runs: the filter `MEASURED_FILTER` hides reused sweep points (copies of a run
  that is in the table already), sweep parents, compare and gate runs (they have no objective);
- sorted by the objective, best first;
- the headline metrics right after the run name, then the ranker and the Datasets column, at
  widths that fit recall@K, MRR and nDCG@K for three K on a 1600 px screen.

MLflow (3.17) shows every metric at full precision (0.53431372...) and has no setting to round
the runs table; the run page's description (the headline table) and `summary.md` are rounded.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

#: The tag MLflow 3 UIs read for an experiment's kind, and the value of the classic runs view.
KIND_TAG = "mlflow.experimentKind"
KIND = "custom_model_development"
WORKFLOW = "workflowType=machine_learning"
#: Shared-view tag prefix the UI reads for `viewStateShareKey=<key>` links.
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
VIEW_KEY = "evalpipe"
#: The experiment description tag, and how evalpipe's own description starts (so it is never
#: written over a description someone else wrote).
NOTE_TAG = "mlflow.note.content"
NOTE_MARK = "**evalpipe runs.**"
#: What `mlflow ui` serves by default (for a local SQLite store).
LOCAL_UI = "http://127.0.0.1:5000"


def ui_base(uri: str) -> str | None:
    """The UI address for a tracking URI: `mlflow ui`'s default for SQLite, the server itself for http(s)."""
    if uri.startswith("sqlite:"):
        return LOCAL_UI
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    return None


def experiment_url(uri: str, experiment_id: str) -> str | None:
    """The experiment's runs table with evalpipe's columns (headline metrics, sorted by the objective)."""
    base = ui_base(uri)
    if base is None:
        return None
    return f"{base}/#/experiments/{experiment_id}/runs?{WORKFLOW}&viewStateShareKey={VIEW_KEY}"


def run_url(uri: str, experiment_id: str, run_id: str) -> str | None:
    base = ui_base(uri)
    if base is None:
        return None
    return f"{base}/#/experiments/{experiment_id}/runs/{run_id}?{WORKFLOW}"


def headline_columns(ks: Sequence[int]) -> list[str]:
    """recall@K for every K, MRR, then nDCG@K: the runs table's metric columns."""
    ks = sorted(set(int(k) for k in ks))
    return [f"recall_at_{k}" for k in ks] + ["mrr"] + [f"ndcg_at_{k}" for k in ks]


#: The runs table's Datasets column (MLflow names attribute columns by their label).
DATASETS_COLUMN = "attributes.`Dataset`"
NAME_COLUMN = "attributes.`Run Name`"
#: Column widths (px): a run name such as `bm25 k1=0.9 b=0.4 fields=[title]`; a metric's first 6 digits.
NAME_WIDTH = 260
METRIC_WIDTH = 90
#: A reused sweep point carries this tag (`evalpipe.tracking.reuse.REUSED_TAG`; not imported: links
#: is imported by every run, reuse by sweeps only).
REUSED_TAG = "evalpipe.reused_run_id"


def measured_filter(order_by: str) -> str:
    """The runs a table of measurements lists: not a reused copy, and with the objective logged
    (which leaves out sweep parents, compare and gate runs and skipped rankers)."""
    return f"tags.`{REUSED_TAG}` IS NULL and metrics.`{order_by}` >= 0"


def view_state(metrics: Sequence[str], params: Sequence[str], order_by: str) -> dict[str, Any]:
    """The runs table state the UI restores from a shared view: chosen columns, in order, their
    widths, the sort and the filter (only measured runs).

    The headline metrics come right after the run name, then the params (the ranker), then the
    Datasets column: what each run was measured on (its fixture and corpus inputs)."""
    metric_columns = [f"metrics.`{m}`" for m in metrics]
    columns = metric_columns + [f"params.`{p}`" for p in params] + [DATASETS_COLUMN]
    return {
        "selectedColumns": columns,
        "columnOrder": [NAME_COLUMN, *columns],
        "columnWidths": {NAME_COLUMN: NAME_WIDTH, **{c: METRIC_WIDTH for c in metric_columns}},
        "orderByKey": f"metrics.`{order_by}`",
        "orderByAsc": False,
        "searchFilter": measured_filter(order_by),
    }


def prepare_experiment(
    client: Any, experiment_id: str, ks: Sequence[int] = (1, 5, 20), objective: str = "recall_at_5"
) -> None:
    """Tag an evalpipe experiment so the UI opens it on the runs table with the headline columns.

    Idempotent and cheap (one read; writes only what changed), so every run and sweep calls it,
    which also upgrades experiments created by older evalpipe versions. A run with new K values
    widens the view to the union of the columns.
    """
    try:
        _prepare(client, experiment_id, ks, objective)
    except Exception:  # a read-only or older server: the links still work, only the defaults are missing
        return


def _prepare(client: Any, experiment_id: str, ks: Sequence[int], objective: str) -> None:
    tags = client.get_experiment(experiment_id).tags or {}
    if tags.get(KIND_TAG) != KIND:
        client.set_experiment_tag(experiment_id, KIND_TAG, KIND)
    note = experiment_note(experiment_id)
    current = tags.get(NOTE_TAG)
    if current != note and (not current or current.startswith(NOTE_MARK)):  # never a user's own text
        client.set_experiment_tag(experiment_id, NOTE_TAG, note)
    view_tag = VIEW_TAG_PREFIX + VIEW_KEY
    metrics = headline_columns(ks)
    old: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        old = json.loads(tags.get(view_tag) or "{}")
    old_metrics = [
        c[len("metrics.`") : -1] for c in old.get("selectedColumns", []) if str(c).startswith("metrics.`")
    ]
    union = list(dict.fromkeys(old_metrics + metrics))
    by_family = sorted(union, key=lambda m: (_family_rank(m), _k(m)))
    order_by = objective if not old.get("orderByKey") else old["orderByKey"][len("metrics.`") : -1]
    state = view_state(by_family, ["ranker"], order_by)
    if state != old:
        client.set_experiment_tag(experiment_id, view_tag, json.dumps(state))


def experiment_note(experiment_id: str) -> str:
    """The experiment's description, shown as a banner above every experiment page, GenAI view
    included: where the runs are, as a link relative to whatever address the UI is served at."""
    return (
        f"{NOTE_MARK} MLflow may open this experiment on its GenAI view (traces, empty here): click "
        f"**Model training** at the top left, or open [the runs table]"
        f"(#/experiments/{experiment_id}/runs?{WORKFLOW}&viewStateShareKey={VIEW_KEY}) "
        "(measured runs only, headline columns, sorted by the objective)."
    )


def _family_rank(metric: str) -> int:
    for i, prefix in enumerate(("recall_at_", "mrr", "ndcg_at_")):
        if metric.startswith(prefix):
            return i
    return 3


def _k(metric: str) -> int:
    tail = metric.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def ui_lines(uri: str, experiment_id: str, run_id: str, ui_command: str) -> list[str]:
    """What to print after a run or sweep: the run's page, the experiment's runs table, how to serve them."""
    lines = []
    run = run_url(uri, experiment_id, run_id)
    exp = experiment_url(uri, experiment_id)
    if run:
        lines.append(f"run page:   {run}")
    if exp:
        lines.append(f"runs table: {exp}")
    lines.append(f"serve it:   {ui_command}")
    # lazy: evalpipe.safety.secrets, ~4 ms
    from evalpipe.safety.secrets import mask_text

    return [mask_text(line) for line in lines]  # a server URI's user:password is never printed


def run_href(experiment_id: str, run_id: str) -> str:
    """A run page as a link relative to wherever the UI is served (for descriptions shown in the UI)."""
    return f"#/experiments/{experiment_id}/runs/{run_id}?{WORKFLOW}"


def run_link_suffix(uri: str, experiment_id: str, run_id: str) -> str:
    """` (<run page URL>)` for a line naming a run, or "" where the store has no UI address; masked."""
    # lazy: evalpipe.safety.secrets, ~4 ms
    from evalpipe.safety.secrets import mask_text

    url = run_url(uri, experiment_id, run_id)
    return f" ({mask_text(url)})" if url else ""


def print_links(
    console: Any, tracker: Any, experiment: str, experiment_id: str, run_id: str, run_name: str
) -> None:
    """Where a single run is in MLflow (printed after its tables, once it is uploaded)."""
    from rich.markup import escape  # lazy: rich, only to print (the upload worker imports links)

    console.print(
        f"MLflow: experiment [bold]{escape(experiment)}[/] · run [bold]{run_id}[/] ({escape(run_name)})",
        highlight=False,
    )
    for line in ui_lines(tracker.uri, experiment_id, run_id, tracker.ui_command):
        console.print(escape(line), highlight=False, soft_wrap=True)
