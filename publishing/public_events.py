"""Which publish events tell the world, and the signal that some were committed.

Publishing writes its events in the transaction of the change; this tells listeners (the
``outbox`` app wakes its dispatcher) once that transaction has committed, so nothing is
sent from inside it and a rolled-back change tells nobody. The signal only hurries
delivery: the dispatcher also looks for undispatched events on its own, so a process that
dies between the commit and the signal loses nothing.
"""

import logging

from django.db import transaction
from django.dispatch import Signal

logger = logging.getLogger(__name__)

#: The events of changes the public sees, and of publishing failures (a publish that failed,
#: a scheduled post late past ``INSTATIC_LATE_ALERT_AFTER``): what subscribers and webhooks
#: are told about (a ``deleted`` event only when the post was live).
OUTBOX_KINDS = ("published", "unpublished", "revision_published", "deleted", "failed", "late")

#: Sent with no arguments after a transaction that wrote outbox events committed.
events_committed = Signal()


def announce_events() -> None:
    """Send :data:`events_committed` when the current transaction commits (at once outside one).

    A failing receiver is logged by Django (``robust=True``) and never undoes the change.
    """
    transaction.on_commit(_send, robust=True)


def _send() -> None:
    events_committed.send_robust(sender=None)
