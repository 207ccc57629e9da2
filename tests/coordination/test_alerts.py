"""Alerts: a job that paused itself, a job failing N times, a group with no leader.

Each sends the ``alert_raised`` signal and mails the admins, at most once per interval across
the cluster (the ``Alert`` row is the rate limit).
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.test import override_settings

from coordination import alerts, services
from coordination.clock import database_now
from coordination.models import Alert, JobState
from coordination.scheduler import Scheduler
from tests.coordination.enginekit import GROUP, Recorder, declare, make_due, tick
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admins(settings):
    settings.ADMINS = [("Ops", "ops@example.com")]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    mail.outbox.clear()


@pytest.fixture
def received():
    seen = []

    def receiver(sender, kind, subject, message, **kwargs):
        seen.append((kind, subject))

    alerts.alert_raised.connect(receiver)
    yield seen
    alerts.alert_raised.disconnect(receiver)


def mails(count: int) -> list:
    return wait_until(lambda: len(mail.outbox) >= count and list(mail.outbox), timeout=5)


def test_an_alert_goes_out_once_per_interval_across_the_cluster(admins, received):
    assert alerts.raise_alert(Alert.Kind.JOB_FAILING, "demo.job", "it broke")
    [sent] = mails(1)
    assert sent.to == ["ops@example.com"] and "job failing: demo.job" in sent.subject
    assert "it broke" in sent.body
    # Another replica (or this one) noticing the same thing within the interval stays quiet.
    assert not alerts.raise_alert(Alert.Kind.JOB_FAILING, "demo.job", "it broke again")
    assert Alert.objects.get(subject="demo.job").suppressed == 1
    # A different subject is a different alert.
    assert alerts.raise_alert(Alert.Kind.JOB_FAILING, "demo.other", "also broke")
    # Once the interval has passed, it goes out again.
    Alert.objects.filter(subject="demo.job").update(
        last_sent_at=database_now() - timedelta(hours=2)
    )
    assert alerts.raise_alert(Alert.Kind.JOB_FAILING, "demo.job", "still broken")
    mails(3)
    wait_until(lambda: len(received) == 3, timeout=5)
    assert Alert.objects.get(subject="demo.job").sent == 2


@override_settings(INSTATIC_ALERT_AFTER_FAILURES=2, INSTATIC_FAILURE_PAUSE_THRESHOLD=3)
def test_a_job_failing_in_a_row_and_then_pausing_itself_raises_both_alerts(admins, received):
    recorder = Recorder(fail=True)
    reg, job = declare(recorder)
    make_due(job, ago=timedelta(0))
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))
    services.request_run(job.name, requested_by="test")
    tick(reg)
    assert not Alert.objects.exists(), "one failure is not yet an alert"
    services.request_run(job.name, requested_by="test")
    tick(reg)
    wait_until(lambda: (Alert.Kind.JOB_FAILING, job.name) in received, timeout=5)
    services.request_run(job.name, requested_by="test")
    tick(reg)
    wait_until(lambda: (Alert.Kind.JOB_PAUSED, job.name) in received, timeout=5)
    body = next(m.body for m in mails(2) if "paused itself" in m.subject)
    assert "boom from the job" in body and f"jobs resume {job.name}" in body


@override_settings(INSTATIC_LEASE=0.2)
def test_a_group_with_no_leader_for_longer_than_the_lease_raises_an_alert(admins, received):
    reg, _ = declare(Recorder())
    scheduler = Scheduler(groups=[GROUP], node_name="watcher", registry=reg)
    scheduler.register()  # a follower: its loop never took the lock
    heartbeat = scheduler.heartbeat
    heartbeat.beat()
    assert received == []
    wait_until(lambda: heartbeat.beat() or (Alert.Kind.NO_LEADER, GROUP) in received, timeout=5)
    assert "No scheduler node has led the enginetest group" in mails(1)[0].body
