"""The labelling page's app in-process (Flask's test client): the token, what is shown (blind by
default), verdicts saved before the answer, undo, a full disk refused with the item kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TINY_UNITS
from evalpipe.core.unit import Unit
from evalpipe.judge.batch import Item, current, read_batch, read_labels, write_batch
from evalpipe.labelling.server import make_app
from evalpipe.labelling.session import Session, context_of
from evalpipe.safety.errors import EvalpipeError

TOKEN = "t0ken"


@pytest.fixture
def session(tmp_path):
    batch = tmp_path / "b.pool.jsonl"
    items = [
        Item("c1", "concept", "combine two settings dicts", "pkg/a.py::Session.merge", {"r": 1}, 1.0, ""),
        Item("c1", "concept", "combine two settings dicts", "docs/guide.md#install", {"r": 2}, 0.5, ""),
        Item("c2", "exact", "Open", "pkg/a.py", {"r": 1}, 0.1, ""),
    ]
    write_batch(batch, {"fixture": "fx.yaml", "fixture_sha256": "abc", "depth": 5, "runs": []}, items)
    units = {u["id"]: Unit.from_record(u) for u in TINY_UNITS}
    expected = {"c1": ("pkg/a.py::merge_settings",), "c2": ("pkg/b.go::Open",)}
    return Session(read_batch(batch), units, expected, "alice")


def client(session):
    return make_app(session, TOKEN).test_client()


def test_every_request_needs_the_token(session):
    c = client(session)
    assert c.get("/").status_code == 403
    assert c.get("/api/state?token=wrong").status_code == 403
    assert c.get(f"/?token={TOKEN}").status_code == 200


def test_state_is_blind_and_verdicts_are_on_disk_when_answered(session):
    c = client(session)
    state = c.get(f"/api/state?token={TOKEN}").get_json()
    item = state["item"]
    assert item["candidate"] == "pkg/a.py::Session.merge" and item["expected"] == [] and state["blind"]
    assert item["path"] == "pkg/a.py" and "merge" in item["text"]
    body = {"case_id": "c1", "candidate": "pkg/a.py::Session.merge", "grade": 2, "seconds": 3.5}
    r = c.post(f"/api/label?token={TOKEN}", json=body)
    assert r.status_code == 200 and r.get_json()["item"]["candidate"] == "docs/guide.md#install"
    (lab,) = read_labels(session.path)  # on disk once answered
    assert (lab.case_id, lab.candidate, lab.grade, lab.assessor, lab.seconds) == (
        "c1",
        "pkg/a.py::Session.merge",
        2,
        "alice",
        3.5,
    )
    # A verdict for an item that is not the one shown, or a bad grade: refused, nothing written.
    stale = c.post(f"/api/label?token={TOKEN}", json=body)
    assert stale.status_code == 409
    bad = c.post(f"/api/label?token={TOKEN}", json={**body, "candidate": "docs/guide.md#install", "grade": 3})
    assert bad.status_code == 409 and len(read_labels(session.path)) == 1
    # Skip, then undo it: the item comes back.
    skip = {"case_id": "c1", "candidate": "docs/guide.md#install", "grade": None, "seconds": 1}
    assert c.post(f"/api/label?token={TOKEN}", json=skip).get_json()["progress"]["skipped"] == 1
    undone = c.post(f"/api/undo?token={TOKEN}", json={}).get_json()
    assert undone["item"]["candidate"] == "docs/guide.md#install" and undone["progress"]["skipped"] == 0
    assert [(k[1], v.grade) for k, v in current(read_labels(session.path)).items()] == [
        ("pkg/a.py::Session.merge", 2)
    ]


def test_a_full_disk_answers_507_and_keeps_the_item(session):
    session.path = Path("/dev/full")  # every write fails with ENOSPC
    if not session.path.exists():
        pytest.skip("/dev/full is not available")
    c = client(session)
    body = {"case_id": "c1", "candidate": "pkg/a.py::Session.merge", "grade": 1, "seconds": 2}
    r = c.post(f"/api/label?token={TOKEN}", json=body)
    assert r.status_code == 507 and "cannot save the verdict" in r.get_json()["error"]
    assert c.get(f"/api/state?token={TOKEN}").get_json()["item"]["candidate"] == "pkg/a.py::Session.merge"


def test_restart_resumes_and_a_foreign_label_is_refused(session, tmp_path):
    session.give("c1", "pkg/a.py::Session.merge", 0, 1.0)
    again = Session(session.batch, session.units, session.expected, "alice")
    assert again.shown().item.candidate == "docs/guide.md#install"
    other = Session(session.batch, session.units, session.expected, "bob")  # another assessor starts over
    assert other.shown().index == 0 and other.others == ["alice"]
    other.give("c1", "pkg/a.py::Session.merge", 0, 1.0)
    other.give("c1", "docs/guide.md#install", 1, 1.0)  # alice has not graded it: not compared
    (line,) = Session(session.batch, session.units, session.expected, "bob").agreement_lines()
    assert line.startswith("bob vs alice: 1 items judged by both, agree on 100%, Cohen's kappa 1.00")
    with session.path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"case_id": "zz", "candidate": "x", "grade": 1, "assessor": "a"}) + "\n")
    with pytest.raises(
        EvalpipeError, match=r"b.pool.labels.jsonl:4: case 'zz' / unit 'x' is not in the batch"
    ):
        Session(session.batch, session.units, session.expected, "alice")


def test_context_is_the_enclosing_unit_or_the_section_path():
    units = {u["id"]: Unit.from_record(u) for u in TINY_UNITS}
    method = Unit(
        "pkg/a.py::Session.merge",
        "method",
        "Session.merge",
        "def merge",
        "pkg/a.py",
        metadata={"parent": "pkg/a.py"},
    )
    assert context_of(method, units).startswith("in module")
    chunk = Unit(
        "d.md#x",
        "section",
        "X",
        "t",
        "d.md",
        metadata={"heading_path": ["Guide", "X"], "document_id": "d.md"},
    )
    assert context_of(chunk, units) == "in d.md › Guide › X"
