"""The container's entry scripts, run for real against the test database.

No Docker engine runs here, so these tests start ``deploy/*.sh`` exactly as the image's
``ENTRYPOINT`` does (from another working directory, with only ``PATH`` pointing at the
virtualenv) and check what the container relies on: the process answers its health checks,
the pid we started *is* the Python process (the scripts ``exec``, so SIGTERM reaches it), and
SIGTERM ends it cleanly.
"""

import re
import socket
import sqlite3
import subprocess

import pytest

from coordination.models import Node
from devtools.servers import free_port
from tests.deploy.support import (
    DEPLOY,
    ScriptProcess,
    http_get,
    production_env,
    run_healthcheck,
    script_env,
    wait_for_status,
)
from tests.support.polling import wait_until

SCRIPTS = ["entrypoint.sh", "web.sh", "scheduler.sh", "migrate.sh"]
FAST = {"INSTATIC_LEASE": "3", "INSTATIC_HEARTBEAT_INTERVAL": "0.5", "INSTATIC_MAX_TICK": "2"}
SECRET = "deploy-test-secret-0123456789-abcdefghijklmnopqrstuvwxyz-ABCDEFGH"
HEALTH_TOKEN = "deploy-test-health-token-0123456789abcdef"
#: For a script run on a SQLite file of its own, not the test database: the same whatever the
#: run's vendor, so once per `make test`.
OWN_DATABASE = pytest.mark.sqlite


