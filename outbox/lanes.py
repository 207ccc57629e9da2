"""Webhook lanes: the endpoints' deliveries split by post among jobs that send side by side.

One job sending every endpoint's deliveries would be one process's CPU for the whole
cluster, however many replicas and workers it has. So the deliveries are split by post into
:data:`~outbox.job_names.WEBHOOK_LANES` lanes, each sent by its own job
(``outbox.webhooks.1`` to ``outbox.webhooks.4``), whose runs the leader hands to different
workers at once. A post's deliveries are all in one lane, so they still go in order; a
delivery without a post goes by its event.

The number of lanes is fixed in the code, not a setting: every replica must split the same
way, or two lanes could send one post's events at the same time, out of order.
"""

from collections.abc import Iterable

from django.db.models import BigIntegerField, QuerySet, Value
from django.db.models.functions import Coalesce, Mod

from outbox.job_names import WEBHOOK_LANES, WEBHOOKS_JOBS
from outbox.models import is_webhook


def lane_of(post_id: int | None, event_id: int) -> int:
    """Return the lane (0-based) of a delivery about ``post_id`` (or, without a post, of
    event ``event_id``)."""
    return (post_id if post_id is not None else event_id) % WEBHOOK_LANES


def lane_of_job(job_name: str) -> int:
    """Return the lane a webhook job sends (``outbox.webhooks.1`` sends lane 0)."""
    return WEBHOOKS_JOBS.index(job_name)


def in_lane(deliveries: QuerySet, lane: int) -> QuerySet:
    """Return the ``deliveries`` of ``lane`` (the same split as :func:`lane_of`)."""
    number = BigIntegerField()
    post_or_event = Coalesce("post_id", "event_id", output_field=number)
    lanes = Value(WEBHOOK_LANES, output_field=number)
    return deliveries.alias(lane=Mod(post_or_event, lanes, output_field=number)).filter(lane=lane)


def job_for(ledger_name: str, post_id: int | None, event_id: int) -> str:
    """Return the job that makes a delivery: its subscriber's, or its webhook lane's."""
    if is_webhook(ledger_name):
        return WEBHOOKS_JOBS[lane_of(post_id, event_id)]
    return ledger_name


def jobs_for(ledger_names: Iterable[str]) -> set[str]:
    """Return the jobs that make the deliveries of ``ledger_names``: every webhook lane for
    an endpoint (when which posts is not known), the subscriber's job otherwise."""
    jobs: set[str] = set()
    for name in ledger_names:
        jobs.update(WEBHOOKS_JOBS if is_webhook(name) else [name])
    return jobs
