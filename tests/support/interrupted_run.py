"""A test-suite run in miniature, for tests that interrupt it (test_interrupted_run.py).

Run as ``python -m tests.support.interrupted_run``, it does what the suite's fixtures do, in order,
printing ``stage <name>`` after each and waiting until the test lets it go on:

- ``server``: the suite's PostgreSQL server (``devtools.pgcluster``), as ``devtools.testsuite``
  starts it;
- ``restarted``: a test in another process halts and resumes that server through its handed-down
  handle (``from_env``), as tests/coordination/test_ha_liveness.py does, so the running server
  is one its owner did not start;
- ``scheduler``: a test's ``runscheduler`` (tests/support/processes.py), waiting for a database
  that does not exist, so it keeps running;

then waits for a signal. SIGINT (or SIGTERM) at any point must leave nothing running.
"""

import os
import signal
import subprocess
import sys

from devtools.pgcluster import PostgresCluster
from devtools.servers import (
    HandedDown,
    ServerProcess,
    free_port,
    make_workdir,
    pid_in,
    signals_exit,
    stop_pid,
    wait_for_port,
)
from tests.support.processes import BASE_DIR, ManagedProcess, stop_children

#: A TCP server that writes its pid file, as mariadbd does, and serves until a signal ends it.
SERVE = (
    "import os, signal, socket, sys; s = socket.socket(); "
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
    "s.bind(('127.0.0.1', int(sys.argv[2]))); s.listen(); "
    "open(sys.argv[1], 'w').write(str(os.getpid())); signal.pause()"
)


class PidFileServer(HandedDown, ServerProcess):
    """A real server process with a pid file, restarted the way ``MariaDBServer`` is.

    ``resume()`` on a handle starts a new process that the handle's process owns, not the
    server's owner: the owner's ``stop()`` must still end it (through the pid file).
    """

    ENV_VAR = "INSTATIC_TEST_PIDFILE_SERVER"
    BINARY = "binary"
    pid_file_name = "server.pid"

    def __init__(self):
        self.binary, self.port, self.user = sys.executable, free_port(), None

    def start(self) -> "PidFileServer":
        self.workdir = make_workdir("instatic-pidfile-", None)
        self.resume()
        return self

    def resume(self) -> None:
        pid_file = self.workdir / self.pid_file_name
        self.process = subprocess.Popen(
            [self.binary, "-c", SERVE, str(pid_file), str(self.port)], start_new_session=True
        )
        wait_for_port(self.port)

    def halt(self) -> None:
        pid = pid_in(self.workdir / self.pid_file_name)
        stop_pid(pid)
        (self.workdir / self.pid_file_name).unlink()
        self.process = None

    def _adopt(self, binary: str) -> None:
        self.binary, self.process = binary, None


RESTART = (
    "import os; from devtools.pgcluster import PostgresCluster; "
    "server = PostgresCluster.from_env(os.environ); server.halt(); server.resume()"
)


def stage(name: str, *details) -> None:
    """Say that stage ``name`` is done, then wait until the test lets the run go on (a line on
    stdin): what the stage started is still as it was while the test looks at it (the next
    stage restarts the server, whose port is then closed for a moment)."""
    print("stage", name, *details, flush=True)
    sys.stdin.readline()


def main() -> None:
    with signals_exit(), PostgresCluster() as server:
        try:
            stage("server", server.workdir, server.port)
            env = dict(os.environ)
            server.export_env(env)
            subprocess.run([sys.executable, "-c", RESTART], env=env, cwd=BASE_DIR, check=True)
            stage("restarted")
            scheduler_env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "instatic.settings",
                "DJANGO_DEBUG": "1",
                "DATABASE_URL": server.url("absent"),
                "INSTATIC_STARTUP_DB_WAIT": "600",
            }
            scheduler = ManagedProcess(["runscheduler"], name="interrupted", env=scheduler_env)
            scheduler.wait_for_log("Trying again in", timeout=60)
            stage("scheduler", scheduler.pid)
            signal.pause()
        finally:
            stop_children()  # first, as the test session's end does


if __name__ == "__main__":
    main()
