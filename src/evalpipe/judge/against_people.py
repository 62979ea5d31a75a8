"""The judge checked against people: its verdicts on a judging batch, agreement with the people
who labelled the same batch, and canary pairs that measure how often it is fooled.

- **Verdicts** are written into the batch's labels file as assessor `judge:<backend>:<model>`
  (grade 1 relevant, 0 not: the judge answers yes/no), so `merge-judgements`' provenance and
  conflict rules treat them like any other assessor's.
- **Agreement** is binary (a person's grade >= 1 is relevant): Cohen's kappa with a percentile
  bootstrap CI (`judge.agreement`), the confusion counts, and the precision of rescues: of the
  items the judge calls relevant (every batch item is a candidate the fixture had no label
  for), the share people call relevant. Overall and per tier. Several people on one item are
  merged by majority, a tie counting as not relevant (the `majority` rule of merge-judgements).
- **Canaries**: for a seeded sample of cases, a corpus unit no case in the batch pooled and the
  case does not list, its text followed by the query's words, is asked about too. It is
  unrelated by construction, so the share the judge calls relevant is the fooled rate.

A judge whose kappa is below `KAPPA_FLOOR` is flagged in what is printed and in the JSON.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from evalpipe.judge.agreement import agreement
from evalpipe.judge.batch import Batch, Item, Label, current
from evalpipe.judge.pairs import Pair
from evalpipe.safety.errors import EvalpipeError

KAPPA_FLOOR = 0.6
CANARY_PREFIX = "canary::"


def judge_assessor(backend: str, model: str) -> str:
    return f"judge:{backend}:{model}"


@dataclass(frozen=True)
class Canary:
    case_id: str
    query: str
    unit_id: str  # the canary's own ID: canary::<case>::<the unrelated unit's ID>
    source: str  # the unrelated unit it was made from


def make_canaries(
    batch: Batch,
    units: Mapping[str, Any],
    expected: Mapping[str, Sequence[str]],
    share: float,
    seed: int,
) -> tuple[list[Canary], dict[str, Any]]:
    """Canaries for a seeded sample of `share` of the batch's cases, and the units to ask about.

    The unrelated unit is drawn (seeded) from the corpus units that are neither a candidate of any
    case in the batch (a candidate might be relevant to a neighbouring case) nor listed by the case
    in the fixture; its text gets the query appended three times, so it looks relevant to a judge
    that matches words."""
    cases: dict[str, Item] = {}
    for it in batch.items:
        cases.setdefault(it.case_id, it)
    rng = random.Random(seed)
    ids = sorted(cases)
    chosen = sorted(rng.sample(ids, round(share * len(ids)))) if ids and share > 0 else []
    pooled = {it.candidate for it in batch.items}
    pool = sorted(u for u in units if u not in pooled and not u.startswith(CANARY_PREFIX))
    out: list[Canary] = []
    made: dict[str, Any] = {}
    for cid in chosen:
        listed = set(expected.get(cid, ()))
        others = [u for u in pool if u not in listed]
        if not others:
            continue
        src = others[rng.randrange(len(others))]
        unit = units[src]
        query = cases[cid].query
        canary_id = f"{CANARY_PREFIX}{cid}::{src}"  # per case: the text carries that case's query
        made[canary_id] = replace(unit, id=canary_id, text=f"{unit.text or ''}\n{query}\n{query}\n{query}")
        out.append(Canary(cid, query, canary_id, src))
    return out, made


def pairs_for(batch: Batch, canaries: Sequence[Canary]) -> list[Pair]:
    """The pairs to ask, batch items first (in the batch's order: the budget is spent on them first)."""
    out = [Pair(it.case_id, it.query, it.candidate, 0) for it in batch.items]
    out += [Pair(c.case_id, c.query, c.unit_id, 0) for c in canaries]
    return out


def people_relevance(labels: Sequence[Label], judge_prefix: str = "judge:") -> dict[tuple[str, str], bool]:
    """Per (case, unit): do the people (every assessor not a judge) call it relevant? Majority of
    their standing grades >= 1, a tie not relevant; skips count for nothing."""
    votes: dict[tuple[str, str], list[bool]] = {}
    for (case, unit, who), lab in current(labels).items():
        if who.startswith(judge_prefix) or lab.grade is None or lab.skip:
            continue
        votes.setdefault((case, unit), []).append(lab.grade >= 1)
    return {k: sum(v) > len(v) / 2 for k, v in votes.items()}


def _block(pairs: Sequence[tuple[bool, bool]], seed: int) -> dict[str, Any]:
    """Figures of (judge, people) pairs: kappa with its CI, confusion counts, rescue precision."""
    tp = sum(j and p for j, p in pairs)
    fp = sum(j and not p for j, p in pairs)
    fn = sum(p and not j for j, p in pairs)
    tn = sum(not j and not p for j, p in pairs)
    agr = agreement([(int(j), int(p)) for j, p in pairs], seed=seed)
    return {
        "items": len(pairs),
        "kappa": None if agr is None else agr.kappa,
        "kappa_lo": None if agr is None else agr.lo,
        "kappa_hi": None if agr is None else agr.hi,
        "confusion": {
            "judge_yes_people_yes": tp,
            "judge_yes_people_no": fp,
            "judge_no_people_yes": fn,
            "judge_no_people_no": tn,
        },
        "rescue_precision": tp / (tp + fp) if tp + fp else None,
        "rescues": tp + fp,
    }


def report(
    batch: Batch,
    judge_says: Mapping[tuple[str, str], bool],
    people: Mapping[tuple[str, str], bool],
    canary_says: Mapping[str, bool | None],
    judge: str,
    seed: int = 0,
) -> dict[str, Any]:
    """The agreement report (a JSON-able dict): overall, per tier, canaries, and the floor verdict."""
    tiers = {it.key: it.tier or "(none)" for it in batch.items}
    both = [(k, judge_says[k], people[k]) for k in tiers if k in judge_says and k in people]
    overall = _block([(j, p) for _, j, p in both], seed)
    per_tier = {
        t: _block([(j, p) for k, j, p in both if tiers[k] == t], seed) for t in sorted(set(tiers.values()))
    }
    asked = [v for v in canary_says.values() if v is not None]
    fooled = sum(asked)
    kappa = overall["kappa"]
    return {
        "judge": judge,
        "batch": str(batch.path),
        "kappa_floor": KAPPA_FLOOR,
        "below_floor": kappa is None or kappa < KAPPA_FLOOR,
        "method": "Cohen's kappa (unweighted, binary: grade>=1 relevant), percentile bootstrap 95% CI "
        "over items, 2000 resamples, seeded",
        "overall": overall,
        "tiers": per_tier,
        "canaries": {
            "asked": len(canary_says),
            "answered": len(asked),
            "fooled": fooled,
            "fooled_rate": fooled / len(asked) if asked else None,
        },
    }


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def lines(rep: Mapping[str, Any]) -> list[str]:
    """The report as terminal lines (the same figures as the JSON)."""
    out = []

    def one(name: str, b: Mapping[str, Any]) -> str:
        c = b["confusion"]
        return (
            f"{name}: {b['items']} items, kappa {_num(b['kappa'])} "
            f"[{_num(b['kappa_lo'])}, {_num(b['kappa_hi'])}]; "
            f"judge yes/people yes {c['judge_yes_people_yes']}, yes/no {c['judge_yes_people_no']}, "
            f"no/yes {c['judge_no_people_yes']}, no/no {c['judge_no_people_no']}; rescue precision "
            f"{_num(b['rescue_precision'], '.0%')} of {b['rescues']}"
        )

    out.append(f"{rep['judge']} vs people ({rep['method']})")
    out.append(one("overall", rep["overall"]))
    for t, b in rep["tiers"].items():
        out.append(one(f"  tier {t}", b))
    c = rep["canaries"]
    out.append(
        f"canaries: fooled {c['fooled']} of {c['answered']} answered ({_num(c['fooled_rate'], '.0%')}; "
        f"{c['asked']} asked)"
    )
    if rep["below_floor"]:
        out.append(
            f"BELOW AGREEMENT: kappa {_num(rep['overall']['kappa'])} < {rep['kappa_floor']}: this judge's "
            "judged figures are not trusted"
        )
    else:
        out.append(f"agreement at or above the stated floor (kappa >= {rep['kappa_floor']})")
    return out


@dataclass(frozen=True)
class Trust:
    """A judge's measured agreement with people (`judge.agreement_file`, written by judge-batch)."""

    path: str
    judge: str
    kappa: float | None
    lo: float | None
    hi: float | None
    items: int
    floor: float = KAPPA_FLOOR

    @property
    def below(self) -> bool:
        return self.kappa is None or self.kappa < self.floor

    def line(self) -> str:
        head = (
            f"Agreement with people ({self.path}): Cohen's kappa {_num(self.kappa)} "
            f"[{_num(self.lo)}, {_num(self.hi)}] on {self.items} items"
        )
        if self.below:
            return (
                f"{head}: BELOW AGREEMENT (kappa < {self.floor}): these judged figures come from a judge "
                "people do not agree with; do not trust them."
            )
        return f"{head}: at or above the stated floor (kappa >= {self.floor})."

    def tags(self) -> dict[str, str]:
        return {
            "evalpipe.judge_agreement": "below" if self.below else "ok",
            "evalpipe.judge_kappa": _num(self.kappa, ".4f"),
        }


def read_trust(path: str, judge_label: str) -> Trust:
    """The agreement file of *this* judge, checked before the first case (a file for another judge
    would mark these figures with someone else's agreement)."""
    where = f"judge.agreement_file={path}"
    try:
        rep = json.loads(Path(path).expanduser().read_text(encoding="utf-8"))
        overall = rep["overall"]
        judge = str(rep["judge"])
        kappa = overall["kappa"]
        trust = Trust(
            path,
            judge,
            None if kappa is None else float(kappa),
            None if overall.get("kappa_lo") is None else float(overall["kappa_lo"]),
            None if overall.get("kappa_hi") is None else float(overall["kappa_hi"]),
            int(overall["items"]),
        )
    except OSError as exc:
        raise EvalpipeError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, KeyError, TypeError):
        raise EvalpipeError(
            f"{where}: not an agreement file (write one with `evalpipe judge-batch BATCH`)"
        ) from None
    want = f"judge:{judge_label}"
    if judge != want:
        raise EvalpipeError(
            f"{where}: measures {judge}, but this run's judge is {want}; run judge-batch with this judge"
        )
    return trust
