"""Who leads each group now (``Leadership``) and who led when (``LeadershipTerm``).

A node opens a term when it takes a group's lock and closes it with the reason leadership
ended: a clean shutdown, a lost lock, its loop crashing, or a follower fencing it. A term
nobody closed is closed by the next leader at takeover: ``shutdown`` if the old node's row says
it stopped, else ``crashed``; an old leader that is in fact alive and notices it lost its lock
corrects that to ``lock lost`` (or ``lease expired``). Every write here is best effort for the
history, never for the lock: the lock alone decides who leads.
"""

import logging

from django.db import transaction
from django.db.models import Q
from django.db.models.functions import Coalesce, Now

from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.models import Leadership, LeadershipTerm, Node

logger = logging.getLogger(__name__)

EndReason = LeadershipTerm.EndReason


def begin(group: str, *, node: str, instance: str, key: int, session_id: int | None) -> None:
    """Record ``node`` as the leader of ``group`` and open its term (closing any left open)."""
    with transaction.atomic():
        for term in LeadershipTerm.objects.select_for_update().filter(
            group=group, ended_at__isnull=True
        ):
            reason, detail = _inferred_end(term)
            _close(term.pk, reason, detail)
        Leadership.objects.update_or_create(
            group=group,
            defaults={
                "node": node,
                "instance": instance,
                "key": key,
                "since": Now(),
                "session_id": session_id,
            },
        )
        LeadershipTerm.objects.create(group=group, node=node, instance=instance, started_at=Now())


def end(group: str, *, instance: str, reason: str, detail: str = "") -> None:
    """Close ``instance``'s latest term of ``group`` with ``reason``; it leads no more.

    Also corrects a term the next leader already closed as ``crashed``: this node is alive to
    say why it stopped leading. A database error is logged, not raised (the history is best
    effort; the database may be what just failed).
    """
    try:
        _end(group, instance=instance, reason=reason, detail=detail)
    except DATABASE_ERRORS as exc:
        logger.debug("could not close the %s leadership term of %s: %s", group, instance, exc)


def _end(group: str, *, instance: str, reason: str, detail: str = "") -> None:
    # It no longer leads: a row naming a live node that does not hold the lock would keep
    # followers from asking the server who does (liveness: a frozen waiter granted the lock).
    Leadership.objects.filter(group=group, instance=instance).delete()
    latest = (
        LeadershipTerm.objects.filter(group=group, instance=instance)
        .order_by("-started_at", "-id")
        .values_list("pk", flat=True)[:1]
    )
    LeadershipTerm.objects.filter(
        Q(ended_at__isnull=True) | Q(end_reason=EndReason.CRASHED), pk__in=list(latest)
    ).update(ended_at=Coalesce("ended_at", Now()), end_reason=reason, detail=detail[:255])


def step_down(group: str, *, instance: str) -> None:
    """A clean release at shutdown: no current leader until a follower takes the lock."""
    with transaction.atomic():
        _end(group, instance=instance, reason=EndReason.SHUTDOWN)


def _close(pk: int, reason: str, detail: str) -> None:
    LeadershipTerm.objects.filter(pk=pk).update(
        ended_at=Now(), end_reason=reason, detail=detail[:255]
    )


def _inferred_end(term: LeadershipTerm) -> tuple[str, str]:
    """Why a term nobody closed ended, judged from its node's row at takeover."""
    node = Node.objects.filter(name=term.node).annotate(db_now=Now()).first()
    if node is None or node.instance != term.instance:
        return EndReason.CRASHED, "its process was replaced without a clean shutdown"
    if node.stopped_at is not None:
        return EndReason.SHUTDOWN, ""
    silent = (node.db_now - node.last_heartbeat).total_seconds()
    return (
        EndReason.CRASHED,
        f"the lock was freed without a clean shutdown (heartbeat {silent:.1f}s ago)",
    )


def lost_reason() -> str:
    """Why this node's leadership ended when it finds its lock gone."""
    if settings.LOCK_MODE == "transaction":
        return EndReason.LEASE_EXPIRED
    return EndReason.LOCK_LOST
