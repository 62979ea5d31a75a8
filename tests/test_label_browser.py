"""The labelling page in a real browser: a pool of three real runs (bm25, bm25f, exact on a
part of the gold fixture) judged with the keyboard in headless Chromium (Debian's, driven by
Selenium through chromedriver); `kill -9` of the server mid-batch loses no verdict, and a
restart resumes where it stopped. Skipped when chromium or chromedriver is not installed
(`apt-get install -y chromium chromium-driver`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evalpipe.fixture_check import cli as check_cli
from evalpipe.inputs.fixture import load_fixture
from evalpipe.judge import merge
from evalpipe.judge.batch import current, read_batch, read_labels
from evalpipe.labelling import label_cli, pool_cli
from evalpipe.scoring import metrics

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (dev extra)")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)),
        reason="chromium / chromedriver not installed (apt-get install -y chromium chromium-driver)",
    ),
]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MLFLOW_DISABLE_TELEMETRY": "true"}


@pytest.fixture(scope="module")
def pooled(tmp_path_factory):
    """A 6-case part of the gold fixture, three real runs on it, and their pool at depth 3."""
    tmp = tmp_path_factory.mktemp("label")
    gold = yaml.safe_load((ROOT / "fixtures" / "gold.yaml").read_text(encoding="utf-8"))
    picked = []
    for tier in ("exact", "concept", "multi_hop"):
        picked += [c for c in gold["cases"] if c.get("tier") == tier][:2]
    fx = tmp / "fx.yaml"
    fx.write_text(
        yaml.safe_dump(
            {"name": "goldpart", "corpus": str(ROOT / "fixtures" / "gold_corpus.jsonl"), "cases": picked},
            sort_keys=False,
        ),
        encoding="utf-8",
    )
    folders, procs = [], []
    for ranker in ("bm25", "bm25f", "exact"):  # three real runs, at once
        out = tmp / f"run_{ranker}"
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "evalpipe", f"fixture.path={fx}", "fixture.name=goldpart",
             f"ranker={ranker}",
             "tracking.offline=true", "progress=false", "plots=false", f"hydra.run.dir={out}"],
            env=env(), cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        ))  # fmt: skip
        folders.append(str(out))
    for proc in procs:
        _, err = proc.communicate()
        assert proc.returncode == 0, err
    batch = tmp / "goldpart.pool.jsonl"
    assert pool_cli.main(["--fixture", str(fx), "--depth", "3", *folders, "-o", str(batch)]) == 0
    return fx, batch, folders


class Server:
    """`evalpipe label` as a child process; ready when it prints its URL (no clock involved)."""

    def __init__(self, batch: Path, assessor: str):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evalpipe", "label", str(batch), "--assessor", assessor],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
        )  # fmt: skip
        self.url = ""
        for line in self.proc.stdout:  # blocks until the line comes (or the process ends)
            if line.startswith("labelling page: "):
                self.url = line.split(": ", 1)[1].strip()
                break
        assert self.url, self.proc.stderr.read()


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    yield driver
    driver.quit()


def press(driver, key: str) -> None:
    """Press `key` on the page and wait until the server answered (the page counts its answers)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    before = int(driver.execute_script("return Number(document.body.dataset.saved || 0)"))
    ActionChains(driver).send_keys(key).perform()
    WebDriverWait(driver, 60).until(
        lambda d: int(d.execute_script("return Number(document.body.dataset.saved || 0)")) > before
    )


def open_page(driver, url: str) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.ready") == "1")


def shown(driver) -> tuple[str, str]:
    case = driver.find_element("id", "case").text
    return case, driver.execute_script("return document.body.dataset.candidate")


