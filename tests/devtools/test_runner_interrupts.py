"""A Ctrl-C to the test runner leaves nothing running, whatever its tests' processes are doing.

``make test`` runs ``devtools.testsuite`` in the terminal's foreground process group: a Ctrl-C
sends SIGINT to the runner and its pytest (the processes the tests start are in sessions of
their own, and are stopped by the run). Each case starts the runner that way, on a test of
``interrupt_targets.py`` that leaves a scheduler starting, waiting for its database, or waiting
to refuse a node name in use, and sends SIGINT to the runner's process group once the test says
so. Then the runner must exit, and no process that carries this case's probe in its environment
(the runner, pytest, the schedulers: each inherits it) may be left.
"""

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from devtools import mariadb
from devtools.servers import exited
from devtools.testsuite import ancestors
from tests.support.polling import wait_until
from tests.support.processes import BASE_DIR

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.sqlite,  # once per `make test`: the runner it starts runs on SQLite
]

PROBE = "INSTATIC_TEST_INTERRUPT_PROBE"
TARGETS = "tests/devtools/interrupt_targets.py"
#: What a test run hands its processes about its own test database and servers: the runner
#: started here makes its own.
THIS_RUNS_OWN = (
    "INSTATIC_TEST_TMP",
    "INSTATIC_VAR_DIR",
    "DATABASE_URL",
    "INSTATIC_TEST_PG_CLUSTER",
    "INSTATIC_TEST_MARIADB",
    "INSTATIC_TEST_LEAK_REPORT",
)


def probed(probe: str) -> list[str]:
    """Return the processes still running whose environment carries ``probe``, described."""
    needle = f"{PROBE}={probe}".encode()
    mine = ancestors()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                if needle not in environ.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if not exited(int(entry)):
            found.append(f"pid {entry}: {command[:200]}")
    return found


def kill_probed(probe: str) -> None:
    for line in probed(probe):
        pid = int(line.split()[1].rstrip(":"))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


#: (the test's stage when the first Ctrl-C comes, whether Ctrl-C is pressed again and again
#: until the runner exits, as an impatient person does, and the vendors of the nested run). On
#: MariaDB too, where issue 49 saw a refusing ``runscheduler`` left behind: there the runner
#: has a server of its own to stop after pytest.
MOMENTS = [
    ("starting", False, "sqlite"),
    ("waiting", False, "sqlite"),
    ("refusing", False, "sqlite"),
    ("refusing", True, "sqlite"),
    ("refusing", True, "mysql"),
]


@pytest.mark.parametrize(
    "stage, again, vendors",
    MOMENTS,
    ids=[f"{s}{'-pressed-again' if a else ''}-{v}" for s, a, v in MOMENTS],
)
def test_ctrl_c_to_the_runner_leaves_no_process(stage, again, vendors, tmp_path: Path):
    if vendors == "mysql" and not (mariadb.find_server() and mariadb.client_library_available()):
        pytest.skip("MariaDB is not installed")
    probe = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k not in THIS_RUNS_OWN}
    env.update(
        {
            PROBE: probe,
            "INSTATIC_TEST_VENDORS": vendors,
            "PYTHONUNBUFFERED": "1",
            # The nested run's coverage data is its own, not this run's.
            "COVERAGE_FILE": str(tmp_path / ".coverage"),
        }
    )
    target = f"{TARGETS}::test_{stage}"
    log = tmp_path / "runner.log"
    with log.open("wb") as out:
        runner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "devtools.testsuite",
                "-q",
                "-s",
                "-p",
                "no:cacheprovider",
                target,
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a shell gives a foreground job
        )
    output = lambda: log.read_text(errors="replace")  # noqa: E731
    try:
        wait_until(
            lambda: f"stage {stage}" in output() or runner.poll() is not None,
            timeout=120,
            message=f"the runner never reached stage {stage}",
        )
        assert runner.poll() is None, f"the runner ended before stage {stage}:\n{output()}"
        os.killpg(runner.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        deadline = time.monotonic() + 90
        while again and runner.poll() is None and time.monotonic() < deadline:
            wait_until(lambda: runner.poll() is not None, timeout=0.3, fail=False)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(runner.pid, signal.SIGINT)
        runner.wait(timeout=180)
        wait_until(lambda: not probed(probe), timeout=30, fail=False)
        left = probed(probe)
        assert not left, "left running after the runner exited:\n" + "\n".join(
            [*left, output()[-4000:]]
        )
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
        kill_probed(probe)
