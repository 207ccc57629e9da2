"""The bench-only subscriber ``benchsubscriber.record``.

Transactional: for each ``published`` event it inserts one row into
``bench_outbox_effect``, in the savepoint of the run's transaction that also marks the
delivery succeeded. The table has no unique constraint and no model (bench/outbox.py
creates it with SQL before the replicas start), so an event delivered twice shows as two rows
whatever the delivery ledger says.
"""

from django.db import connection

from plugins.sdk import JobContext, on_post_event


@on_post_event("published", transactional=True)
def record(event, ctx: JobContext) -> None:
    """Write one row for ``event``: the subscriber's whole effect."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_outbox_effect (event_id, post_id, delivery_id) VALUES (%s, %s, %s)",
            [event.id, event.post_id, event.delivery_id],
        )
