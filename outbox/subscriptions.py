"""Subscribers as the engine sees them: a job whose function is a :class:`Subscription`.

A subscriber is declared with ``plugins.sdk.on_post_event``; its job runs
:func:`outbox.delivering.deliver_pending` for it. Finding subscribers through the job
registry (rather than a list of their own) keeps one source of truth: a job registered in a
test's ``registry.temporary()`` is a subscriber there and nowhere else.
"""

import functools
from collections.abc import Callable, Iterable
from typing import Any

from coordination.registry import Job, JobContext, JobRegistry
from coordination.registry import registry as default_registry
from outbox.events import PostEvent
from publishing.public_events import OUTBOX_KINDS

#: How many more times a failed delivery is tried, unless the subscriber says otherwise.
DEFAULT_RETRIES = 8

#: What a subscriber's function is called with.
Handler = Callable[[PostEvent, JobContext], Any]


class InvalidSubscription(ValueError):
    """A subscription Instatic cannot accept; the message says how to fix it."""


class Subscription:
    """A subscriber's function and the event kinds it wants; called as its job's function."""

    def __init__(
        self,
        handler: Handler,
        kinds: Iterable[str],
        *,
        audience: Callable[[set[int]], Iterable[int]] | None = None,
        atomic: bool = True,
    ):
        kinds = tuple(kinds)
        unknown = sorted(set(kinds) - set(OUTBOX_KINDS))
        if not kinds or unknown:
            raise InvalidSubscription(
                f"{', '.join(map(repr, unknown)) or 'no event'} is not an event to subscribe "
                f"to; name one or more of {', '.join(OUTBOX_KINDS)}."
            )
        if not callable(handler):
            raise InvalidSubscription(f"{handler!r} is not callable.")
        self.handler = handler
        self.kinds = frozenset(kinds)
        #: Given the posts of a batch of events, returns the ones this subscriber is told
        #: about (``None``: all of them); asked by the dispatcher, once per batch.
        self.audience = audience
        #: Call the handler in a transaction of its own (a savepoint in a transactional
        #: run), so a failure undoes its writes. ``False`` for a handler that records each
        #: step as it goes, each write committed at once (a claim-first one).
        self.atomic = atomic
        functools.update_wrapper(self, handler)

    def __call__(self, ctx: JobContext):
        from outbox.delivering import deliver_pending

        return deliver_pending(self, ctx)

    def wants(self, kind: str) -> bool:
        """Return True if this subscriber is told about events of ``kind``."""
        return kind in self.kinds


def subscriber_jobs(registry: JobRegistry = default_registry) -> list[Job]:
    """Return the registered subscribers' jobs, by name."""
    return sorted(
        (job for job in registry.all() if isinstance(job.func, Subscription)),
        key=lambda job: job.name,
    )
