"""An endpoint's health, as operators read it: last attempt, last success, failing since,
the success rate over the last day, and how many deliveries wait.

The first three are kept on the endpoint as attempts are recorded (:func:`fold`, pure, is
what each recording applies), so the endpoint list reads them without scanning attempts;
the day's rate and the waiting count are read for a page of endpoints in two grouped
queries (:func:`day_rates`, :func:`waiting`). :func:`state` is the words of the list's
status column.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.utils.translation import gettext as _

from outbox.models import Delivery, WebhookAttempt, webhook_ledger_name

#: The success rate is over this much of the latest attempts.
RATE_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class Kept:
    """What the endpoint keeps of its attempts."""

    last_attempt_at: datetime | None = None
    last_success_at: datetime | None = None
    failing_since: datetime | None = None


def fold(kept: Kept, attempts: Iterable[tuple[datetime, bool]]) -> Kept:
    """Return ``kept`` after the ``attempts`` (time, succeeded), in any order: a success
    ends a failing spell, and a spell starts at its first failure after the last success."""
    last_attempt, last_success, since = (
        kept.last_attempt_at,
        kept.last_success_at,
        kept.failing_since,
    )
    for at, ok in sorted(attempts, key=lambda pair: pair[0]):
        if last_attempt is not None and at < last_attempt:
            continue  # older than what is kept already (recorded late): changes nothing
        last_attempt = at
        if ok:
            last_success, since = at, None
        elif since is None:
            since = at
    return Kept(last_attempt, last_success, since)


def state(*, active: bool, disabled_reason: str, failing_since: datetime | None) -> str:
    """Return the endpoint's status as the list shows it."""
    if not active:
        return (
            _("Disabled: %(reason)s") % {"reason": disabled_reason}
            if disabled_reason
            else _("Disabled")
        )
    if failing_since is not None:
        return _("Failing")
    return _("Active")


def rate_text(succeeded: int, attempted: int) -> str:
    """Return the share of attempts that succeeded, for people (a dash with none)."""
    if not attempted:
        return "–"
    return f"{100 * succeeded / attempted:.0f}% of {attempted}"


def day_rates(endpoint_ids: list[int], *, now: datetime) -> dict[int, tuple[int, int]]:
    """Return (succeeded, attempted) over the last day for each endpoint that had attempts."""
    rows = (
        WebhookAttempt.objects.filter(endpoint_id__in=endpoint_ids, at__gte=now - RATE_WINDOW)
        .values("endpoint_id")
        .annotate(done=Count("id"), ok=Count("id", filter=Q(ok=True)))
        .values_list("endpoint_id", "ok", "done")
    )
    return {pk: (ok, done) for pk, ok, done in rows}


def waiting(endpoint_ids: list[int]) -> dict[int, int]:
    """Return the count of open deliveries of each endpoint that has some."""
    names = {webhook_ledger_name(pk): pk for pk in endpoint_ids}
    rows = (
        Delivery.objects.filter(subscriber__in=list(names), finished_at__isnull=True)
        .values("subscriber")
        .annotate(n=Count("id"))
        .values_list("subscriber", "n")
    )
    return {names[name]: n for name, n in rows}
