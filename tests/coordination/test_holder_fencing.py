"""Deciding whom to fence by the lock's holder in the server: tables, no processes."""

from datetime import UTC, datetime, timedelta

import pytest

from coordination.liveness import (
    HolderView,
    LeaderView,
    followed_without_live_leader,
    holder_views,
)
from coordination.locks import LockHolder
from coordination.models import Node

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=6)
FRESH = NOW - timedelta(seconds=1)
OLD = NOW - timedelta(seconds=7)


def row(group, *, heartbeat=FRESH, instance="p1", node_instance="p1", stopped=None):
    return LeaderView(
        group=group,
        node="p",
        instance=instance,
        key=1,
        session_id=10,
        node_instance=node_instance,
        last_heartbeat=heartbeat,
        stopped_at=stopped,
    )


@pytest.mark.parametrize(
    ("leaders", "asked"),
    [
        ([], {"g", "h"}),  # no row at all (a clean step-down, nobody wrote one yet)
        ([row("g"), row("h")], set()),  # live leaders: no question to the server
        ([row("g", heartbeat=OLD), row("h")], {"g"}),  # the dead or frozen leader's group
        ([row("g", node_instance="p2"), row("h")], {"g"}),  # its node restarted since
        ([row("g", stopped=OLD), row("h")], {"g"}),  # it stopped
    ],
)
def test_the_server_is_asked_only_about_groups_without_a_live_leader(leaders, asked):
    followed = {"g": 1, "h": 2}
    assert set(followed_without_live_leader(followed, leaders, NOW, LEASE)) == asked


def holder(node, *, instance=None, heartbeat=OLD, node_instance="z1", stopped=None):
    return HolderView(
        group="g",
        key=1,
        pid=42,
        node=node,
        instance=instance,
        node_instance=node_instance,
        last_heartbeat=heartbeat,
        stopped_at=stopped,
    )


@pytest.mark.parametrize(
    ("view", "stale", "work"),
    [
        (holder("z", heartbeat=FRESH), False, "z1"),  # a live holder stays
        (holder("z"), True, "z1"),  # frozen: its work sessions (by name) end too
        (holder("z", instance="z1"), True, "z1"),  # MySQL: the recorded process
        (holder("z", instance="z0", heartbeat=FRESH), True, "z0"),  # a process whose name
        # another process took: not heartbeating, only its own connections end
        (holder("z", stopped=OLD), True, None),  # PostgreSQL: a newer process's sessions stay
        (holder("z", heartbeat=None), True, "z1"),
    ],
)
def test_a_holder_is_stale_without_a_live_heartbeat_of_its_own_process(view, stale, work):
    assert view.stale(NOW, LEASE) is stale
    assert view.work_process() == work


def node(name, instance="i"):
    return Node(name=name, instance=instance, last_heartbeat=OLD)


def lock_holder(key, *, node_name=None, app=None, instance=None):
    return LockHolder(
        key=key,
        pid=7,
        application_name=app,
        client_addr=None,
        since=None,
        node=node_name,
        instance=instance,
    )


def test_holders_are_joined_to_their_nodes_and_unknown_sessions_are_left_alone():
    long_name = "n" * 70
    nodes = [node("z", "z1"), node(long_name, "l1")]
    holders = [
        lock_holder(1, node_name="z", app="z/lock"),
        lock_holder(2, node_name="n" * 58, app="n" * 58 + "/lock"),  # cut to fit
        lock_holder(3, node_name="psql-operator", app="psql-operator/lock"),  # no such node
        lock_holder(4),  # not a scheduler's session
        lock_holder(9, node_name="z", instance="z1"),  # not a key of a followed group
    ]
    views = holder_views(holders, {"g": 1, "h": 2, "k": 3, "m": 4}, nodes)
    assert [(v.group, v.node, v.node_instance) for v in views] == [
        ("g", "z", "z1"),
        ("h", long_name, "l1"),
    ]


def test_a_cut_name_that_two_nodes_share_is_ambiguous_and_left_alone():
    nodes = [node("n" * 58 + "-a"), node("n" * 58 + "-b")]
    holders = [lock_holder(1, node_name="n" * 58, app="n" * 58 + "/lock")]
    assert holder_views(holders, {"g": 1}, nodes) == []