def logical_lines(text: str) -> list[str]:
    """Return the script's commands: comments and blank lines dropped, continuations joined."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [
        line.strip()
        for line in joined.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


@pytest.fixture
def started():
    procs = []

    def start(script, *args, env, name=None):
        proc = ScriptProcess(script, *args, env=env, name=name)
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()
        print(f"----- {proc.name} (exit {proc.process.returncode}) -----\n{proc.log()[-3000:]}")


# --- the scripts as files ---------------------------------------------------------------------
@pytest.mark.parametrize("name", SCRIPTS)
def test_script_is_posix_sh_with_set_eu_and_valid_syntax(name):
    path = DEPLOY / name
    assert path.exists(), f"deploy/{name} is missing"
    assert path.stat().st_mode & 0o111 == 0o111, f"deploy/{name} is not executable"
    text = path.read_text()
    assert text.startswith("#!/bin/sh\n")
    assert "set -eu" in logical_lines(text)
    # /bin/sh is dash on Debian (python:*-slim): no bashisms get past this.
    result = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", ["web.sh", "scheduler.sh", "migrate.sh"])
def test_script_ends_by_exec_ing_its_process(name):
    commands = logical_lines((DEPLOY / name).read_text())
    assert commands[-1].startswith("exec "), commands[-1]


def test_entrypoint_execs_in_every_branch():
    commands = logical_lines((DEPLOY / "entrypoint.sh").read_text())
    case = commands[commands.index(next(c for c in commands if c.startswith("case "))) :]
    arms = [c for c in case if c.endswith(")")]
    execs = [c for c in case if c.startswith("exec ")]
    assert len(arms) == len(execs) == 3


# --- web ----------------------------------------------------------------------------------------
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_web_sh_serves_health_and_readiness_and_stops_on_sigterm(started):
    port = free_port()
    web = started(
        "web.sh",
        env=script_env(PORT=str(port), INSTATIC_WEB_ADDRESS="127.0.0.1", WEB_CONCURRENCY="1"),
    )
    base = f"http://127.0.0.1:{port}"
    assert '"ok"' in wait_for_status(f"{base}/healthz", proc=web)
    assert http_get(f"{base}/readyz") == (200, '{"status": "ok"}')
    cmdline = web.cmdline()
    assert any(part.endswith("gunicorn") for part in cmdline), cmdline
    assert "instatic.wsgi:application" in cmdline
    # Access log on stdout.
    wait_until(lambda: '"GET /readyz HTTP/1.1" 200' in web.log(), timeout=10)
    assert web.terminate() == 0
    assert http_get(f"{base}/healthz")[0] == 0


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_web_healthcheck_passes_with_production_hosts_and_https_redirect(started):
    """``127.0.0.1`` is not an allowed host in production; the check must still get in."""
    port = free_port()
    env = production_env(
        DATABASE_URL=script_env()["DATABASE_URL"],
        DJANGO_SECRET_KEY=SECRET,
        DJANGO_ALLOWED_HOSTS=".example.com,www.example.com",
        PORT=str(port),
        INSTATIC_WEB_ADDRESS="127.0.0.1",
        WEB_CONCURRENCY="1",
    )
    web = started("web.sh", env=env)
    wait_until(
        lambda: http_get(f"http://127.0.0.1:{port}/healthz")[0] == 400 or not web.alive(),
        timeout=30,
        interval=0.1,
    )
    assert web.alive(), web.log()
    result = run_healthcheck("web", env=env)
    assert result.returncode == 0, result.stderr
    assert '"ok"' in result.stdout
    assert web.terminate() == 0
    down = run_healthcheck("web", env=env)
    assert down.returncode == 1
    assert "unreachable" in down.stderr


# --- scheduler ----------------------------------------------------------------------------------
def metric_lines(text: str) -> set[str]:
    return {line for line in text.splitlines() if line and not line.startswith("#")}


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_scheduler_sh_serves_metrics_and_health_and_stops_cleanly(started):
    port = free_port()
    env = script_env(
        **FAST,
        INSTATIC_METRICS_PORT=str(port),
        INSTATIC_METRICS_ADDRESS="127.0.0.1",
        INSTATIC_HEALTH_TOKEN=HEALTH_TOKEN,
    )
    sched = started("scheduler.sh", "--node-name", "deploy-sched", "--group", "publishing", env=env)
    base = f"http://127.0.0.1:{port}"
    details = {"Authorization": f"Bearer {HEALTH_TOKEN}"}
    body = wait_for_status(f"{base}/healthz", proc=sched, headers=details)
    assert '"node": "deploy-sched"' in body
    assert http_get(f"{base}/healthz") == (200, '{"status": "ok"}'), "status only without it"
    cmdline = sched.cmdline()
    assert "manage.py" in cmdline[1] and "runscheduler" in cmdline, cmdline

    check = run_healthcheck("scheduler", env=env)
    assert check.returncode == 0, check.stderr
    # The container's health log shows the details: the check sends the token it is given.
    assert '"node": "deploy-sched"' in check.stdout

    def scraped():
        lines = metric_lines(http_get(f"{base}/metrics")[1])
        wanted = {
            'instatic_leader_changes_total{group="publishing",node="deploy-sched"} 1.0',
            "instatic_live_nodes 1.0",
            'instatic_group_leader{group="publishing",node="deploy-sched"} 1.0',
        }
        ran = any(
            line.startswith(
                'instatic_job_runs_total{group="publishing",job="publishing.publish_due",'
                'status="succeeded"}'
            )
            for line in lines
        )
        return wanted <= lines and ran

    wait_until(scraped, timeout=30, message="metrics never showed the leader and a publish run")

    assert sched.terminate() == 0
    node = Node.objects.get(name="deploy-sched")
    assert node.stopped_at is not None
    assert "node deploy-sched stopped" in sched.log()
    assert run_healthcheck("scheduler", env=env).returncode == 1


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_scheduler_sh_on_a_busy_metrics_port_fails_with_one_clear_line():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = subprocess.run(
            [str(DEPLOY / "scheduler.sh"), "--once"],
            env=script_env(INSTATIC_METRICS_PORT=str(port), INSTATIC_METRICS_ADDRESS="127.0.0.1"),
            cwd="/",
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in result.stderr


# --- migrate ------------------------------------------------------------------------------------
def pid_recorder(tmp_path):
    """Return (env additions, read pids): every Python process started records its pid."""
    site = tmp_path / "site"
    site.mkdir()
    pidfile = tmp_path / "pids"
    (site / "sitecustomize.py").write_text(
        "import os\n"
        "with open(os.environ['PID_RECORD_FILE'], 'a') as f:\n"
        "    f.write(f'{os.getpid()}\\n')\n"
    )
    env = {"PYTHONPATH": str(site), "PID_RECORD_FILE": str(pidfile)}
    return env, lambda: [int(x) for x in pidfile.read_text().split()]


def table_names(path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


@OWN_DATABASE
@pytest.mark.multiprocess
def test_migrate_sh_migrates_then_exits_and_is_the_python_process(tmp_path):
    database = tmp_path / "fresh.sqlite3"
    extra, pids = pid_recorder(tmp_path)
    proc = ScriptProcess(
        "migrate.sh",
        env=script_env(DATABASE_URL=f"sqlite:///{database}", **extra),
        name="migrate",
    )
    try:
        assert proc.process.wait(120) == 0, proc.log()
    finally:
        proc.stop()
    assert {"coordination_node", "coordination_jobrun", "publishing_post"} <= table_names(database)
    assert pids()[0] == proc.pid, "migrate.sh must exec python, not run it as a child"


@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_migrate_sh_on_the_test_database_is_a_no_op():
    proc = ScriptProcess("migrate.sh", env=script_env(), name="migrate-test-db")
    try:
        assert proc.process.wait(120) == 0, proc.log()
    finally:
        proc.stop()
    assert "No migrations to apply" in proc.log()


# --- entrypoint ---------------------------------------------------------------------------------
@pytest.mark.multiprocess
@pytest.mark.django_db(transaction=True)
def test_entrypoint_defaults_to_the_web_server(started):
    port = free_port()
    web = started(
        "entrypoint.sh",
        env=script_env(PORT=str(port), INSTATIC_WEB_ADDRESS="127.0.0.1", WEB_CONCURRENCY="1"),
        name="entrypoint-web",
    )
    wait_for_status(f"http://127.0.0.1:{port}/healthz", proc=web)
    assert any(part.endswith("gunicorn") for part in web.cmdline())
    assert web.terminate() == 0


@OWN_DATABASE
@pytest.mark.multiprocess
def test_entrypoint_runs_migrate_manage_and_other_commands(tmp_path):
    database = tmp_path / "entry.sqlite3"
    env = script_env(DATABASE_URL=f"sqlite:///{database}")
    entry = str(DEPLOY / "entrypoint.sh")

    def run(*args):
        return subprocess.run(
            [entry, *args], env=env, cwd="/", capture_output=True, text=True, timeout=120
        )

    migrate = run("migrate", "-v", "0")
    assert migrate.returncode == 0, migrate.stderr
    assert "coordination_node" in table_names(database)
    check = run("manage", "check")
    assert check.returncode == 0, check.stderr
    assert "System check identified no issues" in check.stdout
    assert run("true").returncode == 0
    assert run("false").returncode == 1
