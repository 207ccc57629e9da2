"""A test-suite run in miniature, for tests that interrupt it (test_interrupted_run.py).

Run as ``python -m tests.support.interrupted_run``, it does what the suite's fixtures do, in order,
printing ``stage <name>`` after each:

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
from devtools.servers import signals_exit
from tests.support.processes import BASE_DIR, ManagedProcess, stop_children

RESTART = (
    "import os; from devtools.pgcluster import PostgresCluster; "
    "server = PostgresCluster.from_env(os.environ); server.halt(); server.resume()"
)


def stage(name: str, *details) -> None:
    print("stage", name, *details, flush=True)


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
