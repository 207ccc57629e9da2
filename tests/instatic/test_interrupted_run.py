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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from devtools import pgcluster
from devtools.servers import RUN_MARKER, exited, pid_in
from devtools.testsuite import leftovers, lost_folders
from tests.support import processes
from tests.support.interrupted_run import PidFileServer
from tests.support.polling import wait_until
from tests.support.processes import BASE_DIR, ManagedProcess

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.sqlite,  # once per `make test`: it starts a server of its own
    pytest.mark.skipif(pgcluster.find_bindir() is None, reason="PostgreSQL is not installed"),
]


@dataclass
class MarkedRun:
    """A process started with a run marker of its own, and the lines it printed so far."""

    run_id: str
    process: subprocess.Popen
    lines: list[str]

    def read_until(self, stage: str) -> list[str]:
        """Return the fields of the ``stage <stage> ...`` line, once the process printed it;
        the process goes on past each earlier stage (a line on its stdin), and waits at this
        one until it is interrupted or asked for a later one."""
        if self.lines and self.lines[-1].startswith("stage "):
            self.go_on()
        for line in self.process.stdout:
            self.lines.append(line)
            if line.startswith(f"stage {stage}"):
                return line.split()[2:]
            if line.startswith("stage "):
                self.go_on()
        raise AssertionError(f"never reached stage {stage}:\n{''.join(self.lines)}")

    def go_on(self) -> None:
        """Let the process go on past the stage it waits at."""
        self.process.stdin.write("\n")
        self.process.stdin.flush()

    def interrupt(self, sig: int) -> str:
        """Send ``sig``; return the rest of the output once the process and its run are gone."""
        self.process.send_signal(sig)
        output = self.process.communicate(timeout=90)[0]
        left = lambda: leftovers(self.run_id)  # noqa: E731
        wait_until(lambda: not left(), timeout=15, message=f"left running: {left()}")
        return output


#: What a test run hands its processes about its own test database and servers: a nested
#: pytest given these would create, and on its way out destroy, this run's test database.
THIS_RUNS_OWN = (
    "INSTATIC_TEST_TMP",
    "INSTATIC_VAR_DIR",
    "DATABASE_URL",
    "INSTATIC_TEST_PG_CLUSTER",
    "INSTATIC_TEST_MARIADB",
    "INSTATIC_TEST_LEAK_REPORT",
)


@contextmanager
def marked_run(*args: str, separate: bool = False):
    """Start ``python *args`` with a run marker of its own (``separate``: a run of its own)."""
    run_id = uuid.uuid4().hex
    env = {**os.environ, RUN_MARKER: run_id, "PYTHONUNBUFFERED": "1"}
    for name in THIS_RUNS_OWN if separate else ():
        env.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, *args],
        cwd=BASE_DIR,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield MarkedRun(run_id, process, [])
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.parametrize("stage", ["server", "restarted", "scheduler"])
def test_sigint_after_each_stage_leaves_nothing_running(stage):
    """The check finds the run's processes (the server, with its port) until the run ends."""
    with marked_run("-m", "tests.support.interrupted_run") as run:
        workdir, port = run.read_until("server")
        if stage != "server":
            run.read_until(stage)
        running = leftovers(run.run_id)
        assert any(int(port) in process.ports for process in running), running
        output = run.interrupt(signal.SIGINT)
        assert not Path(workdir).exists(), output


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


def test_pytest_terminated_during_a_test_stops_its_schedulers():
    """SIGTERM (what devtools.testsuite forwards) ends pytest as Ctrl-C does, processes and all.

    SIGINT after each stage of a run is tested above; pytest itself would die of SIGTERM at
    once and leave the test's scheduler running.
    """
    target = "tests/support/interrupt_target.py"
    args = ("-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", target)
    with marked_run(*args, separate=True) as run:
        (scheduler,) = run.read_until("scheduler")
        assert int(scheduler) in {process.pid for process in leftovers(run.run_id)}
        assert "KeyboardInterrupt" in run.interrupt(signal.SIGTERM)


def test_an_interrupt_while_a_process_starts_leaves_it_to_be_stopped(monkeypatch):
    """A real SIGINT that comes the moment ``Popen`` has started a test's process: the
    interrupt is raised, and the process is tracked, so the run's end stops it."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen_then_interrupted(*args, **kwargs):
        process = real_popen(*args, **kwargs)
        started.append(process)
        os.kill(os.getpid(), signal.SIGINT)
        return process

    monkeypatch.setattr(subprocess, "Popen", popen_then_interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            ManagedProcess(["help"], name="interrupted-start")
        assert len(started) == 1
        assert started[0] in processes._children, "started, and nothing knows of it"
    finally:
        for process in started:
            processes.kill_group(process)
