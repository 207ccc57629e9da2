"""``make ha-demo``: it starts PostgreSQL, three replicas and the web server, shows who leads,
and Ctrl-C leaves nothing behind."""

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from devtools.ha_demo import PG_LOCKS_QUERY
from tests.deploy.support import http_get, production_env
from tests.support.polling import wait_until
from tests.support.processes import BASE_DIR

pytestmark = [pytest.mark.postgresql, pytest.mark.multiprocess]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ha_demo_runs_three_replicas_and_cleans_up_on_ctrl_c():
    log = Path(tempfile.mkstemp(prefix="instatic-ha-demo-", suffix=".log")[1])
    with open(log, "wb") as out:
        demo = subprocess.Popen(
            [sys.executable, "-m", "devtools.ha_demo", "--port", "0"],
            cwd=BASE_DIR,
            env=production_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    output = lambda: log.read_text(errors="replace")  # noqa: E731
    try:
        wait_until(
            lambda: "Streaming leadership log lines" in output() or demo.poll() is not None,
            timeout=120,
        )
        assert demo.poll() is None, output()
        text = output()
        site = re.search(r"Site:\s+(http://127\.0\.0\.1:\d+)/", text).group(1)
        database = re.search(r"DATABASE_URL=(postgres://\S+)", text).group(1)
        cluster_dir = Path(re.search(r"Cluster:\s+(\S+)", text).group(1))
        pids = [int(p) for p in re.findall(r"replica-\d \(pid (\d+)\)", text)]
        pids.append(int(re.search(r"gunicorn pid (\d+)", text).group(1)))
        assert len(pids) == 4 and cluster_dir.exists()

        # Leadership shows in the streamed log, prefixed by the replica's name.
        wait_until(
            lambda: (
                re.search(r"^\[replica-\d\] .*\[publish-scheduler\] acquired", output(), re.M)
                and re.search(r"^\[replica-\d\] .*\[plugin-scheduler\] acquired", output(), re.M)
            ),
            timeout=30,
        )
        # The web process checks its settings before gunicorn binds: it may answer a moment
        # after the schedulers lead.
        wait_until(lambda: http_get(f"{site}/healthz")[0] == 200, timeout=30)
        assert http_get(f"{site}/readyz")[0] == 200
        # The printed pg_locks query finds the lock holders by their node names.
        with psycopg.connect(database) as conn:
            holders = conn.execute(PG_LOCKS_QUERY).fetchall()
        assert {key for _, _, key in holders} == {"0xdeadbeef", "0xcafebabe"}
        assert all(re.fullmatch(r"replica-\d/lock", name) for name, _, _ in holders)
        # And schedulerstatus, run as printed, shows three live nodes.
        status = subprocess.run(
            [sys.executable, "manage.py", "schedulerstatus", "--json"],
            cwd=BASE_DIR,
            env=production_env(DATABASE_URL=database, DJANGO_DEBUG="1"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        assert status.stdout.count('"alive": true') >= 3

        demo.send_signal(signal.SIGINT)
        assert demo.wait(90) == 0, output()
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    text = output()
    for name in ("replica-1", "replica-2", "replica-3", "web"):
        assert f"[{name}] exited with 0" in text
    assert f"Removed the cluster at {cluster_dir}" in text
    assert not cluster_dir.exists()
    assert not any(pid_alive(pid) for pid in pids)
