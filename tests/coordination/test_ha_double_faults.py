"""Two faults at once, with real processes: a frozen follower is granted the leader's lock.

Node P leads ``hatest``; node Z leads ``hatest_cli`` and waits in the server for ``hatest``'s
lock, first in line; node Y waits behind it. Z is frozen (SIGSTOP), then P is killed (SIGKILL)
or loses only its lock session: the server hands the lock to Z's waiting session while Z cannot
run. Z never writes its leadership row, so the row names P (or, once P says it lost the lock,
nobody). The followers must fence by who holds the lock in the server (and that holder's
heartbeat), not by the row: Y ends Z's sessions and leads.
"""

import signal

import pytest
from django.db import connection

from coordination.clock import database_now
from coordination.conf import settings
from coordination.keys import normalize_key, split_key
from coordination.locks import terminate_holder
from coordination.locks.mysql import lock_name
from coordination.models import JobRun, Leadership
from tests.support import lockwaits as lock_waits
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True), pytest.mark.server]

GROUP = "hatest"  # hatest.tick every second
OTHER = "hatest_cli"  # hourly: the group the frozen follower leads
LEASE = 3.0
#: Lease and heartbeat as in tests/conftest.py's FAST; lock waits long enough that no waiter
#: times out and queues again (behind the other) while the test sets the order up.
ENV = {
    "INSTATIC_LEASE": str(LEASE),
    "INSTATIC_HEARTBEAT_INTERVAL": "0.5",
    "INSTATIC_LOCK_WAIT": "300",
}


def leader(group: str) -> Leadership | None:
    return Leadership.objects.filter(group=group).first()


def _key() -> int:
    return normalize_key(settings.group_key(GROUP))


def waits_for_lock(node: str) -> bool:
    """Return True if ``node``'s lock session is waiting in the server for ``GROUP``'s lock."""
    return lock_waits.waits_for_lock(node, GROUP)


def lock_holder() -> str | None:
    """Return the node whose session holds ``GROUP``'s lock in the server right now."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            classid, objid = split_key(_key())
            cursor.execute(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a"
                " ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"
                " AND l.classid::bigint = %s AND l.objid::bigint = %s",
                (classid, objid),
            )
            row = cursor.fetchone()
            return row[0].removesuffix("/lock") if row else None
        cursor.execute(
            "SELECT s.node FROM coordination_nodesession s JOIN information_schema.PROCESSLIST p"
            " ON p.ID = s.connection_id AND p.HOST = s.client WHERE p.ID = IS_USED_LOCK(%s)",
            (lock_name(connection.settings_dict["NAME"], _key()),),
        )
        row = cursor.fetchone()
        return row[0] if row else None


@pytest.mark.parametrize("fault", ["sigkill", "lock lost"])
def test_a_frozen_follower_granted_the_leaders_lock_is_fenced_within_the_lease(schedulers, fault):
    """``sigkill``: the leader dies. ``lock lost``: only its lock session ends (an operator, a
    network blip); it lives on and follows, so its heartbeat stays fresh."""
    p = schedulers("df-p", GROUP, env=ENV)
    wait_until(lambda: (row := leader(GROUP)) and row.node == "df-p", timeout=30)
    # Z first in line for the lock, Y behind it: the server grants waiters in order.
    z = schedulers("df-z", OTHER, GROUP, env=ENV)
    wait_until(lambda: (row := leader(OTHER)) and row.node == "df-z", timeout=30)
    wait_until(lambda: waits_for_lock("df-z"), timeout=30, message="Z never waited for the lock")
    y = schedulers("df-y", GROUP, OTHER, env=ENV)
    wait_until(lambda: waits_for_lock("df-y"), timeout=30, message="Y never waited for the lock")

    z.signal(signal.SIGSTOP)
    frozen_at = database_now()
    killed_at = database_now()
    if fault == "sigkill":
        p.signal(signal.SIGKILL)
    else:
        assert terminate_holder(settings.group_key(GROUP)) is not None
    # The double fault as reported: the frozen follower's waiting session got the lock, and
    # nobody wrote a leadership row for it.
    wait_until(lambda: lock_holder() == "df-z", timeout=10, message="Z was not granted the lock")
    row = leader(GROUP)
    assert row is None or row.node == "df-p"

    # A deadline for the wait; the bound is checked on the database's own times below.
    new = wait_until(
        lambda: (row := leader(GROUP)) and row.node != "df-p" and row,
        timeout=30,
        message="nobody leads the group while its lock's holder is frozen",
    )
    assert new.node == "df-y"
    took = (new.since - killed_at).total_seconds()
    assert took <= LEASE + 1, f"the group led again {took:.2f}s after the {fault} (lease {LEASE}s)"
    after_freeze = (new.since - frozen_at).total_seconds()
    print(f"{fault}: led again {took:.2f}s after it, {after_freeze:.2f}s after the freeze")
    # Fenced by a follower: Y, or P when it only lost its lock and follows too. The fencer logs
    # once the session is gone, which can be just after the next leader got the lock.
    wait_until(
        lambda: any("took over from stale node df-z" in proc.log() for proc in (p, y)),
        timeout=10,
        message="no follower logged that it removed Z",
    )
    wait_until(
        lambda: JobRun.objects.filter(job="hatest.tick", node="df-y", status="succeeded").exists(),
        timeout=20,
    )
    # Z wakes without its sessions and follows; nothing it ran meanwhile ran twice.
    z.signal(signal.SIGCONT)
    z.wait_for_log("could not take advisory lock|no longer leader", timeout=20)
    assert z.alive()
    assert fault == "sigkill" or p.alive()
    slots = list(
        JobRun.objects.filter(job="hatest.tick", status="succeeded").values_list("slot", flat=True)
    )
    assert len(slots) == len(set(slots))
