"""Sending an endpoint's deliveries: the body, the signatures, the attempt's record, retries.

Each delivery is one HTTP POST of a JSON body with the Standard Webhooks headers of
:mod:`outbox.webhooks.signing` (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``).
Every attempt is recorded (:class:`~outbox.models.WebhookAttempt`), answered or not, with
what was sent (the signatures redacted). What a failure leads to is decided by
:func:`outbox.webhooks.retries.after_failure`: tried again after a back-off with jitter (or
the ``Retry-After`` of a 429 or 503), for ``INSTATIC_WEBHOOK_RETRY_FOR`` (a day); then the
delivery is given up and the endpoint disabled, with an alert. A 410 answer or a refusal by
the address rules disables the endpoint at once, its deliveries waiting for it.

HTTP is at least once: a receiver can always see a retry of a request it handled (the
response was lost, or the node died before recording it); the delivery id, the same on
every attempt, is how it tells.
"""

import json
import logging
import random
import time
from dataclasses import asdict
from datetime import datetime, timedelta

from django.conf import settings as django_settings
from django.db.models.functions import Now

from coordination.alerts import Kind as AlertKind
from coordination.alerts import raise_alert
from coordination.clock import database_now
from coordination.priorities import Priority
from outbox.conf import settings
from outbox.delivering import DeliveryRefused, Open, Subscriber
from outbox.events import PostEvent
from outbox.models import Delivery, WebhookAttempt, WebhookEndpoint
from outbox.webhooks import client, health, retries, secrets, signing

logger = logging.getLogger(__name__)


#: Failed attempts in a row after which an endpoint's batch ends for this run: a dead
#: endpoint costs a few timeouts, and the other endpoints' deliveries go on.
STOP_AFTER_FAILURES = 3


#: Successes (and the attempts beside them) recorded together: see Subscriber.record_every.
RECORD_EVERY = 50


def posts_of(events: list[PostEvent]) -> dict[int, dict]:
    """Return the title and slug of the events' posts, by id (deleted posts are missing)."""
    from publishing.models import Post

    ids = {event.post_id for event in events if event.post_id is not None}
    return {
        row.pop("pk"): row for row in Post.objects.filter(pk__in=ids).values("pk", "title", "slug")
    }


def body(event: PostEvent, post: dict | None) -> bytes:
    """Return the JSON body of ``event``'s delivery (compact, keys sorted); ``post`` is its
    post's title and slug (``None`` once it is deleted)."""
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


class AttemptFailed(DeliveryRefused):
    """A webhook attempt that was not answered 2xx; ``attempt`` is what it found."""

    def __init__(self, attempt: client.Attempt):
        super().__init__(attempt.error or f"the endpoint answered {attempt.status_code}")
        self.attempt = attempt


def verdict(row: Open, attempt: int, now: datetime, exc: Exception | None) -> retries.Verdict:
    """Return what follows failed attempt ``attempt`` of ``row`` (``exc`` None: the attempt
    was lost with its node)."""
    found = exc.attempt if isinstance(exc, AttemptFailed) else None
    window_ends = (row.created_at or now) + timedelta(seconds=float(settings.WEBHOOK_RETRY_FOR))
    return retries.after_failure(
        status=found.status_code if found else None,
        retry_after=found.retry_after if found else "",
        refused=found.refused if found else False,
        error=str(exc or ""),
        attempt=attempt,
        now=now,
        window_ends=window_ends,
        first_backoff=timedelta(seconds=float(settings.WEBHOOK_RETRY_BACKOFF)),
        jitter=random.random(),
    )


def retry_at(row: Open, attempt: int, now: datetime, exc: Exception | None) -> datetime | None:
    """When a failed attempt is tried again, or None once the retry window has passed."""
    return verdict(row, attempt, now, exc).retry_at


def allow_http() -> bool | str:
    """Plain http:// endpoints: allowed by the setting; with DEBUG only to loopback
    (``"loopback"``); otherwise not."""
    if settings.WEBHOOK_ALLOW_HTTP:
        return True
    return "loopback" if django_settings.DEBUG else False


def allow_private() -> bool:
    return bool(settings.WEBHOOK_ALLOW_PRIVATE)


def timeouts() -> client.Timeouts:
    """Return the attempts' timeouts, from the settings."""
    return client.Timeouts(
        connect=float(settings.WEBHOOK_CONNECT_TIMEOUT),
        read=float(settings.WEBHOOK_READ_TIMEOUT),
        total=float(settings.WEBHOOK_ATTEMPT_DEADLINE),
    )


