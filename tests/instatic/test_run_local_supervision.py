"""``make run`` keeps the site up when its scheduler exits: one line, a restart, the web serving."""

import os
import signal
import tempfile
from pathlib import Path

import pytest

from devtools import run_local
from devtools.proctable import live_children
from devtools.servers import free_port
from tests.instatic.test_run_local import STOP_WITHIN, launch, login_page_status
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.sqlite]


@pytest.mark.parametrize(
    ("failures", "delay"), [(0, 1), (1, 1), (2, 2), (3, 4), (5, 16), (6, 30), (60, 30)]
)
def test_restarts_back_off_doubling_up_to_thirty_seconds(failures, delay):
    assert run_local.restart_delay(failures) == delay


@pytest.mark.parametrize(
    ("previous", "ran_for", "now"), [(0, 0.2, 1), (3, 5.0, 4), (3, run_local.HEALTHY_RUN, 1)]
)
def test_a_scheduler_that_ran_a_while_starts_its_back_off_again(previous, ran_for, now):
    assert run_local.quick_exits(previous, ran_for) == now


@pytest.mark.parametrize(
    ("returncode", "words"),
    [(1, "exit code 1"), (0, "exit code 0"), (-9, "killed by SIGKILL"), (-200, "signal 200")],
)
def test_exits_are_described_in_words(returncode, words):
    assert words in run_local.exit_description(returncode)


def children(parent: int, command: bytes) -> list[int]:
    """Pids of live processes whose parent is ``parent`` and whose command line has ``command``."""
    pids = []
    for pid in live_children(parent):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if command in cmdline:
            pids.append(pid)
    return pids


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def scheduler_pids(parent: int) -> list[int]:
    return children(parent, b"runscheduler")


def test_a_killed_scheduler_is_reported_and_started_again_while_the_web_keeps_serving():
    var_dir = tempfile.mkdtemp(prefix="instatic-run-")
    port = free_port()
    process, log = launch(var_dir, port)
    try:
        wait_until(lambda: login_page_status(port) == 200, timeout=60, interval=0.2)
        wait_until(lambda: "acquired advisory lock" in log.read_text(), timeout=30)
        (first,) = wait_until(lambda: scheduler_pids(process.pid), timeout=10)
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: "The scheduler stopped" in log.read_text(), timeout=10)
        assert login_page_status(port) == 200, "the web server keeps serving"
        (second,) = wait_until(lambda: scheduler_pids(process.pid), timeout=15)
        assert second != first
        wait_until(lambda: log.read_text().count("acquired advisory lock") >= 2, timeout=30)
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(STOP_WITHIN) == 0
    text = log.read_text()
    lines = [line for line in text.splitlines() if "The scheduler stopped" in line]
    assert lines == [
        "  The scheduler stopped (killed by SIGKILL); scheduled posts wait until it is back. "
        "Starting it again in 1 s."
    ]
    assert "Traceback" not in text


def test_the_site_stops_with_a_line_when_its_web_server_exits():
    var_dir = tempfile.mkdtemp(prefix="instatic-run-")
    port = free_port()
    process, log = launch(var_dir, port)
    try:
        wait_until(lambda: login_page_status(port) == 200, timeout=60, interval=0.2)
        (scheduler,) = wait_until(lambda: scheduler_pids(process.pid), timeout=30)
        (web,) = children(process.pid, b"runserver")
        os.kill(web, signal.SIGKILL)
        assert process.wait(STOP_WITHIN) == 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "The web server stopped (killed by SIGKILL); stopping Instatic." in log.read_text()
    assert not alive(scheduler), "the launcher waits for its scheduler before it exits"
