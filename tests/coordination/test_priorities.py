"""Which work goes first: the tiers (a table), the workers' claim in their order, and the
outbox stepping aside while posts are going out."""

from datetime import timedelta

import pytest
from django.db import transaction

from coordination.clock import database_now
from coordination.models import JobRun, JobState
from coordination.priorities import (
    TASK_PRIORITIES,
    Priority,
    job_priority,
    priority_of,
    yields,
)
from coordination.registry import make_job, registry
from coordination.schedules import every
from coordination.selectors import group_busy
from coordination.workers.claiming import take_ready_tasks
from coordination.workers.meeting import BACKEND_ALIAS, QUEUE_NAME
from coordination.workers.queueing import enqueue


@pytest.mark.parametrize(
    ("group", "side_effects", "tier"),
    [
        ("publishing", False, Priority.PUBLISHING),
        ("publishing", True, Priority.PUBLISHING),  # publishing's own runs go first, always
        ("plugins", False, Priority.JOBS),
        ("reports", False, Priority.JOBS),
        ("plugins", True, Priority.SIDE_EFFECTS),
    ],
)
def test_a_jobs_tier(group, side_effects, tier):
    assert priority_of(group=group, side_effects=side_effects) is tier


@pytest.mark.parametrize(
    ("mine", "publishing_busy", "steps_aside"),
    [
        (Priority.PUBLISHING, True, False),
        (Priority.PUBLISHING, False, False),
        (Priority.JOBS, True, True),
        (Priority.JOBS, False, False),
        (Priority.SIDE_EFFECTS, True, True),
        (Priority.SIDE_EFFECTS, False, False),
    ],
)
def test_what_steps_aside_while_posts_are_going_out(mine, publishing_busy, steps_aside):
    assert yields(mine, publishing_busy=publishing_busy) is steps_aside


def test_higher_tiers_get_higher_task_priorities_within_django_tasks_range():
    ordered = [TASK_PRIORITIES[tier] for tier in sorted(Priority)]
    assert ordered == sorted(set(ordered))
    assert all(-100 <= value <= 100 for value in ordered)


def _noop(ctx):
    return None


JOBS = [
    make_job(
        _noop,
        name="prio.webhooks",
        group="plugins",
        schedule=every(timedelta(hours=1)),
        run_on="workers",
        side_effects=True,
    ),
    make_job(
        _noop,
        name="prio.plugin",
        group="plugins",
        schedule=every(timedelta(hours=1)),
        run_on="workers",
    ),
    make_job(
        _noop,
        name="prio.publish",
        group="publishing",
        schedule=every(timedelta(hours=1)),
        run_on="workers",
    ),
]


@pytest.mark.django_db(transaction=True)
def test_a_workers_claim_takes_publishing_first_and_side_effects_last():
    now = database_now()
    with registry.temporary(*JOBS):
        # Queued in the worst order: side effects first, publishing last.
        runs = [
            JobRun.objects.create(job=job.name, slot=now, status=JobRun.Status.QUEUED)
            for job in JOBS
        ]
        with transaction.atomic():
            enqueue(runs)
        assert [job_priority(job) for job in JOBS] == [
            Priority.SIDE_EFFECTS,
            Priority.JOBS,
            Priority.PUBLISHING,
        ]
        names = {"queue_name": QUEUE_NAME, "backend": BACKEND_ALIAS, "worker_id": "w1"}
        with transaction.atomic():
            first = take_ready_tasks(**names, limit=2)
        with transaction.atomic():
            rest = take_ready_tasks(**names, limit=3)
    by_run = {run.pk: run.job for run in runs}
    assert [by_run[task.run[0]] for task in first] == ["prio.publish", "prio.plugin"]
    assert [by_run[task.run[0]] for task in rest] == ["prio.webhooks"]


@pytest.mark.django_db
def test_publishing_is_busy_while_a_run_of_it_is_out_or_a_job_of_it_is_due():
    now = database_now()
    JobState.objects.create(
        name="prio.publish", group="publishing", next_due=now + timedelta(hours=1)
    )
    JobState.objects.create(
        name="prio.plugin", group="plugins", next_due=now - timedelta(seconds=1)
    )
    assert not group_busy("publishing")
    assert group_busy("plugins")  # due a moment ago
    run = JobRun.objects.create(job="prio.publish", slot=now, status=JobRun.Status.RUNNING)
    assert group_busy("publishing")
    run.status = JobRun.Status.SUCCEEDED
    run.save()
    assert not group_busy("publishing")
    JobState.objects.filter(name="prio.publish").update(wake_at=now - timedelta(seconds=2))
    assert group_busy("publishing")
    # Due long ago and not started: no leader runs the group; it holds nothing back.
    JobState.objects.filter(name="prio.publish").update(wake_at=now - timedelta(minutes=5))
    assert not group_busy("publishing")


def test_a_ticks_runs_go_highest_tier_first_in_their_own_order_within_a_tier():
    from types import SimpleNamespace

    from coordination.priorities import by_priority

    webhooks, plugin, publish = JOBS
    other = make_job(_noop, name="prio.other", group="plugins", schedule=every(timedelta(hours=1)))
    runs = [SimpleNamespace(job=job) for job in (webhooks, plugin, publish, other)]
    assert [run.job.name for run in by_priority(runs)] == [
        "prio.publish",
        "prio.plugin",
        "prio.other",
        "prio.webhooks",
    ]
