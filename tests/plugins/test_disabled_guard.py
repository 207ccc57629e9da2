"""The guard on a disabled plugin's jobs: checked once a tick by the leader, not once a run.

Disabling a plugin pauses its jobs; what pausing cannot cover (a job first declared after its
plugin was disabled, a run requested outside the admin) is refused by the plugin group's
leader before it claims the tick's runs, with one read of the disabled plugins, and recorded
failed with ``PluginDisabled``. Real ticks (``plugins.testing.run_tick``) on the real test
database; the statements are counted on every connection the scheduler opens, job threads
included.
"""

import pytest

from coordination import services as coordination_services
from coordination.models import JobRun, JobState
from plugins import services
from plugins.sdk import hourly, make_plugin_job
from plugins.testing import make_due, run_tick
from tests.support.statements import StatementCount

pytestmark = pytest.mark.django_db(transaction=True)


def declare(name: str, *, plugin: str = "guarded", **options):
    """Declare a plugin job that counts its runs; return (job, list of its contexts)."""
    contexts = []

    def func(ctx):
        contexts.append(ctx)

    func.__qualname__ = f"declare.{plugin}_{name}"
    job = make_plugin_job(func, plugin=plugin, name=name, schedule=hourly(), **options)
    return job, contexts


def the_run(job) -> JobRun:
    [run] = JobRun.objects.filter(job=job.name).exclude(status=JobRun.Status.MISSED)
    return run


@pytest.mark.parametrize("transactional", [False, True], ids=["claim-first", "transactional"])
def test_a_job_declared_after_its_plugin_was_disabled_is_refused_and_paused(transactional):
    services.set_plugin_enabled(plugin="guarded", enabled=False, user=None)
    job, contexts = declare("late", transactional=transactional)
    make_due(job)  # its state exists, not paused: the disable never saw it

    run_tick(job)

    assert contexts == [], "the job's function did not run"
    run = the_run(job)
    assert run.status == JobRun.Status.FAILED
    assert "PluginDisabled: plugin 'guarded' is disabled" in run.error
    state = JobState.objects.get(name=job.name)
    assert state.paused and state.paused_reason == services.PLUGIN_DISABLED_REASON


def test_a_run_requested_outside_the_admin_for_a_disabled_plugin_is_refused():
    job, contexts = declare("asked")
    make_due(job)
    services.set_plugin_enabled(plugin="guarded", enabled=False, user=None)
    JobState.objects.filter(name=job.name).update(paused=False, paused_reason="")
    # Not through plugins.services.run_job_now (which refuses): the engine's own request.
    assert coordination_services.request_run(job.name, requested_by="a script")

    run_tick(job)

    assert contexts == []
    [run] = JobRun.objects.filter(job=job.name, trigger=JobRun.Trigger.MANUAL)
    assert run.status == JobRun.Status.FAILED and "PluginDisabled" in run.error
    state = JobState.objects.get(name=job.name)
    assert state.paused and state.run_requested_at is None, "the request is served, not retried"


def test_other_plugins_run_in_the_same_tick():
    refused, refused_calls = declare("off", plugin="switched_off")
    running, running_calls = declare("on", plugin="switched_on")
    services.set_plugin_enabled(plugin="switched_off", enabled=False, user=None)
    make_due(refused)
    make_due(running)

    run_tick(refused, running)

    assert refused_calls == [] and len(running_calls) == 1
    assert the_run(running).status == JobRun.Status.SUCCEEDED
    assert not JobState.objects.get(name=running.name).paused


def test_the_plugins_are_read_once_a_tick_not_once_a_run():
    jobs = [declare(f"job_{n}")[0] for n in range(5)]
    for job in jobs:
        make_due(job)

    with StatementCount("plugins_pluginstate") as reads:
        run_tick(*jobs)

    assert JobRun.objects.filter(status=JobRun.Status.SUCCEEDED).count() == 5
    assert reads.count == 1, "one read for the tick that started five runs"
