#!/usr/bin/env python3
"""Start the team tracking stack: an MLflow server on PostgreSQL, artifacts served, health-checked.

    .venv/bin/python scripts/team_server.py --backend-store-uri postgresql://mlflow@db-host:5432/mlflow \\
        --artifacts-destination /srv/mlflow/artifacts --host 0.0.0.0 --port 5000
    .venv/bin/python scripts/team_server.py --local-postgres /srv/mlflow/pg \\
        --artifacts-destination /srv/mlflow/artifacts          # a PostgreSQL of its own in that dir

It checks the database before starting (one clear line and exit 2 if it cannot connect), starts
`mlflow server` with `--artifacts-destination` (clients upload through the server, so CI jobs and
Ray workers on other machines need no shared folder), waits until `/health` answers and an API
call reads the store, prints what colleagues and CI set, and stays in the foreground: Ctrl-C or
SIGTERM stops the server (and the local PostgreSQL) cleanly.

Credentials are never written anywhere: a password in the database URI is moved to PGPASSWORD in
the server's environment (not on its command line, not in a file); with `--auth` (MLflow's basic
auth) the admin user comes from MLFLOW_AUTH_ADMIN_USERNAME / MLFLOW_AUTH_ADMIN_PASSWORD and the
session key from MLFLOW_FLASK_SERVER_SECRET_KEY (a random one per start when unset), all passed
in the environment; the auth config file it writes holds no secret. Clients authenticate with
MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD.

The classes (LocalPostgres, MlflowServer) are what tests/test_team_postgres.py and
scripts/bench_store.py start their stacks with.
"""

from __future__ import annotations

import argparse
import base64
import glob
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

# While the server process is alive it is starting (migrations on a new database, workers
# importing MLflow: minutes on a loaded machine), so it is waited for; this limit only ends the
# wait for a server that is alive but hung (a server that exits is reported at once).
HEALTH_TIMEOUT_S = 1800.0


class StackError(RuntimeError):
    """Something the user must fix (one line)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(name: str) -> str | None:
    """A PostgreSQL server binary (Debian keeps them in /usr/lib/postgresql/<version>/bin)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def postgres_unavailable() -> str | None:
    """Why a local PostgreSQL cannot be started here (None when it can)."""
    for name in ("initdb", "pg_ctl"):
        if pg_bin(name) is None:
            return f"{name} not found (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root and runuser is not available"
    return None


