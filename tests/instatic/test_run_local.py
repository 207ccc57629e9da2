"""``make run``'s launcher: migrate, first admin, web + scheduler, clean Ctrl-C, fast rerun."""

import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest

from devtools.servers import free_port
from tests.support.polling import wait_until
from tests.support.processes import start_tracked

BASE_DIR = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.multiprocess, pytest.mark.sqlite]

#: How long ``make run`` may take to stop its web server and scheduler after Ctrl-C: seconds
#: when the machine is quiet, but a busy one may still be starting a scheduler it restarted.
STOP_WITHIN = 60


def launch(var_dir: str, port: int) -> tuple[subprocess.Popen, Path]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL"))}
    env.update({"INSTATIC_VAR_DIR": var_dir, "INSTATIC_RUN_ADDRESS": f"127.0.0.1:{port}"})
    log = Path(var_dir) / f"run-{port}.log"
    # Tracked, so the end of the test session stops it and its children should the test fail
    # before it has stopped them.
    process = start_tracked(
        [sys.executable, "-m", "devtools.run_local"],
        cwd=BASE_DIR,
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115 - owned by the child
        stderr=subprocess.STDOUT,
    )
    return process, log


def login_page_status(port: int) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=2) as r:
            return r.status
    except OSError:
        return None


def run_once(var_dir: str) -> str:
    port = free_port()
    process, log = launch(var_dir, port)
    try:
        wait_until(lambda: login_page_status(port) == 200, timeout=60, interval=0.2)
        wait_until(lambda: "acquired advisory lock" in log.read_text(), timeout=30)
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(STOP_WITHIN) == 0
    return log.read_text()


def test_make_run_serves_the_admin_and_stops_cleanly_on_ctrl_c():
    var_dir = tempfile.mkdtemp(prefix="instatic-run-")
    first = run_once(var_dir)
    passwords = re.findall(r"user: admin\s+password: (\S+)", first)
    assert len(passwords) == 1 and len(passwords[0]) >= 12
    assert "received SIGTERM: stopping gracefully" in first
    assert "released advisory lock" in first and "again: exiting at once" not in first
    second = run_once(var_dir)
    assert "password:" not in second, "the admin password is printed only on the first run"
