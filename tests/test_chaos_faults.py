"""The chaos soak's fault plan: which kinds apply to which database, and ``--faults``; when
a killed leader's run is timed from."""

from datetime import UTC, datetime, timedelta

import pytest

from devtools.chaos.databases import DATABASES
from devtools.chaos.faults import FAULT_KINDS, fault_kinds, parse_fault_selection
from devtools.chaos.faults.runs import timed_from

PGBOUNCER = {"freeze-at-commit", "pgbouncer-restart"}


@pytest.mark.parametrize(
    ("vendor", "failover", "pgbouncer"),
    [
        ("postgresql", False, True),
        ("postgresql-replicated", True, True),
        ("mariadb", False, False),
    ],
)
def test_the_faults_that_apply_to_each_database(vendor, failover, pgbouncer):
    kinds = set(fault_kinds(DATABASES[vendor]))
    assert ("failover" in kinds) is failover
    assert kinds & PGBOUNCER == (PGBOUNCER if pgbouncer else set())


def test_the_first_round_starts_with_the_lease_faults_then_the_worker_faults():
    """The plan is taken from its end, so even a short soak freezes a holder at commit and
    kills, freezes and cuts off a worker process."""
    plan = fault_kinds(DATABASES["postgresql"])
    assert [plan.pop() for _ in range(5)] == [
        "freeze-at-commit",
        "pgbouncer-restart",
        "workerkill",
        "workerfreeze",
        "workersession",
    ]


def test_without_pgbouncer_the_first_round_starts_with_the_worker_faults():
    plan = fault_kinds(DATABASES["mariadb"])
    assert [plan.pop() for _ in range(3)] == ["workerkill", "workerfreeze", "workersession"]


@pytest.mark.parametrize(
    ("vendor", "text", "selected"),
    [
        ("postgresql", "", set()),
        ("postgresql", "freeze-at-commit", {"freeze-at-commit"}),
        ("postgresql", " kill , freeze-at-commit,", {"kill", "freeze-at-commit"}),
        ("mariadb", "kill,freeze-at-commit", {"kill", "freeze-at-commit"}),
    ],
)
def test_a_fault_selection_names_kinds(vendor, text, selected):
    db = DATABASES[vendor]
    assert parse_fault_selection(text, db) == selected
    assert set(fault_kinds(db, frozenset(selected))) <= (selected or set(FAULT_KINDS))


@pytest.mark.parametrize(
    ("vendor", "text", "message"),
    [
        ("postgresql", "kill,freez", "unknown fault kind(s) freez; choose from kill, "),
        ("postgresql", "failover", "none of failover applies to PostgreSQL; choose from kill,"),
        ("mariadb", "freeze-at-commit", "none of freeze-at-commit applies to MariaDB; choose"),
    ],
)
def test_a_bad_fault_selection_says_what_to_choose(vendor, text, message):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        parse_fault_selection(text, DATABASES[vendor])


KILLED = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("followers", "leader_since", "start"),
    [
        (["chaos-2.1"], KILLED + timedelta(seconds=0.2), KILLED),  # taken over: from the kill
        (["chaos-2.1"], None, KILLED),
        # No replica was ready: from when the next one, started since, took the lock.
        ([], KILLED + timedelta(seconds=4), KILLED + timedelta(seconds=4)),
        ([], KILLED - timedelta(seconds=9), KILLED),  # the row still names the killed leader
        ([], None, KILLED),
    ],
)
def test_a_killed_leaders_run_is_timed_from_when_a_follower_could_take_over(
    followers, leader_since, start
):
    assert timed_from(KILLED, followers, leader_since) == start
