"""A group loop that has nothing to lead, or stops while a run outlives its grace period.

``--once`` on a node that another node leads does nothing and says so; a shutdown whose grace
period ends before a claim-first run does leaves that run abandoned with the reason (so the
job's retry policy applies), says which jobs were still running, and counts as cut off.
"""

import logging
import threading
from datetime import timedelta

import pytest
from django.test import override_settings

from coordination.models import JobRun
from coordination.scheduler import Scheduler
from tests.coordination.enginekit import GROUP, Recorder, declare, make_due, tick
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def end_job_threads(scheduler) -> None:
    """Wait until the job threads of a stopped scheduler have closed their connections and ended.

    A run that outlived the grace period finishes after the loop stopped, on a thread the loop
    no longer ends; its connection would keep the test database busy until the process exits.
    """

    def ended():
        for loop in scheduler.loops:
            loop.job_threads.shutdown()
        return not any(t.name.startswith("jobs:") and t.is_alive() for t in threading.enumerate())

    wait_until(ended, timeout=15, interval=0.05)


def loop_log(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "coordination.loop"]


def test_once_on_a_node_another_node_leads_does_nothing_and_says_so(locks, caplog):
    recorder = Recorder()
    reg, job = declare(recorder)
    make_due(job, ago=timedelta(0))
    other_leader = locks(f"group:{GROUP}")
    assert other_leader.acquire()

    with caplog.at_level(logging.INFO, logger="coordination.loop"):
        scheduler = tick(reg)

    assert recorder.slots == []
    assert not JobRun.objects.filter(job=job.name).exists()
    assert any(
        f"another node leads (key {other_leader.key_text}); nothing to do in --once mode" in m
        for m in loop_log(caplog)
    )
    assert scheduler.cut_offs == []


@override_settings(INSTATIC_SHUTDOWN_GRACE=0.2)
def test_a_run_that_outlives_the_shutdown_grace_is_abandoned_with_the_reason(caplog):
    release = threading.Event()
    recorder = Recorder(block=release)
    reg, job = declare(recorder)
    slot = make_due(job, ago=timedelta(0))
    scheduler = Scheduler(groups=[GROUP], node_name="stopping-node", registry=reg)
    caplog.set_level(logging.WARNING, logger="coordination.loop")
    scheduler.start()
    try:
        wait_until(lambda: recorder.slots, timeout=15)
        scheduler.stop()
        scheduler.wait()
    finally:
        release.set()
        scheduler.stop()
        scheduler.wait()
        scheduler.finish()
        end_job_threads(scheduler)

    run = JobRun.objects.get(job=job.name)
    assert (run.slot, run.status) == (slot, "abandoned")
    assert run.error == "the node shut down before the run finished (grace period exceeded)"
    assert f"1 job(s) still running after the grace period: {job.name}" in " ".join(
        loop_log(caplog)
    )
    assert "1 run(s) outlived the grace period" in scheduler.cut_offs
