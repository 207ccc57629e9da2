"""Plugin jobs under the real engine, one process: run now, failures, retirement, enable/disable.

Each test drives real ticks of the ``plugins`` group (``plugins.testing.run_tick``) against the
real test database; workers use their own connections, hence ``transaction=True``. Jobs whose
runs or missed slots are counted are on a grid centred on the moment they are declared
(``centered_every``), so no count depends on where the wall clock falls.
"""

import logging
from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.test import override_settings

from coordination import services as coordination_services
from coordination.clock import database_now
from coordination.models import JobRun, JobState, Node
from coordination.registry import registry
from plugins import services
from plugins.exceptions import ControlError
from plugins.models import ControlEvent, PluginState
from plugins.sdk import daily, hourly, make_plugin_job
from plugins.testing import make_due, run_tick
from tests.coordination.enginekit import centered_every

pytestmark = pytest.mark.django_db(transaction=True)

A = ControlEvent.Action
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)


class Calls:
    """A job function that records its contexts and fails while ``fail`` is set."""

    def __init__(self, fail: bool = False):
        self.contexts = []
        self.fail = fail

    def __call__(self, ctx):
        self.contexts.append(ctx)
        if self.fail:
            raise RuntimeError("boom from the plugin")


def declare(name: str, *, plugin: str = "demo", schedule=None, calls: Calls | None = None, **kw):
    calls = calls or Calls()

    def func(ctx):
        return calls(ctx)

    func.__qualname__ = f"declare.{plugin}_{name}"
    job = make_plugin_job(
        func, plugin=plugin, name=name, schedule=schedule or centered_every(MINUTE), **kw
    )
    return job, calls


def runs(job, **filters):
    return list(
        JobRun.objects.filter(job=job.name, **filters)
        .exclude(status=JobRun.Status.MISSED)
        .order_by("slot")
    )


def not_due(job) -> None:
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))


def events(target: str) -> list[tuple[str, str]]:
    return list(
        ControlEvent.objects.filter(target=target).order_by("id").values_list("action", "username")
    )


def test_run_now_runs_a_paused_plugin_job_as_a_manual_run_and_records_who(operator):
    job, calls = declare("nightly", schedule=daily(at="03:00"))
    make_due(job)
    not_due(job)
    services.pause_job(job_name=job.name, user=operator)
    run_tick(job)
    assert calls.contexts == [], "a paused job does not run on its own"

    services.run_job_now(job_name=job.name, user=operator)
    run_tick(job)
    [run] = runs(job)
    assert run.trigger == JobRun.Trigger.MANUAL and run.status == JobRun.Status.SUCCEEDED
    assert run.requested_by == "operator"
    assert calls.contexts[0].trigger == "manual"
    state = JobState.objects.get(name=job.name)
    assert state.paused and state.run_requested_at is None, "still paused after the manual run"
    assert events(job.name) == [(A.JOB_PAUSED, "operator"), (A.JOB_RUN_REQUESTED, "operator")]


@override_settings(INSTATIC_FAILURE_PAUSE_THRESHOLD=3)
def test_failures_in_a_row_pause_the_job_with_its_traceback_and_a_log_line(operator, caplog):
    job, calls = declare("flaky", schedule=centered_every(HOUR), calls=Calls(fail=True))
    make_due(job)
    not_due(job)
    caplog.set_level(logging.WARNING, logger="coordination")
    for expected in (1, 2, 3):
        coordination_services.request_run(job.name, requested_by="test")
        run_tick(job)
        assert JobState.objects.get(name=job.name).consecutive_failures == expected
    failed = runs(job, status=JobRun.Status.FAILED)
    assert len(failed) == 3
    assert (
        "Traceback" in failed[0].error and "RuntimeError: boom from the plugin" in failed[0].error
    )
    state = JobState.objects.get(name=job.name)
    assert state.paused and state.paused_reason == "paused after 3 failures in a row"
    assert f"job {job.name} paused itself after 3 failures in a row" in caplog.text

    make_due(job, ago=timedelta(seconds=1))
    run_tick(job)
    assert len(calls.contexts) == 3, "a job that paused itself does not run on schedule"

    calls.fail = False
    services.resume_job(job_name=job.name, user=operator)
    state = JobState.objects.get(name=job.name)
    assert not state.paused and state.consecutive_failures == 0
    assert events(job.name) == [(A.JOB_RESUMED, "operator")]
    skipped = JobRun.objects.filter(job=job.name, status=JobRun.Status.MISSED)
    assert [(run.slot, run.reason) for run in skipped] == [
        (job.schedule.slot(0), JobRun.MissedReason.PAUSED)
    ]
    # The slot that passed while it was paused stays missed; the job runs again.
    coordination_services.request_run(job.name, requested_by="test")
    run_tick(job)
    assert JobState.objects.get(name=job.name).last_status == "succeeded"


@override_settings(INSTATIC_FAILURE_PAUSE_THRESHOLD=3)
def test_a_success_resets_the_failure_count():
    job, calls = declare("wobbly", schedule=hourly(), calls=Calls(fail=True))
    make_due(job)
    not_due(job)

    def run_once(fail: bool) -> JobState:
        calls.fail = fail
        coordination_services.request_run(job.name, requested_by="test")
        run_tick(job)
        return JobState.objects.get(name=job.name)

    assert run_once(True).consecutive_failures == 1
    assert run_once(True).consecutive_failures == 2
    state = run_once(False)
    assert state.consecutive_failures == 0 and state.last_status == "succeeded"
    assert run_once(True).consecutive_failures == 1
    state = run_once(True)
    assert state.consecutive_failures == 2 and not state.paused


