"""An interrupted test run leaves nothing running: servers, restarted servers, schedulers.

``tests/support/interrupted_run.py`` starts what the suite's fixtures start, reporting each
stage; it is interrupted with SIGINT right after each stage, and then no process carrying its
run marker may be left (``devtools.testsuite.leftovers``, the check every suite run ends with),
nor its server's folder.
"""

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from devtools import pgcluster
from devtools.servers import RUN_MARKER, exited, pid_in
from devtools.testsuite import leftovers, lost_folders
from tests.support.interrupted_run import PidFileServer
from tests.support.polling import wait_until
from tests.support.processes import BASE_DIR

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.sqlite,  # once per `make test`: it starts a server of its own
    pytest.mark.skipif(pgcluster.find_bindir() is None, reason="PostgreSQL is not installed"),
]


@pytest.mark.parametrize("stage", ["server", "restarted", "scheduler"])
def test_sigint_after_each_stage_leaves_nothing_running(stage):
    """The check finds the run's processes (the server, with its port) until the run ends."""
    run_id = uuid.uuid4().hex
    run = subprocess.Popen(
        [sys.executable, "-m", "tests.support.interrupted_run"],
        cwd=BASE_DIR,
        env={**os.environ, RUN_MARKER: run_id, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen = []
    try:
        for line in run.stdout:
            seen.append(line)
            if line.startswith(f"stage {stage}"):
                break
        assert seen and seen[-1].startswith(f"stage {stage}"), "".join(seen)
        _, _, workdir, port = seen[0].split()
        workdir = Path(workdir)
        running = leftovers(run_id)
        assert any(int(port) in process.ports for process in running), running
        run.send_signal(signal.SIGINT)
        output = run.communicate(timeout=90)[0]
        wait_until(lambda: not leftovers(run_id), timeout=15, message=str(leftovers(run_id)))
        assert not workdir.exists(), output
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


@pytest.mark.parametrize(
    ("command", "lost"),
    [
        (["mariadbd", "--datadir=/nonexistent/data", "--port=1"], ("/nonexistent/data",)),
        (["postgres", "-D", "/nonexistent/pg"], ("/nonexistent/pg",)),
        (["postgres", "-D", "/"], ()),
        (["manage.py", "runscheduler"], ()),
    ],
)
def test_a_server_whose_folder_is_gone_is_named_so(command, lost):
    assert lost_folders(command) == lost


def test_a_server_restarted_through_its_handle_is_stopped_by_its_owner():
    """What a MariaDB restart in a test does: the new process is not the one its owner started."""
    server = PidFileServer().start()
    try:
        env = dict(os.environ)
        server.export_env(env)
        restart = (
            "import os; from tests.support.interrupted_run import PidFileServer; "
            "server = PidFileServer.from_env(os.environ); server.halt(); server.resume()"
        )
        subprocess.run([sys.executable, "-c", restart], env=env, cwd=BASE_DIR, check=True)
        restarted = pid_in(server.workdir / PidFileServer.pid_file_name)
        assert restarted is not None and restarted != server.process.pid
        assert not exited(restarted), "the restarted server outlives the process that started it"
    finally:
        server.stop()
    wait_until(lambda: exited(restarted), timeout=10, message="the restarted server still runs")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_pytest_interrupted_during_a_test_stops_its_schedulers(sig):
    """SIGINT (Ctrl-C) or SIGTERM (what devtools.testsuite forwards) ends pytest's processes."""
    run_id = uuid.uuid4().hex
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "tests/support/interrupt_target.py",
        ],
        cwd=BASE_DIR,
        env={**os.environ, RUN_MARKER: run_id, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen = []
    try:
        for line in run.stdout:
            seen.append(line)
            if "stage scheduler" in line:
                break
        assert "stage scheduler" in seen[-1], "".join(seen)
        scheduler = int(seen[-1].split()[-1])
        assert any(process.pid == scheduler for process in leftovers(run_id))
        run.send_signal(sig)
        output = run.communicate(timeout=90)[0]
        assert "KeyboardInterrupt" in output, output
        wait_until(lambda: not leftovers(run_id), timeout=15, message=str(leftovers(run_id)))
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