def subscriber_for(endpoint: WebhookEndpoint, *, lane=None) -> Subscriber:
    """Return how ``endpoint``'s deliveries are made (claim first: HTTP is not transactional).

    A batch's posts and delivery rows are read once, before it is sent; its attempts are
    written with its successes, :data:`RECORD_EVERY` at a time. With a ``lane``
    (:mod:`outbox.webhooks.lanes`) the endpoint's rows are the lane's alone, and the lane's
    hold is renewed as outcomes come.
    """
    posts: dict[int, dict] = {}
    delivery_pks: dict[str, int] = {}
    attempts: list[WebhookAttempt] = []
    clock = {}

    def prepare(events: list[PostEvent]) -> None:
        # Attempts are written later, so each keeps its own time: the database's clock at
        # the batch's start, moved on by this process's monotonic clock.
        clock.update(database=database_now(), monotonic=time.monotonic())
        posts.clear()
        posts.update(posts_of(events))
        delivery_pks.clear()
        rows = Delivery.objects.filter(delivery_id__in=[e.delivery_id for e in events])
        delivery_pks.update((str(uid), pk) for uid, pk in rows.values_list("delivery_id", "pk"))

    def flush(settled: set[int]) -> None:
        # Only the attempts of the deliveries whose outcomes are being recorded: a success
        # the run has not taken yet is written with its success (or, if the node dies first,
        # not at all, and the delivery is sent again and recorded once). The sending threads
        # may add attempts meanwhile: they are kept for a later flush.
        written = [row for row in attempts[:] if row.delivery_id in settled]
        WebhookAttempt.objects.bulk_create(written)
        if written:
            keep_health(endpoint.pk, [(row.at, row.ok) for row in written])
        for row in written:
            attempts.remove(row)

    def send(event: PostEvent, ctx) -> None:
        # On a thread of its own (Subscriber.concurrency): no database here.
        at = clock["database"] + timedelta(seconds=time.monotonic() - clock["monotonic"])
        payload = body(event, posts.get(event.post_id))
        timestamp = int(at.timestamp())
        signers = secrets.signing_secrets(
            endpoint.secret, endpoint.previous_secret, endpoint.previous_secret_until, now=at
        )
        headers = signing.headers(signers, event.delivery_id, timestamp, payload)
        attempt = client.send(
            endpoint.url,
            payload,
            headers,
            allow_private=allow_private(),
            allow_http=allow_http(),
            timeout=timeouts(),
        )
        row = attempt_row(endpoint, delivery_pks[event.delivery_id], attempt, at=at)
        row.request_body = payload.decode("utf-8", errors="replace")
        row.request_headers = signing.redacted(headers)
        attempts.append(row)
        if not attempt.ok:
            raise AttemptFailed(attempt)

    def give_up(row: Open, attempts: int, error: str) -> None:
        disable(endpoint, f"a delivery kept failing for {_window()} ({attempts} attempts): {error}")

    def halt(exc: Exception) -> bool:
        # Decided without the clock: only the answer (410, a refusal) disables.
        if not isinstance(exc, AttemptFailed):
            return False
        found = exc.attempt
        if not (found.refused or found.status_code == 410):
            return False
        now = database_now()
        reason = verdict(Open(0, 0, None, "", 0, now, None, now), 1, now, exc).disable
        disable(endpoint, reason)
        return True

    return Subscriber(
        name=endpoint.ledger_name,
        handler=send,
        transactional=False,
        retry_at=retry_at,
        give_up=give_up,
        savepoint=False,
        stop_after_failures=STOP_AFTER_FAILURES,
        prepare=prepare,
        record_every=RECORD_EVERY,
        flush=flush,
        concurrency=client.CONNECTIONS_PER_ENDPOINT,
        halt=halt,
        owns_rows=lane is not None,
        heartbeat=lane.renew if lane is not None else None,
        priority=Priority.SIDE_EFFECTS,
    )


def attempt_row(
    endpoint: WebhookEndpoint, delivery_pk: int, attempt, *, at: datetime
) -> WebhookAttempt:
    """Return the record of one attempt, made ``at``, of the delivery ``delivery_pk``."""
    return WebhookAttempt(
        delivery_id=delivery_pk,
        at=at,
        endpoint=endpoint,
        ok=attempt.ok,
        status_code=attempt.status_code,
        duration=attempt.duration,
        response_head=attempt.response_head,
        error=attempt.error,
    )


def keep_health(endpoint_id: int, attempts: list[tuple[datetime, bool]]) -> None:
    """Fold recorded ``attempts`` into the endpoint's kept health (one lane writes it)."""
    fields = ["last_attempt_at", "last_success_at", "failing_since"]
    row = WebhookEndpoint.objects.filter(pk=endpoint_id).values(*fields).first()
    if row is None:
        return
    kept = health.fold(health.Kept(**row), attempts)
    WebhookEndpoint.objects.filter(pk=endpoint_id).update(**asdict(kept))


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
