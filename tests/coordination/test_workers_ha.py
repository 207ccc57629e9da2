"""Runs on workers with real processes: schedulers with worker processes, worker-only nodes.

The jobs are in ``tests/coordination/workersapp`` (group ``hatest_workers``); each writes an
``Effect`` that names the worker process that ran it.
"""

import pytest
from django.db.models import Count

from coordination.models import JobRun, Node
from tests.jobsapp.models import Effect
from tests.support.polling import wait_until

pytestmark = [pytest.mark.multiprocess, pytest.mark.django_db(transaction=True)]

GROUP = "hatest_workers"
ENV = {"INSTATIC_TEST_EXTRA_APPS": "tests.coordination.workersapp", "HATEST_SLOW_SECONDS": "0.2"}


def no_slot_twice(job: str) -> None:
    doubled = Effect.objects.filter(job=job).values("slot").annotate(n=Count("id")).filter(n__gt=1)
    assert not doubled.exists(), list(doubled)


def test_a_scheduler_with_workers_runs_its_jobs_on_its_worker_processes(schedulers):
    schedulers("wk-1", GROUP, env=ENV, extra_args=["--workers", "2"])

    wait_until(lambda: Effect.objects.filter(job="workers.tick").count() >= 5, timeout=60)
    wait_until(lambda: Effect.objects.filter(job="workers.claimed").count() >= 2, timeout=60)

    ran_on = set(
        JobRun.objects.filter(status=JobRun.Status.SUCCEEDED).values_list("node", flat=True)
    )
    assert ran_on and ran_on <= {"wk-1/worker-1", "wk-1/worker-2"}, ran_on
    assert set(Effect.objects.values_list("node", flat=True)) <= {"wk-1/worker-1", "wk-1/worker-2"}
    assert set(Node.objects.filter(role=Node.Role.WORKER).values_list("name", flat=True)) == {
        "wk-1/worker-1",
        "wk-1/worker-2",
    }
    for job in ("workers.tick", "workers.claimed"):
        no_slot_twice(job)
