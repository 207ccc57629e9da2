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

BASE_DIR = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.multiprocess, pytest.mark.server]
#: The soak's --vendor for the vendor of this test pass.
SOAK_VENDOR = {"postgresql": "postgresql", "mysql": "mariadb"}


def test_short_chaos_soak_holds_every_invariant():
    partitions = os.geteuid() == 0 and shutil.which("ip") is not None
    if not partitions and os.environ.get("CI", "").lower() == "true":
        pytest.fail("the chaos soak needs root and iproute2 for its network partitions")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "devtools.chaos",
            "--duration",
            "60",
            "--seed",
            "7",
            "--vendor",
            SOAK_VENDOR[connection.vendor],
        ],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=400,
    )
    print(result.stdout[-20000:], result.stderr[-3000:])
    # Every invariant was checked (and printed), the liveness ones included.
    unchecked = [name for name, _ in INVARIANTS if name not in result.stdout]
    assert not unchecked, f"invariants not checked: {unchecked}"
    assert result.returncode == 0, "an invariant broke: see the table above"
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
