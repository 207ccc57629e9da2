"""The outbox: publish events delivered to subscribers, exactly once or at least once.

Publishing writes an event in the transaction of every change the public sees
(:data:`publishing.public_events.OUTBOX_KINDS`). The dispatcher job hands each such event to the
subscribers declared at that moment, one :class:`~outbox.models.Delivery` row per (event,
subscriber), and each subscriber's own job delivers its rows through the engine. See
``docs/plugins.md`` ("Publish events") and ``docs/architecture.md`` ("The outbox").
"""
