"""Plugin jobs on worker processes: where they run by default, and testing them."""

from datetime import timedelta

import pytest
from django.test import override_settings

from coordination.models import JobRun
from coordination.schedules import every
from plugins.sdk import JobDeclarationError, make_plugin_job
from plugins.testing import make_due, run_tick
from tests.coordination.enginekit import centered_every

calls = []


def beat(ctx):
    calls.append((ctx.slot, ctx.node))


@pytest.mark.parametrize(
    ("setting", "declared", "on_workers"),
    [
        ("leader", {}, False),
        ("workers", {}, True),
        ("workers", {"run_on": "leader"}, False),
        ("leader", {"run_on": "workers"}, True),
    ],
    ids=["default-leader", "default-workers", "job-says-leader", "job-says-workers"],
)
def test_a_plugin_job_runs_where_it_says_else_where_the_setting_says(setting, declared, on_workers):
    with override_settings(INSTATIC_PLUGIN_JOBS_RUN_ON=setting):
        job = make_plugin_job(beat, schedule=every(timedelta(minutes=1)), plugin="demo", **declared)
    assert job.on_workers is on_workers


def test_a_place_to_run_that_does_not_exist_is_a_declaration_error_saying_the_choices():
    with pytest.raises(JobDeclarationError, match=r"run_on='everywhere'.*leader, workers"):
        make_plugin_job(
            beat, schedule=every(timedelta(minutes=1)), plugin="demo", run_on="everywhere"
        )


@pytest.mark.django_db(transaction=True)
def test_run_tick_runs_a_workers_job_as_a_worker_process_would():
    calls.clear()
    job = make_plugin_job(
        beat, schedule=centered_every(timedelta(minutes=1)), plugin="demo", run_on="workers"
    )
    make_due(job, ago=timedelta(seconds=1))

    run_tick(job)

    run = JobRun.objects.get(job=job.name)
    assert (run.status, run.slot) == (JobRun.Status.SUCCEEDED, job.schedule.slot(0))
    assert run.node == "test-node/worker-1"
    assert calls == [(run.slot, "test-node/worker-1")]
