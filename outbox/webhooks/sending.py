"""Sending an endpoint's deliveries: the body, the signature, the attempt's record, retries.

Each delivery is one HTTP POST of a JSON body with the headers of
:mod:`outbox.webhooks.signing` (the delivery id, a timestamp, and an HMAC-SHA256 signature
over both and the body). Every attempt is recorded (:class:`~outbox.models.WebhookAttempt`),
answered or not. A failed one is tried again from 30 s later
(``INSTATIC_WEBHOOK_RETRY_BACKOFF``), doubling up to an hour, for
``INSTATIC_WEBHOOK_RETRY_FOR`` (a day); then the delivery is given up and the endpoint
disabled, with an alert, so a dead endpoint stops costing attempts until an operator looks.

HTTP is at least once: a receiver can always see a retry of a request it handled (the
response was lost, or the node died before recording it); the delivery id, the same on
every attempt, is how it tells.
"""

import json
import logging
from datetime import datetime, timedelta

from django.conf import settings as django_settings
from django.db.models import Subquery
from django.db.models.functions import Now

from coordination.alerts import Kind as AlertKind
from coordination.alerts import raise_alert
from coordination.clock import database_now
from coordination.job_options import MAX_RETRIES, JobOptions
from outbox.conf import settings
from outbox.delivering import DeliveryRefused, Open, Subscriber
from outbox.events import PostEvent
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from outbox.webhooks import client, signing

logger = logging.getLogger(__name__)


def backoff() -> JobOptions:
    """Return the back-off of a failed attempt: ``INSTATIC_WEBHOOK_RETRY_BACKOFF`` (30 s),
    doubling, at most an hour (capped by the retry window)."""
    first = timedelta(seconds=float(settings.WEBHOOK_RETRY_BACKOFF))
    return JobOptions(retries=MAX_RETRIES, retry_backoff=first)


#: Failed attempts in a row after which an endpoint's batch ends for this run: a dead
#: endpoint costs a few timeouts, and the other endpoints' deliveries go on.
STOP_AFTER_FAILURES = 3


def body(event: PostEvent) -> bytes:
    """Return the JSON body of ``event``'s delivery (compact, keys sorted)."""
    from publishing.models import Post

    post = None
    if event.post_id is not None:
        post = Post.objects.filter(pk=event.post_id).values("title", "slug").first()
    document = {
        "delivery_id": event.delivery_id,
        "event_id": event.id,
        "event": event.kind,
        "at": event.at.isoformat(),
        "post_id": event.post_id,
        "post": post,
        "version": event.version,
        "by": event.by,
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def retry_at(row: Open, attempt: int, now: datetime) -> datetime | None:
    """When a failed attempt is tried again, or None once the retry window has passed."""
    window_ends = (row.created_at or now) + timedelta(seconds=float(settings.WEBHOOK_RETRY_FOR))
    if now >= window_ends:
        return None
    return min(backoff().retry_at(attempt, now) or window_ends, window_ends)


def allow_http() -> bool:
    """Plain http:// endpoints are allowed by the setting, or with DEBUG (for loopback)."""
    return bool(settings.WEBHOOK_ALLOW_HTTP or django_settings.DEBUG)


def allow_private() -> bool:
    return bool(settings.WEBHOOK_ALLOW_PRIVATE)


def subscriber_for(endpoint: WebhookEndpoint) -> Subscriber:
    """Return how ``endpoint``'s deliveries are made (claim first: HTTP is not transactional)."""

    def send(event: PostEvent, ctx) -> None:
        payload = body(event)
        timestamp = int(database_now().timestamp())
        headers = signing.headers(endpoint.secret, event.delivery_id, timestamp, payload)
        attempt = client.send(
            endpoint.url,
            payload,
            headers,
            allow_private=allow_private(),
            allow_http=allow_http(),
            timeout=client.Timeouts(
                connect=float(settings.WEBHOOK_CONNECT_TIMEOUT),
                read=float(settings.WEBHOOK_READ_TIMEOUT),
            ),
        )
        record_attempt(endpoint, event.delivery_id, attempt)
        if not attempt.ok:
            raise DeliveryRefused(attempt.error or f"the endpoint answered {attempt.status_code}")

    def give_up(row: Open, attempts: int, error: str) -> None:
        disable(endpoint, f"a delivery kept failing for {_window()} ({attempts} attempts): {error}")

    return Subscriber(
        name=endpoint.ledger_name,
        handler=send,
        transactional=False,
        retry_at=retry_at,
        give_up=give_up,
        savepoint=False,
        stop_after_failures=STOP_AFTER_FAILURES,
    )


def record_attempt(endpoint: WebhookEndpoint, delivery_id: str, attempt) -> None:
    """Record one attempt of the delivery ``delivery_id`` (one ``INSERT``, the delivery's row
    found by its id in it)."""
    WebhookAttempt.objects.create(
        delivery_id=Subquery(Delivery.objects.filter(delivery_id=delivery_id).values("pk")[:1]),
        endpoint=endpoint,
        ok=attempt.ok,
        status_code=attempt.status_code,
        duration=attempt.duration,
        response_head=attempt.response_head,
        error=attempt.error,
    )


def disable(endpoint: WebhookEndpoint, reason: str) -> None:
    """Disable ``endpoint`` (its open deliveries wait) and alert the operators."""
    WebhookEndpoint.objects.filter(pk=endpoint.pk, active=True).update(
        active=False, disabled_at=Now(), disabled_reason=reason[:2000]
    )
    logger.error("webhook endpoint %s (%s) disabled: %s", endpoint.name, endpoint.url, reason)
    raise_alert(
        AlertKind.JOB_FAILING,
        f"webhook {endpoint.name}"[:200],
        f"Webhook endpoint {endpoint.name} ({endpoint.url}) was disabled: {reason}\n\n"
        "Fix the endpoint, then make it active again in the admin; its waiting deliveries "
        "are sent then.",
    )


def _window() -> str:
    from coordination.wording import duration_text

    return duration_text(float(settings.WEBHOOK_RETRY_FOR))