def test_label_a_pool_in_chromium_and_kill_9_loses_nothing(pooled, browser):
    fx, batch, folders = pooled
    items = read_batch(batch).items
    assert len(items) >= 8
    assert {r for it in items for r in it.runs} == {"bm25", "bm25f", "exact"}
    server = Server(batch, "tester")
    try:
        open_page(browser, server.url)
        # Blind by default: the listed answers are not on the page.
        assert browser.find_element("id", "expected").text == ""
        assert shown(browser) == items[0].key
        given: dict[tuple[str, str], int | None] = {}
        for key, grade in [("2", 2), ("0", 0), ("1", 1), ("s", None)]:
            given[shown(browser)] = grade
            press(browser, key)
        # Undo takes the skip back: that item is shown again, then graded.
        press(browser, "u")
        undone = list(given)[-1]
        assert shown(browser) == undone
        given[undone] = 0
        press(browser, "0")
        assert browser.find_element("id", "progress").text == f"4 judged, 0 skipped of {len(items)}"
        # A second server on the same batch is refused (the lock), with one line and exit 2.
        assert label_cli.main([str(batch), "--assessor", "other"]) == 2
        # kill -9 in the middle of the batch: every verdict given is on disk.
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    standing = {
        (k[0], k[1]): v.grade
        for k, v in current(read_labels(batch.with_name("goldpart.pool.labels.jsonl"))).items()
    }
    assert standing == given
    lines = read_labels(batch.with_name("goldpart.pool.labels.jsonl"))
    assert all(lab.assessor == "tester" and lab.how == "page" for lab in lines)
    assert all(lab.seconds > 0 for lab in lines if lab.grade is not None)
    # Restart: resumes at the first item not judged, with the same counts.
    server = Server(batch, "tester")
    try:
        open_page(browser, server.url)
        assert shown(browser) == items[4].key
        assert browser.find_element("id", "progress").text == f"4 judged, 0 skipped of {len(items)}"
        given[shown(browser)] = 1
        press(browser, "1")
        # A wrong token is refused.
        browser.get(server.url.split("?")[0] + "api/state?token=wrong")
        assert "wrong token" in browser.find_element("tag name", "body").text
    finally:
        server.proc.send_signal(signal.SIGTERM)
        server.proc.wait(timeout=60)
    standing = {
        (k[0], k[1]): v.grade
        for k, v in current(read_labels(batch.with_name("goldpart.pool.labels.jsonl"))).items()
    }
    assert standing == given

    # The page's labels merged: the new fixture passes check-fixture, and each run's strict R@5
    # changes exactly where a newly positive label sits in its top 5 (recounted from its cases.jsonl).
    out = fx.parent / "fx_v2.yaml"
    assert merge.main([str(fx), str(batch.with_name("goldpart.pool.labels.jsonl")), "-o", str(out)]) == 0
    assert check_cli.main([str(out)]) == 0
    old = {c.id: dict(c.qrels) for c in load_fixture(fx).cases}
    new = {c.id: dict(c.qrels) for c in load_fixture(out).cases}
    assert {(c, u): g for c in new for u, g in new[c].items() if u not in old[c]} == given_graded(given)
    changed_somewhere = False
    for folder in folders:
        rows = [
            json.loads(x) for x in (Path(folder) / "cases.jsonl").read_text(encoding="utf-8").splitlines()
        ]
        ids = [r["case_id"] for r in rows]
        tops = [json.loads(r["top"]) for r in rows]
        after = metrics.evaluate(tops, [new[c] for c in ids], [5])["recall_at_5"]
        for row, top, value in zip(rows, tops, after, strict=True):
            gained = any(new[row["case_id"]].get(u, 0) >= 1 for u in top[:5])
            assert value == (1.0 if gained else 0.0)
            assert row["recall_at_5"] == (
                1.0 if any(old[row["case_id"]].get(u, 0) >= 1 for u in top[:5]) else 0.0
            )
            changed_somewhere |= value != row["recall_at_5"]
    assert changed_somewhere == any(g >= 1 for g in given_graded(given).values())


def given_graded(given):
    return {k: g for k, g in given.items() if g is not None}
