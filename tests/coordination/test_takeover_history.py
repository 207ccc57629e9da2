"""How the next leader closes a term nobody closed, judged from the old node's row.

A node that stopped (its row says so) but could not close its term (the database was away as
it shut down) ended its leadership by shutting down; one whose row belongs to a newer process
of the same name crashed. The history then says the right thing to an operator.
"""

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from coordination import leadership
from coordination.clock import DatabaseClock, database_now
from coordination.models import LeadershipTerm, Node

pytestmark = pytest.mark.django_db(transaction=True)


def old_term(*, stopped: bool, instance_now: str) -> LeadershipTerm:
    """An open term of node ``old-node`` (instance ``old``), and that node's row as it is now."""
    Node.objects.create(
        name="old-node",
        instance=instance_now,
        host="h",
        pid=1,
        started_at=Now(),
        last_heartbeat=Now(),
        stopped_at=Now() if stopped else None,
    )
    return LeadershipTerm.objects.create(
        group="history", node="old-node", instance="old", started_at=Now()
    )


def take_over() -> None:
    leadership.begin("history", node="new-node", instance="new", key=1, session_id=None)


def test_a_term_left_open_by_a_node_that_stopped_is_closed_as_a_shutdown():
    term = old_term(stopped=True, instance_now="old")
    take_over()
    term.refresh_from_db()
    assert (term.end_reason, term.detail) == ("shutdown", "")
    assert term.ended_at is not None


def test_a_term_of_a_process_replaced_under_the_same_name_is_closed_as_a_crash():
    term = old_term(stopped=False, instance_now="newer-process")
    take_over()
    term.refresh_from_db()
    assert (term.end_reason, term.detail) == (
        "crashed",
        "its process was replaced without a clean shutdown",
    )


def test_the_clock_reads_the_database_the_first_time_it_is_asked():
    clock = DatabaseClock()
    before = database_now()
    first = clock.now()
    assert before <= first <= database_now() + timedelta(seconds=1)
    assert clock.now() >= first, "then it advances from that reading"
