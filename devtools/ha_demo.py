"""``make ha-demo``: a throwaway PostgreSQL, three scheduler replicas and the web server.

Everything listens on 127.0.0.1. The replicas and the web server are started through the same
entry scripts the container uses (``deploy/scheduler.sh``, ``deploy/web.sh``), with
``DJANGO_DEBUG=1``. The demo prints where to look, then streams the replicas' leadership log
lines, each prefixed with its node name. Try ``kill -STOP <pid>`` on the leader and watch a
follower take over within the lease; ``kill -CONT`` it again.

Ctrl-C (or SIGTERM) stops every process with SIGTERM, waits for them (so leaders release
their locks and mark their nodes stopped) and removes the cluster.
"""

import argparse
import os
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

from devtools.pgcluster import PostgresCluster
from devtools.servers import free_port, wait_for_port

BASE_DIR = Path(__file__).resolve().parent.parent
REPLICAS = 3
STOP_TIMEOUT = 40.0
LEADERSHIP_RE = re.compile(
    r"advisory lock|no longer leader|took over|running groups|node \S+ stopped|"
    r"database unavailable|database is back|Traceback|Error"
)
PG_LOCKS_QUERY = (
    "SELECT a.application_name, a.pid,"
    " '0x' || to_hex((l.classid::bigint << 32) | l.objid::bigint) AS key"
    " FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1"
    " ORDER BY a.application_name"
)

_print_lock = threading.Lock()


def say(line: str) -> None:
    with _print_lock:
        print(line, flush=True)


