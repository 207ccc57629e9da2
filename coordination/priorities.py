"""Which work goes first where it competes: publishing, then jobs, then side effects.

Three tiers, highest first:

1. ``PUBLISHING``: the runs of the ``publishing`` group's jobs (posts and releases going out);
2. ``JOBS``: every other job, plugin jobs and the outbox's subscribers and dispatcher among
   them (a transactional subscriber's effects commit with its run, like any job's);
3. ``SIDE_EFFECTS``: jobs declared ``side_effects=True``, which send to the world outside
   (webhooks, emails): their work only waits, it is never lost.

A worker's claim takes ready tasks highest tier first (``task_priority``, the django-tasks
priority each run's task is enqueued with), and a job of a lower tier that drains a backlog
yields while publishing's runs are due or running (``yields``): it stops its batch and looks
again ``YIELD_FOR`` later, then drains at full speed once publishing is done. The rule is
pure; who asks it reads the state it needs (``outbox``, ``workers.queueing``).
"""

import enum

#: The group whose runs go first.
PUBLISHING_GROUP = "publishing"

#: How long (seconds) work that yields waits before it looks again.
YIELD_FOR = 0.25


class Priority(enum.IntEnum):
    """A tier of work; a higher value goes first."""

    SIDE_EFFECTS = 0
    JOBS = 1
    PUBLISHING = 2


#: The django-tasks priority (-100 to 100, higher first) of each tier's tasks.
TASK_PRIORITIES = {Priority.SIDE_EFFECTS: -50, Priority.JOBS: 0, Priority.PUBLISHING: 50}


def priority_of(*, group: str, side_effects: bool) -> Priority:
    """Return the tier of a job of ``group`` (``side_effects``: declared as sending to the
    world outside)."""
    if group == PUBLISHING_GROUP:
        return Priority.PUBLISHING
    if side_effects:
        return Priority.SIDE_EFFECTS
    return Priority.JOBS


def job_priority(job) -> Priority:
    """Return the tier of a declared job (``coordination.registry.Job``)."""
    return priority_of(group=job.group, side_effects=job.options.side_effects)


def task_priority(job) -> int:
    """Return the django-tasks priority a run of ``job`` is enqueued with."""
    return TASK_PRIORITIES[job_priority(job)]


def yields(mine: Priority, *, publishing_busy: bool) -> bool:
    """Return whether work of tier ``mine`` steps aside now: it does, below publishing, while
    publishing's runs are due or running."""
    return publishing_busy and mine < Priority.PUBLISHING


def by_priority(runs: list) -> list:
    """Return ``runs`` (anything with a ``job``: a tick's ``RunPlan``\\ s) highest tier first,
    in their own order within a tier: the order a leader starts and queues a tick's runs."""
    return sorted(runs, key=lambda run: -job_priority(run.job))
