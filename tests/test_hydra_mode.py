"""Hydra's run/multirun decision without a second compose (evalpipe.evaluation.hydra_mode)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalpipe.evaluation.hydra_mode import folder_sets_mode, mode_is_unset, source_folders

ROOT = Path(__file__).resolve().parents[1]
CONF = str(ROOT / "conf")


class Source:
    def __init__(self, scheme: str, path: str):
        self._scheme, self.path = scheme, path

    def scheme(self) -> str:
        return self._scheme


def test_our_configs_cannot_set_the_mode_so_no_compose_is_needed():
    folders = source_folders([Source("pkg", "hydra.conf"), Source("file", CONF), Source("structured", "")])
    assert folders is not None and CONF in folders and len(folders) == 2
    assert mode_is_unset(folders, ["ranker=bm25", "fixture=gold", "ks=[5,10]"])


@pytest.mark.parametrize(
    "override", ["hydra.mode=MULTIRUN", "+hydra.mode=RUN", "hydra.searchpath=[file:///elsewhere]"]
)
def test_an_override_of_the_mode_or_search_path_asks_hydra(override):
    assert not mode_is_unset([CONF], ["ranker=bm25", override])


@pytest.mark.parametrize(
    "text",
    [
        "hydra:\n  mode: MULTIRUN\n",
        "# @package _global_\nhydra: {mode: multirun}\n",
        "hydra:\n  mode: 'RUN'\n",
    ],
)
def test_a_config_file_that_sets_the_mode_asks_hydra(tmp_path, text):
    (tmp_path / "sweep").mkdir()
    (tmp_path / "config.yaml").write_text("ks: [5]\n", encoding="utf-8")
    assert not folder_sets_mode(str(tmp_path))
    (tmp_path / "sweep" / "mine.yaml").write_text(text, encoding="utf-8")
    folder_sets_mode.cache_clear()
    assert not mode_is_unset([str(tmp_path)], [])


def test_a_source_that_is_not_a_folder_asks_hydra():
    assert source_folders([Source("pkg", "no_such_package_anywhere.conf")]) is None
    assert source_folders([Source("zip", "/x.zip")]) is None
    assert not mode_is_unset(None, [])


def test_a_config_that_sets_multirun_still_sweeps_without_dash_m(tmp_path):
    # Hydra's own decision, end to end, in an app that installs the shortcut: a config file with
    # hydra.mode=MULTIRUN makes a plain command a sweep; without it the same command is one run
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("x: 1\n", encoding="utf-8")
    app = tmp_path / "app.py"
    app.write_text(
        "import hydra\n"
        "from evalpipe.evaluation import hydra_mode\n"
        "from hydra.core.hydra_config import HydraConfig\n"
        f"@hydra.main(config_path={str(conf)!r}, config_name='config', version_base='1.3')\n"
        "def main(cfg):\n"
        "    print('MODE', HydraConfig.get().mode.name, cfg.x)\n"
        "hydra_mode.install()\n"
        "main()\n",
        encoding="utf-8",
    )

    def modes(*args: str) -> list[str]:
        proc = subprocess.run(
            [
                sys.executable,
                str(app),
                *args,
                f"hydra.run.dir={tmp_path / 'r'}",
                f"hydra.sweep.dir={tmp_path / 's'}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        return [line for line in proc.stdout.splitlines() if line.startswith("MODE")]

    assert modes("x=2") == ["MODE RUN 2"]
    assert modes("-m", "x=2,3") == ["MODE MULTIRUN 2", "MODE MULTIRUN 3"]
    (conf / "config.yaml").write_text("x: 1\nhydra:\n  mode: MULTIRUN\n", encoding="utf-8")
    assert modes("x=4,5") == ["MODE MULTIRUN 4", "MODE MULTIRUN 5"]