class Child:
    """One demo process, in its own session (Ctrl-C reaches only the demo, which stops it)."""

    def __init__(self, name: str, args: list[str], env: dict, *, show=LEADERSHIP_RE):
        self.name = name
        self.show = show
        self.tail: deque[str] = deque(maxlen=40)
        self.process = subprocess.Popen(
            args,
            cwd=BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, name=f"read:{name}", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            line = line.rstrip("\n")
            self.tail.append(line)
            if self.show is not None and self.show.search(line):
                say(f"[{self.name}] {line}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGCONT)  # in case someone left it stopped
            self.process.terminate()

    def wait(self, timeout: float) -> int:
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            say(f"[{self.name}] did not stop within {timeout:.0f}s; killing it")
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout=5)
        return self.process.returncode


def demo_env(database_url: str, **extra: str) -> dict:
    """Return the environment of every demo process."""
    env = dict(os.environ)
    for name in ("DJANGO_SETTINGS_MODULE", "DJANGO_ALLOWED_HOSTS", "INSTATIC_NODE_NAME"):
        env.pop(name, None)
    env.setdefault("INSTATIC_LEASE", "5")
    env.setdefault("INSTATIC_HEARTBEAT_INTERVAL", "1")
    venv_bin = str(Path(sys.executable).parent)
    env.update(
        {
            "DATABASE_URL": database_url,
            "DJANGO_DEBUG": "1",
            "DJANGO_SETTINGS_MODULE": "instatic.settings",
            "PYTHONUNBUFFERED": "1",
            "PATH": venv_bin + os.pathsep + env.get("PATH", ""),
        }
    )
    env.update(extra)
    return env


def create_database(cluster: PostgresCluster, name: str) -> None:
    """Create database ``name`` on ``cluster`` (through psycopg: no client binaries needed)."""
    import psycopg

    with psycopg.connect(cluster.url("postgres"), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')


def psql_command() -> str:
    return shutil.which("psql") or "psql"


def run_step(args: list[str], env: dict, what: str) -> None:
    result = subprocess.run(args, cwd=BASE_DIR, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}):\n{result.stdout}{result.stderr}")


def pick_web_port(wanted: int | None) -> int:
    """Return ``wanted``, any free port for 0, or 8000 when free for ``None``."""
    if wanted == 0:
        return free_port()
    if wanted is not None:
        return wanted
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", 8000))
            return 8000
        except OSError:
            return free_port()


def banner(*, cluster, database_url, web_port, replicas, web, password) -> str:
    site = f"http://127.0.0.1:{web_port}"
    psql = psql_command()
    manage = f"{shlex.quote(sys.executable)} manage.py"
    lines = [
        "",
        "=" * 78,
        "Instatic HA demo: three scheduler replicas and the web server on one PostgreSQL",
        "=" * 78,
        f"  Site:              {site}/",
        f"  Admin:             {site}/admin/   (user admin, password {password})",
        f"  Health:            {site}/healthz  {site}/readyz  {site}/healthz/scheduler",
        f"  Metrics (web):     {site}/metrics",
    ]
    for name, port, child in replicas:
        lines.append(
            f"  {name} (pid {child.pid}): metrics http://127.0.0.1:{port}/metrics"
            f"  health http://127.0.0.1:{port}/healthz"
        )
    lines += [
        f"  Web server:        gunicorn pid {web.pid}",
        f"  Cluster:           {cluster.workdir}",
        "",
        "  Who leads:",
        f"    cd {shlex.quote(str(BASE_DIR))} && DJANGO_DEBUG=1 DATABASE_URL={database_url} "
        f"{manage} schedulerstatus",
        "  Lock holders in PostgreSQL:",
        # The query has no double quote, $, ` or backslash: double quotes keep it readable.
        f'    {psql} {database_url} -c "{PG_LOCKS_QUERY}"',
        "  Fail over: kill -STOP <leader pid> (a follower takes over within the lease), "
        "kill -CONT <pid> to resume.",
        "",
        "  Streaming leadership log lines below. Ctrl-C stops everything and removes the cluster.",
        "=" * 78,
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port", type=int, default=None, help="web port (default 8000 if free; 0: any free port)"
    )
    parser.add_argument(
        "--all", action="store_true", help="stream every replica log line, not only leadership"
    )
    args = parser.parse_args(argv)

    stop = threading.Event()

    def request_stop(signum, frame):
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)

    children: list[Child] = []
    try:
        cluster = PostgresCluster()
    except RuntimeError as exc:
        say(f"ha-demo: {exc}. Install Debian's postgresql package (or set INSTATIC_PG_BINDIR).")
        return 1
    say("Starting a throwaway PostgreSQL…")
    try:
        cluster.start()
        create_database(cluster, "instatic")
        database_url = cluster.url("instatic")
        env = demo_env(database_url)
        say("Migrating…")
        run_step([str(BASE_DIR / "deploy" / "migrate.sh"), "-v", "0"], env, "migrate")
        password = secrets.token_urlsafe(12)
        run_step(
            [
                sys.executable,
                "manage.py",
                "createsuperuser",
                "--noinput",
                "--username",
                "admin",
                "--email",
                "admin@localhost",
            ],
            {**env, "DJANGO_SUPERUSER_PASSWORD": password},
            "createsuperuser",
        )

        show = re.compile(".") if args.all else LEADERSHIP_RE
        replicas = []
        for number in range(1, REPLICAS + 1):
            name = f"replica-{number}"
            port = free_port()
            child = Child(
                name,
                [str(BASE_DIR / "deploy" / "scheduler.sh"), "--node-name", name],
                demo_env(
                    database_url,
                    INSTATIC_METRICS_ADDRESS="127.0.0.1",
                    INSTATIC_METRICS_PORT=str(port),
                ),
                show=show,
            )
            children.append(child)
            replicas.append((name, port, child))
        web_port = pick_web_port(args.port)
        web = Child(
            "web",
            [str(BASE_DIR / "deploy" / "web.sh")],
            demo_env(
                database_url,
                INSTATIC_WEB_ADDRESS="127.0.0.1",
                PORT=str(web_port),
                WEB_CONCURRENCY="2",
            ),
            show=re.compile(r"\[ERROR\]|Traceback|Error"),
        )
        children.append(web)
        for port in [web_port, *(port for _, port, _ in replicas)]:
            wait_for_port(port, timeout=60)
        say(
            banner(
                cluster=cluster,
                database_url=database_url,
                web_port=web_port,
                replicas=replicas,
                web=web,
                password=password,
            )
        )
        while not stop.wait(0.5):
            dead = [child for child in children if not child.alive()]
            if dead:
                for child in dead:
                    say(f"[{child.name}] exited ({child.process.returncode}); last lines:")
                    for line in child.tail:
                        say(f"[{child.name}]   {line}")
                return 1
        return 0
    except (TimeoutError, RuntimeError) as exc:
        say(f"ha-demo: {exc}")
        for child in children:
            for line in child.tail:
                say(f"[{child.name}]   {line}")
        return 1
    finally:
        say("Stopping (SIGTERM to every process)…")
        for child in children:
            child.terminate()
        for child in children:
            code = child.wait(STOP_TIMEOUT)
            say(f"[{child.name}] exited with {code}")
        workdir = cluster.workdir
        cluster.stop()
        if workdir is not None:
            say(f"Removed the cluster at {workdir}")


if __name__ == "__main__":
    sys.exit(main())
