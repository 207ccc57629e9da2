"""The outbox's retention: finished deliveries, webhook attempts and people-told records
older than ``INSTATIC_OUTBOX_RETENTION_DAYS`` (30) are deleted, so the tables stay bounded.

Deliveries still open (waiting, being delivered, or waiting for a disabled endpoint) are
kept whatever their age, and so are their attempts. Rows go oldest first in batches of
:data:`BATCH`: their ids read along an index on their time, then one ``DELETE`` by primary
key, each in its own short transaction, so no statement holds more than a batch of row
locks and the senders' writes go on beside it; ``should_stop()`` is honoured between
batches, and what a stopped run leaves is deleted by the next.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction

from outbox.models import Delivery, Told, WebhookAttempt

logger = logging.getLogger(__name__)

#: Rows deleted per statement (and per transaction).
BATCH = 1_000


def cutoff(now: datetime, days: int) -> datetime:
    """Return the instant before which finished records are deleted."""
    return now - timedelta(days=days)


def prune(
    *, before: datetime, should_stop: Callable[[], bool] = lambda: False, batch: int = BATCH
) -> dict[str, int]:
    """Delete the outbox's finished records older than ``before``; return how many of each."""
    deleted = {"attempts": 0, "deliveries": 0, "told": 0}
    old_attempts = WebhookAttempt.objects.filter(
        at__lt=before, delivery__finished_at__isnull=False
    ).order_by("at")
    deleted["attempts"] = _in_batches(WebhookAttempt, old_attempts, should_stop, batch)
    old_deliveries = Delivery.objects.filter(finished_at__lt=before).order_by("finished_at")
    deleted["deliveries"] = _in_batches(Delivery, old_deliveries, should_stop, batch)
    old_told = Told.objects.filter(at__lt=before).order_by("at")
    deleted["told"] = _in_batches(Told, old_told, should_stop, batch)
    return deleted


def _in_batches(model, queryset, should_stop, batch: int) -> int:
    total = 0
    while not should_stop():
        pks = list(queryset.values_list("pk", flat=True)[:batch])
        if not pks:
            break
        with transaction.atomic():
            if model is Delivery:
                # Attempts made after the cut-off of a delivery finished before it cannot
                # be (an attempt comes before its delivery finishes); any left go with it.
                WebhookAttempt.objects.filter(delivery_id__in=pks).delete()
            count, _by_model = model.objects.filter(pk__in=pks).delete()
        total += count
        if len(pks) < batch:
            break
    return total
