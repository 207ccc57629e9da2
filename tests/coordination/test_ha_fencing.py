"""Fencing a frozen leader with real processes: its transactions and row locks end at takeover.

A leader frozen (SIGSTOP) in the middle of a transactional run holds its job's state row
locked and an uncommitted ledger row and effect. The follower that removes it must end those
work sessions too, not only the lock session: otherwise the new leader can take the lock but
never run the slot (the row stays locked while the frozen process lives), and when the old
leader wakes its transaction could still commit. PostgreSQL finds the sessions by
``application_name``; MySQL/MariaDB by the connection ids each process records.
"""

import re
import signal
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.functions import Now

from coordination.conf import settings
from coordination.locks import terminate_holder
from coordination.models import JobRun, Leadership, Node, NodeSession
from tests.jobsapp.models import Effect
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

CRASHY = "hatest.crashy"  # transactional, every 2 s, works HATEST_SLOW_SECONDS, missed="all"
GROUP = "hatest_crash"


def leader() -> str | None:
    row = Leadership.objects.filter(group=GROUP).first()
    return row.node if row else None


@pytest.mark.server
def test_a_frozen_leaders_open_transaction_ends_at_takeover(schedulers):
    procs = [schedulers(f"fence-{i}", GROUP, env={"HATEST_SLOW_SECONDS": "6"}) for i in (0, 1)]
    frozen = wait_until(
        lambda: next((p for p in procs if "working on slot" in p.log()), None), timeout=20
    )
    slot = frozen.log().split("working on slot ")[1].split()[0]
    frozen.signal(signal.SIGSTOP)
    survivor = next(p for p in procs if p is not frozen)
    # The survivor runs the very slot the frozen leader was in: its row lock is gone.
    survivor.wait_for_log(rf"working on slot {re.escape(slot)}", timeout=15)
    # The fencer logs once every session is ended; its own loop may take the freed lock and
    # start the slot a moment before that line is written.
    survivor.wait_for_log(r"and \d+ work session\(s\)", timeout=15)
    fenced = re.search(r"and (\d+) work session\(s\)", survivor.log())
    assert fenced and int(fenced[1]) >= 1, "the frozen leader's work sessions were ended"
    frozen.signal(signal.SIGCONT)
    run = wait_until(
        lambda: JobRun.objects.filter(job=CRASHY, status="succeeded").order_by("slot").first(),
        timeout=20,
    )
    assert run.slot.isoformat() == slot and run.node == survivor.name
    frozen.wait_for_log("no longer leader", timeout=15)
    # The woken ex-leader's transaction could not commit: one effect per slot.
    effects = Counter(Effect.objects.filter(job=CRASHY).values_list("slot", flat=True))
    assert max(effects.values()) == 1
    assert not Effect.objects.filter(job=CRASHY, node=frozen.name).exists()


@pytest.mark.mysql
def test_each_scheduler_records_its_lock_and_work_connections(schedulers):
    procs = [schedulers(f"rec-{i}", "hatest") for i in (0, 1)]
    name = wait_until(
        lambda: (row := Leadership.objects.filter(group="hatest").first()) and row.node,
        timeout=20,
    )
    lead = Leadership.objects.get(group="hatest")
    recorded = wait_until(
        lambda: list(NodeSession.objects.filter(instance=lead.instance)), timeout=10
    )
    roles = Counter(row.role for row in recorded)
    assert roles["lock"] >= 1 and roles["work"] >= 2, roles  # heartbeat, loop, main thread
    assert lead.session_id in {row.connection_id for row in recorded if row.role == "lock"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT ID, HOST FROM information_schema.PROCESSLIST")
        live = dict(cursor.fetchall())
    assert all(live.get(row.connection_id) == row.client for row in recorded)
    # A stopped node's records go with it.
    stopped = next(p for p in procs if p.name == name)
    assert stopped.stop() == 0
    instance = Node.objects.get(name=name).instance
    assert not NodeSession.objects.filter(instance=instance).exists()


@pytest.mark.server
def test_a_sleeping_leader_notices_at_once_that_its_lock_session_ended(schedulers):
    """The leader of an hourly job sleeps up to INSTATIC_NOTIFY_MAX_TICK (30 s), but on its lock
    connection's socket: the session's end (a fencer's or an operator's kill) wakes it."""
    procs = [schedulers(f"sleeper-{i}", "hatest_cli") for i in (0, 1)]
    old = wait_until(
        lambda: Leadership.objects.filter(
            group="hatest_cli", since__lt=Now() - timedelta(seconds=6)
        ).first(),
        timeout=20,
    )
    sleeper = next(p for p in procs if p.name == old.node)
    assert terminate_holder(settings.group_key("hatest_cli")) is not None
    sleeper.wait_for_log("no longer leader", timeout=10)
    assert all(p.alive() for p in procs)
