"""A stopping scheduler marks its node stopped even when the database hung up on it meanwhile.

A PgBouncer or database restart, or a fencer's ``pg_terminate_backend`` / ``KILL``, ends the
sessions of a running scheduler. Its threads reconnect as they go on, but the main thread's
connection sits idle from registration to shutdown: on SIGTERM its last write, the node's
``stopped_at``, must still reach the database, so the other nodes see at once that it is gone
instead of waiting a lease for its heartbeat to go stale.
"""

import copy
import signal

import pytest
from django.db import connection, connections

from coordination.conf import settings
from coordination.models import Node
from coordination.node_setup import label_database_sessions

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

NODE = "lost-connection"


def end_other_sessions() -> int:
    """End every session on the test database but this one's, as a server restart would."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return cursor.fetchone()[0]
        cursor.execute(
            "SELECT ID FROM information_schema.PROCESSLIST"
            " WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
        )
        ids = [row[0] for row in cursor.fetchall()]
        for session in ids:
            cursor.execute(f"KILL CONNECTION {int(session)}")
        return len(ids)


@pytest.mark.server
def test_a_node_whose_sessions_were_ended_still_marks_itself_stopped_on_sigterm(schedulers):
    proc = schedulers(NODE, "hatest")
    proc.wait_for_log(rf"node {NODE} \(pid \d+ on .*\) running groups hatest", timeout=20)
    # The main thread's connection is among them: it registered the node.
    assert end_other_sessions() >= 1

    proc.signal(signal.SIGTERM)

    assert proc.wait(timeout=20) == 0
    node = Node.objects.get(name=NODE)
    assert node.stopped_at is not None, "the node row still says it is running"
    assert "could not mark node" not in proc.log()
    assert f"node {NODE} stopped" in proc.log()


@pytest.mark.mysql
def test_a_mysql_scheduler_gives_up_connecting_within_half_the_lease():
    """Shutdown's new connection to a host that is gone must not wait for the kernel's minutes."""
    saved = copy.deepcopy(connections.settings["default"])
    try:
        connections.settings["default"].get("OPTIONS", {}).pop("connect_timeout", None)
        label_database_sessions("connect-timeout")
        params = connection.get_connection_params()
    finally:
        connections.settings["default"].clear()
        connections.settings["default"].update(saved)
    assert params["connect_timeout"] == max(2, int(float(settings.LEASE) / 2))
