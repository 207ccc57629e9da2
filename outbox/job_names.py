"""The outbox's own jobs, named in one place (the wake-ups and the declarations use them)."""

#: Hands undispatched publish events to the subscribers (see :mod:`outbox.dispatch`).
DISPATCH_JOB = "outbox.dispatch"

#: How many jobs send the webhook endpoints' deliveries side by side, each its own share of
#: the posts (see :mod:`outbox.lanes`).
WEBHOOK_LANES = 4

#: Send the webhook endpoints' deliveries (see :mod:`outbox.webhooks.sending`): lane 0 is
#: ``outbox.webhooks.1``.
WEBHOOKS_JOBS = tuple(f"outbox.webhooks.{lane + 1}" for lane in range(WEBHOOK_LANES))

#: Emails authors about their posts' events (see :mod:`outbox.notifications`).
NOTIFY_JOB = "outbox.notify_authors"
