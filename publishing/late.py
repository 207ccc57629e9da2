"""Scheduled posts still not live ``INSTATIC_LATE_ALERT_AFTER`` past their time: each is
told once, as a ``late`` publish event (which the outbox hands to webhooks, subscribers and
the author's notifications).

A run looks only at posts whose lateness crossed the threshold since the last run that
succeeded (:func:`window`): a backlog of 100,000 overdue posts is read once, by the run it
crossed in, never again by every run after it. An event already recorded for a post's
current time (``at`` after its ``publish_at``) keeps the overlapping edges of two windows,
and a post found again after a failed run, from being told twice; a post rescheduled since
is told again if it is late again.
"""

from datetime import datetime, timedelta

from django.db.models import Exists, OuterRef

from coordination.models import JobRun
from publishing.conf import settings
from publishing.history import stored_time
from publishing.job_names import LATE_JOB
from publishing.models import Post, PublishEvent

#: How far each window reaches back past the last run's start, for clocks a little apart.
MARGIN = timedelta(minutes=1)


def late_after() -> timedelta:
    """Return how long past its time a scheduled post is late (``INSTATIC_LATE_ALERT_AFTER``)."""
    return timedelta(seconds=float(settings.LATE_ALERT_AFTER))


def window(
    last_look: datetime | None, now: datetime, after: timedelta
) -> tuple[datetime | None, datetime]:
    """Return the ``(low, high]`` range of due times a run at ``now`` looks at.

    ``high`` is the latest due time that is late at ``now``; ``low`` is where the last look
    (the start of the last run that succeeded, less :data:`MARGIN`) stopped, or ``None``
    when there was none: the first run looks at every overdue post once.
    """
    high = now - after
    if last_look is None:
        return None, high
    return min(last_look - after - MARGIN, high), high


def last_look() -> datetime | None:
    """Return when the last run of the late job that succeeded started, or ``None``."""
    return (
        JobRun.objects.filter(job=LATE_JOB, status=JobRun.Status.SUCCEEDED)
        .order_by("-slot")
        .values_list("started_at", flat=True)
        .first()
    )


def record_late_posts(*, now: datetime, node: str) -> int:
    """Record a ``late`` event for every late post of this run's window not told yet;
    return how many.

    All of the window in one run: a run that stopped part-way would leave the rest below
    the next run's window, never told.
    """
    after = late_after()
    low, high = window(last_look(), now, after)
    told = PublishEvent.objects.filter(
        post=OuterRef("pk"), kind=PublishEvent.Kind.LATE, at__gte=OuterRef("publish_at")
    )
    posts = Post.objects.filter(status=Post.Status.SCHEDULED, last_error="", publish_at__lte=high)
    if low is not None:
        posts = posts.filter(publish_at__gt=low)
    rows = list(
        posts.filter(~Exists(told))
        .order_by("publish_at", "id")
        .values_list("id", "publish_at", "version")
    )
    PublishEvent.objects.bulk_create(
        [
            PublishEvent(
                post_id=pk,
                kind=PublishEvent.Kind.LATE,
                node=node,
                lateness=(now - due).total_seconds(),
                data={
                    "was_due_at": stored_time(due),
                    "late_after": after.total_seconds(),
                    "version": version,
                },
            )
            for pk, due, version in rows
        ],
        batch_size=1000,
    )
    return len(rows)


def next_late_at(now: datetime) -> datetime | None:
    """Return when the next scheduled post becomes late, or ``None`` if none will."""
    after = late_after()
    due = (
        Post.objects.filter(status=Post.Status.SCHEDULED, last_error="", publish_at__gt=now - after)
        .order_by("publish_at")
        .values_list("publish_at", flat=True)
        .first()
    )
    return None if due is None else due + after
