"""The outbox's own job, named in one place (the wake-ups and the declaration use it)."""

#: Hands undispatched publish events to the subscribers (see :mod:`outbox.dispatch`).
DISPATCH_JOB = "outbox.dispatch"

#: Sends the webhook endpoints' deliveries (see :mod:`outbox.webhooks.sending`).
WEBHOOKS_JOB = "outbox.webhooks"

#: Emails authors about their posts' events (see :mod:`outbox.notifications`).
NOTIFY_JOB = "outbox.notify_authors"

#: Deletes the outbox's finished records past their retention (see :mod:`outbox.retention`).
PRUNE_JOB = "outbox.prune"