def test_an_undeclared_job_is_retired_not_deleted_unless_a_live_node_declares_it():
    kept, _ = declare("kept", schedule=hourly())
    dropped, _ = declare("dropped", schedule=hourly())
    run_tick(kept, dropped)
    JobRun.objects.create(job=dropped.name, slot=database_now(), status=JobRun.Status.SUCCEEDED)
    other = Node.objects.create(
        name="old-release",
        instance="1" * 32,
        host="h",
        pid=1,
        started_at=Now(),
        last_heartbeat=Now(),
        declared_jobs=[kept.name, dropped.name],
    )

    run_tick(kept)
    assert JobState.objects.get(name=dropped.name).retired_at is None, (
        "a job another live node still declares is not retired"
    )

    Node.objects.filter(pk=other.pk).update(stopped_at=Now())
    run_tick(kept)
    state = JobState.objects.get(name=dropped.name)
    assert state.retired_at is not None
    assert JobRun.objects.filter(job=dropped.name).count() == 1, "its history is kept"
    assert JobState.objects.get(name=kept.name).retired_at is None
    with pytest.raises(ControlError, match="retired"):
        services.run_job_now(job_name=dropped.name, user=None)

    run_tick(kept, dropped)
    assert JobState.objects.get(name=dropped.name).retired_at is None, "declared again: back"


def test_disabling_a_plugin_pauses_its_jobs_and_enabling_resumes_only_those(operator):
    fast, fast_calls = declare("fast")
    held, _ = declare("held", schedule=hourly())
    other, other_calls = declare("work", plugin="other")
    fresh, fresh_calls = declare("fresh")
    for job in (fast, held, other):
        make_due(job)
    services.pause_job(job_name=held.name, user=operator, reason="investigating")

    with registry.temporary(fresh):  # declared here, never seen by the scheduler yet
        assert services.set_plugin_enabled(plugin="demo", enabled=False, user=operator) == 2
    assert not PluginState.objects.get(app_label="demo").enabled
    states = {s.name: s for s in JobState.objects.all()}
    assert states[fast.name].paused and states[fast.name].paused_reason == "plugin disabled"
    assert states[fresh.name].paused and states[fresh.name].paused_reason == "plugin disabled"
    assert states[held.name].paused_reason == "investigating", "an operator's pause is kept"
    assert not states[other.name].paused, "other plugins are not touched"

    make_due(fast, ago=120 * MINUTE, paused=True)
    make_due(fresh, paused=True)
    run_tick(fast, held, other, fresh)
    assert fast_calls.contexts == [] and fresh_calls.contexts == []
    ran = [ctx.slot for ctx in other_calls.contexts]
    assert ran == [other.schedule.slot(0)], "other plugins' jobs still run"
    with pytest.raises(ControlError, match="disabled"):
        services.resume_job(job_name=fast.name, user=operator)
    with pytest.raises(ControlError, match="disabled"):
        services.run_job_now(job_name=fast.name, user=operator)

    # Enabled where the jobs are declared (as in the web process): the service itself records
    # the slots that passed while disabled, up to that moment.
    with registry.temporary(fast, fresh):
        assert services.set_plugin_enabled(plugin="demo", enabled=True, user=operator) == 2
    states = {s.name: s for s in JobState.objects.all()}
    assert not states[fast.name].paused and not states[fresh.name].paused
    assert states[held.name].paused_reason == "investigating"
    run_tick(fast, held, other, fresh)
    assert fast_calls.contexts == [], "slots that passed while disabled do not run late"
    missed = JobRun.objects.filter(job=fast.name, status=JobRun.Status.MISSED).order_by("slot")
    assert [run.slot for run in missed] == fast.schedule.slot_range(-120, 0), "they are recorded"
    assert set(missed.values_list("reason", flat=True)) == {JobRun.MissedReason.PLUGIN_DISABLED}
    state = JobState.objects.get(name=fast.name)
    assert not state.paused and state.next_due == fast.schedule.slot(1), "it goes on"
    assert [a for a, _ in events("demo")] == [A.PLUGIN_DISABLED, A.PLUGIN_ENABLED]
    [disabled] = ControlEvent.objects.filter(target="demo", action=A.PLUGIN_DISABLED)
    assert disabled.user == operator and fast.name in disabled.detail


def test_a_job_of_a_disabled_plugin_that_was_not_paused_refuses_to_run_and_pauses():
    # Centred on now: no later slot can fall due while the test runs, so a tick runs one slot.
    job, calls = declare("late", schedule=centered_every(HOUR))
    services.set_plugin_enabled(plugin="demo", enabled=False, user=None)
    # The job arrives (a deploy) after its plugin was disabled: nothing paused it.
    make_due(job)
    run_tick(job)
    assert calls.contexts == []
    [run] = runs(job)
    assert run.status == JobRun.Status.FAILED
    assert "PluginDisabled: plugin 'demo' is disabled" in run.error
    state = JobState.objects.get(name=job.name)
    assert state.paused and state.paused_reason == "plugin disabled"

    services.set_plugin_enabled(plugin="demo", enabled=True, user=None)
    services.run_job_now(job_name=job.name, user=None)
    run_tick(job)
    assert len(calls.contexts) == 1, "enabled again, it runs"
