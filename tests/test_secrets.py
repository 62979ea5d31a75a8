"""Secrets never reach a file, the store or the terminal.

Unit checks of the rule (`evalpipe.safety.secrets`), then real processes with unique secret values given
as a plug-in ranker's `api_key`, as the user:password of URLs (an endpoint and the tracking URI of a
real `mlflow server`) and through `${oc.env:...}`; then every byte written (output dirs, multirun
dir, Hydra's files, the SQLite stores, the server's database and artifacts, stdout/stderr) is
searched for the secret values: zero hits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_helpers import all_runs, cli, cli_env, free_port, start_server, stop_server, write_tiny
from evalpipe.safety import secrets


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("ranker.api_key", True),
        ("judge.api_key", True),
        ("tracking.token", True),
        ("ranker.headers.Authorization", True),
        ("ranker.apiKey", True),
        ("hf_token", True),
        ("db.password", True),
        ("auth_header", True),
        ("client_secret", True),
        ("ks", False),
        ("keywords", False),
        ("token_encoding", False),
        ("monkey", False),
        ("ranker.k1", False),
    ],
)
def test_is_secret_key(key, secret):
    assert secrets.is_secret_key(key) is secret


def test_secret_words_extend_by_env(monkeypatch):
    assert not secrets.is_secret_key("ranker.tenant")
    monkeypatch.setenv("EVALPIPE_SECRET_KEYS", "tenant, sig")
    assert secrets.is_secret_key("ranker.tenant") and secrets.is_secret_key("x.sig")


def test_mask_config_keeps_env_interpolations_unresolved_and_masks_urls():
    raw = {"ranker": {"api_key": "k-123", "url": "http://bob:pw@h:1/x", "hdr": "${oc.env:HDR}", "ks": [1, 5]}}
    resolved = {"ranker": {"api_key": "k-123", "url": "http://bob:pw@h:1/x", "hdr": "resolved", "ks": [1, 5]}}
    assert secrets.mask_config(resolved, raw) == {
        "ranker": {"api_key": "***", "url": "http://***@h:1/x", "hdr": "${oc.env:HDR}", "ks": [1, 5]}
    }


def test_mask_text_masks_pairs_urls_and_registered_values():
    secrets.register(["Reg1steredValue"])
    text = "+ranker.api_key=abc ks=[1,5] see https://u:p@host/a and Reg1steredValue; keywords=foo"
    assert (
        secrets.mask_text(text) == "+ranker.api_key=*** ks=[1,5] see https://***@host/a and ***; keywords=foo"
    )


SECRET_KEY = "Qk7apikeyVALUE3141"
SECRET_URL = "Qk7urlpassVALUE2718"
SECRET_ENV = "Qk7envVALUE1618"
SECRET_ENV_TOKEN = "Qk7envtokenVALUE5772"
SECRET_TRACKING = "Qk7trackingVALUE1414"
ALL = (SECRET_KEY, SECRET_URL, SECRET_ENV, SECRET_ENV_TOKEN, SECRET_TRACKING)


def _ranker_args(progress: Path) -> list[str]:
    return [
        "~ranker",
        "+ranker._target_=plugins_for_tests.SlowRanker",
        "+ranker.delay=0",
        f"+ranker.progress_file={progress}",
        f"+ranker.api_key={SECRET_KEY}",
        f"+ranker.endpoint=http://svc:{SECRET_URL}@localhost:9/v1",
        "+ranker.extra_header=${oc.env:EVALPIPE_TEST_HEADER}",
        "+ranker.token=${oc.env:EVALPIPE_TEST_TOKEN}",
        "run_name=probe-${ranker.api_key}",
        "plots=false",
    ]


def _hits(root: Path) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(root)}: {s}" for s in ALL if s.encode() in data]
    return found


def test_no_secret_is_written_anywhere(tmp_path):
    fx = write_tiny(tmp_path)
    env = cli_env(EVALPIPE_TEST_HEADER=SECRET_ENV, EVALPIPE_TEST_TOKEN=SECRET_ENV_TOKEN)
    port = free_port()
    server = start_server(tmp_path, port)
    outputs = []
    try:
        # A single run to a tracking server whose URI carries user:password.
        uri = f"http://alice:{SECRET_TRACKING}@127.0.0.1:{port}"
        proc = cli(
            tmp_path,
            f"fixture.path={fx}",
            f"tracking.uri={uri}",
            f"hydra.run.dir={tmp_path / 'out'}",
            *_ranker_args(tmp_path / "p1.txt"),
            env=env,
        )
        outputs.append(proc.stdout + proc.stderr)
        assert proc.returncode == 0, proc.stderr
        assert "http://***@127.0.0.1" in proc.stdout  # the UI hint, masked
    finally:
        stop_server(server)
    # A sweep (parent + 2 children, summary, multirun.yaml) into a SQLite store, and an offline run.
    db_uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    proc = cli(
        tmp_path,
        "-m",
        f"fixture.path={fx}",
        f"tracking.uri={db_uri}",
        f"hydra.sweep.dir={tmp_path / 'multirun'}",
        *_ranker_args(tmp_path / "p2.txt"),
        "+ranker.variant=1,2",
        env=env,
    )
    outputs.append(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr
    proc = cli(
        tmp_path,
        f"fixture.path={fx}",
        "tracking.offline=true",
        f"hydra.run.dir={tmp_path / 'offline'}",
        *_ranker_args(tmp_path / "p3.txt"),
        env=env,
    )
    outputs.append(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stderr
    synced = cli(tmp_path, "sync", "--tracking-uri", db_uri, str(tmp_path / "offline"), env=env)
    outputs.append(synced.stdout + synced.stderr)
    assert synced.returncode == 0, synced.stderr

    # The runs did happen and say where the secrets were (masked), so the search below means something.
    runs = all_runs(db_uri)
    assert len(runs) == 4  # parent, 2 children, the synced offline run
    child = next(r for r in runs if r.data.tags.get("evalpipe.role") == "child")
    assert child.data.params.get("ranker.api_key") in (None, "***")  # params leave api_key out
    assert child.data.params["ranker.endpoint"] == "http://***@localhost:9/v1"
    assert child.data.params["ranker.extra_header"] == "${oc.env:EVALPIPE_TEST_HEADER}"
    assert child.data.params["ranker.token"] == "***"
    assert child.info.run_name == "probe-***"
    assert (tmp_path / "multirun" / "multirun.yaml").is_file() and (
        tmp_path / "out" / ".hydra" / "hydra.yaml"
    ).is_file()
    assert "api_key: '***'" in (tmp_path / "out" / "config.yaml").read_text()

    assert _hits(tmp_path) == []
    assert [s for s in ALL for text in outputs if s in text] == []


@pytest.mark.parametrize(
    "args",
    [
        ["ranker.api_key=SEKRET-no-plus-7f3a"],  # Hydra: "use +ranker.api_key=<value>"
        ["ranker.token=SEKRET-no-plus-7f3a", "ranker.k1=oops"],
        ["ranker.nope=1", "tracking.uri=http://bob:SEKRET-no-plus-7f3a@127.0.0.1:9/"],
        ["+ranker.api_key=SEKRET-no-plus-7f3a", "ranker=nope"],
        ["ranker.password=SEKRET;no-plus-7f3a"],  # the value is a syntax error: Hydra quotes it back
    ],
)
def test_hydra_errors_do_not_print_command_line_secrets(tmp_path, args):
    """Hydra's own error messages quote the offending override back; the secret must not appear."""
    proc = cli(tmp_path, *args, f"hydra.run.dir={tmp_path / 'out'}")
    assert proc.returncode == 2, proc.stderr
    text = proc.stdout + proc.stderr
    assert text.startswith("evalpipe: error: ") and text.count("\n") == 1, text
    assert "SEKRET" not in text and "no-plus-7f3a" not in text, text
    assert not (tmp_path / "mlruns").exists()
