"""The short chaos soak: about a minute of random faults; every invariant must hold.

The long soak is ``make chaos``. This one runs once per server pass of ``make test``: on a
throwaway PostgreSQL in the PostgreSQL pass and on a throwaway MariaDB in the MariaDB pass, so
CI guards the invariants on both on every change. On PostgreSQL its lease-mode replicas run
behind a real PgBouncer, and its first faults (see devtools/chaos/faults/__init__.py) freeze
their lease holder between a run's fence and its ``COMMIT`` and restart the PgBouncer; the next
ones (on MariaDB the first) SIGKILL, freeze and cut off a worker process. Its release stream
puts releases together beside the editors, which must go out whole, once, never early. It needs
root for the network namespaces of the partition fault; under ``CI=true`` a missing ``ip netns``
is a failure.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from devtools.chaos.invariants import INVARIANTS
from devtools.servers import RUN_MARKER
from devtools.testsuite import leftovers, stop_quietly
from tests.support.polling import wait_until

BASE_DIR = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.multiprocess, pytest.mark.server]
#: The soak's --vendor for the vendor of this test pass.
SOAK_VENDOR = {"postgresql": "postgresql", "mysql": "mariadb"}


#: How long the short soak may take (seconds); about 3 minutes on a quiet machine.
SOAK_WITHIN = 400
#: How long a soak stopped with SIGTERM may take to stop its processes and its server.
STOP_WITHIN = 120


def run_soak(*args: str) -> subprocess.CompletedProcess:
    """Run the soak; past SOAK_WITHIN, stop it with SIGTERM (it says where it was and stops
    what it started) and fail with what it printed."""
    soak = subprocess.Popen(
        [sys.executable, "-m", "devtools.chaos", *args],
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        stdout, stderr = soak.communicate(timeout=SOAK_WITHIN)
    except subprocess.TimeoutExpired:
        soak.terminate()
        try:
            stdout, stderr = soak.communicate(timeout=STOP_WITHIN)
        except subprocess.TimeoutExpired:
            soak.kill()
            stdout, stderr = soak.communicate()
        pytest.fail(
            f"the soak took over {SOAK_WITHIN} s and was stopped; it printed:\n"
            f"{stdout[-20000:]}\n{stderr[-5000:]}"
        )
    return subprocess.CompletedProcess(soak.args, soak.returncode, stdout, stderr)


def test_short_chaos_soak_holds_every_invariant():
    partitions = os.geteuid() == 0 and shutil.which("ip") is not None
    if not partitions and os.environ.get("CI", "").lower() == "true":
        pytest.fail("the chaos soak needs root and iproute2 for its network partitions")
    result = run_soak("--duration", "60", "--seed", "7", "--vendor", SOAK_VENDOR[connection.vendor])
    print(result.stdout[-20000:], result.stderr[-3000:])
    # Every invariant was checked (and printed), the liveness ones included.
    unchecked = [name for name, _ in INVARIANTS if name not in result.stdout]
    assert not unchecked, f"invariants not checked: {unchecked}"
    broken = [line.strip() for line in result.stdout.splitlines() if re.search(r"\sNO\s{4}", line)]
    assert result.returncode == 0, f"an invariant broke (the table above): {broken}"
    assert "ALL INVARIANTS HELD" in result.stdout
    if partitions:
        assert "skipped: no network namespaces" not in result.stdout
    # The release stream made releases, and some went out, for the release invariants to check.
    releases = re.search(r"releases: \d+ made, (\d+) scheduled .*?, (\d+) released;", result.stdout)
    assert releases and int(releases[1]) >= 1 and int(releases[2]) >= 1, "no release went out"
    # Events published with no fault near had their delivery time checked.
    timed = re.search(r"(\d+) events, max [\d.]+ s; \d+ with a fault near left out", result.stdout)
    assert timed and int(timed[1]) >= 1, "no delivery's time was checked"
    for kind in ("workerkill", "workerfreeze", "workersession"):
        # A fault aimed at a worker process logs its node name; a skipped one logs "-".
        assert re.search(rf"fault {kind} -> chaos-[^ ]+/worker-1", result.stdout), kind
    if connection.vendor == "postgresql":
        frozen = re.search(r"(\d+) slots, each run elsewhere", result.stdout)
        restarts = re.search(r"(\d+) restarts; worst", result.stdout)
        assert frozen and int(frozen[1]) >= 1, "no lease holder was frozen at commit"
        assert restarts and int(restarts[1]) >= 1, "PgBouncer was not restarted"


@pytest.mark.mysql
def test_a_soak_stopped_with_sigterm_says_where_it_was_and_stops_all_it_started():
    """What the short soak's test does when the soak takes too long: every process the soak
    started (replicas, workers, web, the server) goes with it."""
    mark = f"soak-sigterm-{os.getpid()}"
    soak = subprocess.Popen(
        [sys.executable, "-m", "devtools.chaos", "--duration", "60", "--vendor", "mariadb"],
        cwd=BASE_DIR,
        env={**os.environ, RUN_MARKER: mark},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = lambda: [p for p in leftovers(mark) if "runscheduler" in p.command]  # noqa: E731
    try:
        wait_until(started, timeout=120, message="the soak started no replica")
        soak.terminate()
        stdout, stderr = soak.communicate(timeout=STOP_WITHIN)
    finally:
        if soak.poll() is None:
            soak.kill()
            soak.communicate()
        left = leftovers(mark)
        for process in left:
            stop_quietly(process.pid)
    assert "SIGTERM: stopping the soak; where it was:" in stdout, stdout + stderr
    assert 'File "' in stdout  # the stacks
    assert not left, left
    assert soak.returncode == 128 + 15
