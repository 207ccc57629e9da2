"""Leadership history with real processes and real faults: who led when, and why it ended.

Each fault that ends a term (SIGTERM, SIGKILL, SIGSTOP, a terminated lock session) must leave
a closed term with the matching reason, and the next leader's term must begin.
"""

import signal

import pytest

from coordination.locks import terminate_holder
from coordination.models import JobRun, Leadership, LeadershipTerm
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

GROUP = "hatest"
JOB = "hatest.tick"


def leader() -> str | None:
    row = Leadership.objects.filter(group=GROUP).first()
    return row.node if row else None


def ended_term(node: str) -> LeadershipTerm:
    return wait_until(
        lambda: LeadershipTerm.objects.filter(
            group=GROUP, node=node, ended_at__isnull=False
        ).first(),
        timeout=15,
        message=f"the term of {node} was not closed",
    )


def takeover(procs, sig: int):
    """Signal the leader; return (old leader's process, the new leader's name)."""
    wait_until(lambda: JobRun.objects.filter(job=JOB, status="succeeded").exists(), timeout=20)
    old = next(p for p in procs if p.name == leader())
    old.signal(sig)
    new = wait_until(lambda: (name := leader()) not in (None, old.name) and name, timeout=15)
    return old, new


def assert_new_term_open(node: str) -> None:
    term = LeadershipTerm.objects.filter(group=GROUP, node=node).latest("started_at")
    assert term.ended_at is None and term.end_reason == ""


def test_sigterm_ends_the_term_as_a_shutdown(schedulers):
    procs = [schedulers(f"lh-term-{i}", GROUP) for i in range(2)]
    old, new = takeover(procs, signal.SIGTERM)
    assert old.wait() == 0
    term = ended_term(old.name)
    assert term.end_reason == LeadershipTerm.EndReason.SHUTDOWN
    assert_new_term_open(new)
    assert term.ended_at <= LeadershipTerm.objects.get(node=new, group=GROUP).started_at


@pytest.mark.server
def test_sigkill_ends_the_term_as_a_crash_recorded_by_the_next_leader(schedulers):
    procs = [schedulers(f"lh-kill-{i}", GROUP) for i in range(2)]
    old, new = takeover(procs, signal.SIGKILL)
    term = ended_term(old.name)
    assert term.end_reason == LeadershipTerm.EndReason.CRASHED
    assert "without a clean shutdown" in term.detail
    assert_new_term_open(new)


@pytest.mark.server
def test_a_frozen_leader_is_recorded_as_fenced_and_keeps_that_reason_when_it_wakes(schedulers):
    procs = [schedulers(f"lh-stop-{i}", GROUP) for i in range(2)]
    old, new = takeover(procs, signal.SIGSTOP)
    # The new leader may close the term as "crashed" a moment before the fencer (another
    # thread) records why: the fencer's reason wins.
    term = wait_until(
        lambda: LeadershipTerm.objects.filter(
            group=GROUP, node=old.name, end_reason=LeadershipTerm.EndReason.FENCED
        ).first(),
        timeout=15,
    )
    assert f"removed by {new}" in term.detail
    old.signal(signal.SIGCONT)
    old.wait_for_log("no longer leader", timeout=15)
    term.refresh_from_db()
    assert term.end_reason == LeadershipTerm.EndReason.FENCED


@pytest.mark.server
def test_a_leader_whose_lock_session_ends_says_it_lost_the_lock(schedulers):
    procs = [schedulers(f"lh-lock-{i}", GROUP) for i in range(2)]
    wait_until(lambda: JobRun.objects.filter(job=JOB, status="succeeded").exists(), timeout=20)
    old = next(p for p in procs if p.name == leader())
    assert terminate_holder(f"group:{GROUP}") is not None
    old.wait_for_log("no longer leader", timeout=15)
    term = wait_until(
        lambda: LeadershipTerm.objects.filter(
            group=GROUP, node=old.name, end_reason=LeadershipTerm.EndReason.LOCK_LOST
        ).first(),
        timeout=15,
    )
    assert term.ended_at is not None
    assert all(p.alive() for p in procs)