def split_password(uri: str) -> tuple[str, str | None]:
    """(the URI without its password, the password): the password travels in PGPASSWORD only."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri, None
    host = parts.hostname or ""
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port:
        netloc += f":{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc)), urllib.parse.unquote(parts.password)


def check_database(uri: str, password: str | None = None, timeout_s: int = 10) -> None:
    """Connect once with psycopg (what SQLAlchemy 2.1 uses for postgresql://); StackError if not."""
    try:
        import psycopg
    except ImportError:
        raise StackError("psycopg is not installed: pip install -e '.[postgres]'") from None
    conninfo = uri.replace("postgresql+psycopg://", "postgresql://", 1)
    kwargs = {"connect_timeout": timeout_s}
    if password:
        kwargs["password"] = password
    try:
        with psycopg.connect(conninfo, **kwargs) as conn:
            conn.execute("select 1")
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StackError(f"cannot connect to the database {uri}: {first}") from None


@dataclass
class LocalPostgres:
    """A PostgreSQL cluster in `data_dir` on 127.0.0.1:`port`, run as a non-root user.

    initdb with trust authentication for the local machine only (listen on 127.0.0.1, socket in
    the data dir): a stack for one machine or a test. As root it runs as the `postgres` user."""

    data_dir: Path
    port: int = field(default_factory=free_port)
    user: str = "evalpipe"

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        argv = list(cmd)
        if os.geteuid() == 0:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        if check and proc.returncode != 0:
            raise StackError(f"{Path(cmd[0]).name} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
        return proc

    @property
    def socket_dir(self) -> Path:
        return self.data_dir / "socket"

    def start(self) -> LocalPostgres:
        why = postgres_unavailable()
        if why:
            raise StackError(f"cannot start a local PostgreSQL: {why}")
        self.data_dir = Path(self.data_dir).resolve()
        fresh = not (self.data_dir / "pgdata" / "PG_VERSION").is_file()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            pg = pwd.getpwnam("postgres")
            for path in (self.data_dir, self.socket_dir):
                os.chown(path, pg.pw_uid, pg.pw_gid)
            for parent in self.data_dir.parents:  # the postgres user must reach its data dir
                if parent.stat().st_mode & 0o001 == 0 and str(parent) not in ("/",):
                    raise StackError(f"{parent} is not traversable by the postgres user: pick another dir")
        pgdata = str(self.data_dir / "pgdata")
        if fresh:
            self._run(pg_bin("initdb"), "-D", pgdata, "-U", self.user, "--auth=trust", "-E", "UTF8")
        opts = f"-p {self.port} -k {self.socket_dir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        self._run(
            pg_bin("pg_ctl"),
            "-D",
            pgdata,
            "-o",
            opts,
            "-l",
            str(self.data_dir / "postgres.log"),
            "-w",
            "start",
        )
        return self

    def create_database(self, name: str) -> str:
        """Create database `name` (if missing) and return its SQLAlchemy URI (psycopg 3 driver)."""
        exists = self._run(
            pg_bin("psql") or "psql",
            "-h", str(self.socket_dir), "-p", str(self.port), "-U", self.user, "-d", "postgres",
            "-tAc", f"select 1 from pg_database where datname = '{name}'",
        ).stdout.strip()  # fmt: skip
        if exists != "1":
            self._run(
                pg_bin("createdb") or "createdb",
                "-h",
                str(self.socket_dir),
                "-p",
                str(self.port),
                "-U",
                self.user,
                name,
            )
        return self.uri(name)

    def uri(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        pgdata = self.data_dir / "pgdata"
        if pgdata.is_dir():
            self._run(pg_bin("pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop", check=False)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


AUTH_INI = """[mlflow]
default_permission = {permission}
database_uri = {database_uri}
admin_username = {admin}
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
"""


@dataclass
class MlflowServer:
    """`mlflow server` on `backend_uri` with served artifacts; `start()` returns once it answers."""

    backend_uri: str
    artifacts: Path
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    workers: int = 1
    auth: bool = False
    auth_db_uri: str | None = None
    default_permission: str = "READ"
    log_path: Path | None = None
    proc: subprocess.Popen | None = None
    _tmp: str | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{host}:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "mlflow", "server", "--host", self.host, "--port", str(self.port)]
        cmd += ["--workers", str(self.workers), "--backend-store-uri", self.backend_uri]
        cmd += ["--artifacts-destination", str(self.artifacts), "--serve-artifacts"]
        if self.auth:
            cmd += ["--app-name", "basic-auth"]
        return cmd

    def start(self) -> MlflowServer:
        uri, password = split_password(self.backend_uri)
        self.backend_uri = uri
        env = {
            **os.environ,
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            "MLFLOW_DISABLE_TELEMETRY": "true",
        }
        if password:
            env["PGPASSWORD"] = password
        if uri.startswith(("postgresql", "postgres")):
            check_database(uri, password)
        Path(self.artifacts).mkdir(parents=True, exist_ok=True)
        if self.auth:
            for name in ("MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD"):
                if not os.environ.get(name):
                    raise StackError(f"--auth needs {name} in the environment (the first admin user)")
            self._tmp = tempfile.mkdtemp(prefix="evalpipe-auth-")
            ini = Path(self._tmp) / "basic_auth.ini"
            ini.write_text(
                AUTH_INI.format(
                    permission=self.default_permission,
                    database_uri=split_password(self.auth_db_uri or uri)[0],
                    admin=os.environ["MLFLOW_AUTH_ADMIN_USERNAME"],
                ),
                encoding="utf-8",
            )
            env["MLFLOW_AUTH_CONFIG_PATH"] = str(ini)
            env.setdefault("MLFLOW_FLASK_SERVER_SECRET_KEY", secrets.token_hex(32))
        # The server's own log goes to log_path, else to this process's output (the operator sees it).
        log = open(self.log_path, "w") if self.log_path else None  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.command(), env=env, stdout=log, stderr=subprocess.STDOUT if log else None
        )
        try:
            self.wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _get(self, path: str) -> int:
        req = urllib.request.Request(self.url + path)
        user, pw = os.environ.get("MLFLOW_TRACKING_USERNAME"), os.environ.get("MLFLOW_TRACKING_PASSWORD")
        if self.auth and user and pw:
            token = base64.b64encode(f"{user}:{pw}".encode()).decode()
            req.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def wait_healthy(self, timeout_s: float = HEALTH_TIMEOUT_S) -> None:
        """/health answers 200, then the API reads the store (the database really works)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                tail = Path(self.log_path).read_text()[-1500:] if self.log_path else ""
                raise StackError(f"mlflow server exited with code {self.proc.returncode}. {tail}")
            try:
                if self._get("/health") == 200:
                    status = self._get("/api/2.0/mlflow/experiments/search?max_results=1")
                    if status == 200 or (self.auth and status == 401):
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise StackError(
            f"mlflow server at {self.url} is running but did not answer /health in {timeout_s:.0f} s (hung?)"
        )

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Start the team MLflow server on PostgreSQL (artifacts served, health-checked).",
        epilog="Docs: docs/team.md. Credentials only in the environment: PGPASSWORD, "
        "MLFLOW_AUTH_ADMIN_USERNAME / MLFLOW_AUTH_ADMIN_PASSWORD (with --auth).",
    )
    db = p.add_mutually_exclusive_group(required=True)
    db.add_argument("--backend-store-uri", help="postgresql://USER@HOST:PORT/DB (password in PGPASSWORD)")
    db.add_argument(
        "--local-postgres", metavar="DIR", help="run a PostgreSQL of its own with its data in DIR"
    )
    p.add_argument(
        "--artifacts-destination", required=True, metavar="DIR", help="where the server keeps artifacts"
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 for the team)")
    p.add_argument("--port", type=int, default=5000)
    p.add_argument("--workers", type=int, default=2, help="server worker processes (default 2)")
    p.add_argument("--auth", action="store_true", help="MLflow basic auth (admin from MLFLOW_AUTH_ADMIN_*)")
    p.add_argument("--pg-port", type=int, default=None, help="port of the --local-postgres server")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stopping: list[int] = []

    def on_signal(signum, frame):  # stop in the main loop, not inside a subprocess call
        stopping.append(signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    local = None
    server = None
    try:
        backend = args.backend_store_uri
        if args.local_postgres:
            local = LocalPostgres(
                Path(args.local_postgres), **({"port": args.pg_port} if args.pg_port else {})
            )
            local.start()
            backend = local.create_database("mlflow")
            print(f"PostgreSQL: 127.0.0.1:{local.port}, data in {local.data_dir}", flush=True)
        server = MlflowServer(
            backend_uri=backend,
            artifacts=Path(args.artifacts_destination).resolve(),
            host=args.host,
            port=args.port,
            workers=args.workers,
            auth=args.auth,
        )
        server.start()
        shown, _ = split_password(server.backend_uri)
        print(f"ready: MLflow server {server.url} on {shown}, artifacts in {server.artifacts}", flush=True)
        print(f"  runs:   python -m evalpipe tracking=team tracking.uri={server.url}", flush=True)
        print(f"  or:     export MLFLOW_TRACKING_URI={server.url}", flush=True)
        if args.auth:
            print("  auth:   export MLFLOW_TRACKING_USERNAME=... MLFLOW_TRACKING_PASSWORD=...", flush=True)
        print(json.dumps({"url": server.url, "pid": server.proc.pid}), flush=True)
        while not stopping:
            if server.proc.poll() is not None:
                print(
                    f"team_server: error: mlflow server exited with code {server.proc.returncode}",
                    file=sys.stderr,
                )
                return 1
            time.sleep(0.5)
        print(f"team_server: stopping ({signal.Signals(stopping[0]).name})", flush=True)
        return 0
    except StackError as exc:
        print(f"team_server: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.stop()
        if local is not None:
            local.stop()


if __name__ == "__main__":
    sys.exit(main())
