"""``on_post_event``: subscribe a plugin's function to publish events.

::

    from plugins.sdk import on_post_event


    @on_post_event("published", "revision_published", transactional=True)
    def reindex(event, ctx):
        SearchEntry.objects.update_or_create(post_id=event.post_id, ...)

The subscriber is a plugin job named ``<plugin>.<function name>`` whose runs deliver its
events (see :mod:`outbox.delivering`): each (event, subscriber) pair has a row in the
delivery ledger. ``transactional=True`` runs each event's writes in the transaction that
records its delivery (exactly once); otherwise a delivery is claimed first (at most once per
attempt). A failed delivery is tried again after ``retry_backoff``, ``retries`` times
(default 8: from 30 s, doubling up to an hour), then given up with an alert. Pausing the
job (or disabling its plugin) holds its deliveries until it resumes; ``max_duration`` and
``run_on`` work as for any plugin job. See ``docs/plugins.md``, "Publish events".
"""

from collections.abc import Callable
from datetime import timedelta

from coordination.registry import job_error
from coordination.registry import registry as default_registry
from coordination.schedules import WhenDue
from outbox.subscriptions import DEFAULT_RETRIES, InvalidSubscription, Subscription
from plugins.declarations import declare, make_plugin_job

#: The longest a subscriber's new events wait when no wake-up reaches its job.
SUBSCRIBER_FALLBACK = timedelta(seconds=60)


def on_post_event(
    *kinds: str, name: str | None = None, plugin: str | None = None, registry=None, **options
):
    """Declare the decorated ``func(event, ctx)`` a subscriber to publish events of ``kinds``.

    The function is returned unchanged; its job is ``func.job``.
    """
    registry = registry or default_registry
    options.setdefault("retries", DEFAULT_RETRIES)

    def decorator(func: Callable) -> Callable:
        def build():
            try:
                subscription = Subscription(func, kinds)
            except InvalidSubscription as exc:
                raise job_error(getattr(func, "__name__", repr(func)), exc) from None
            return make_plugin_job(
                subscription,
                schedule=WhenDue(fallback=SUBSCRIBER_FALLBACK),
                name=name,
                plugin=plugin,
                **options,
            )

        return declare(func, build, registry=registry)

    return decorator
