"""The delivery ledger: one row per (publish event, subscriber), unique.

The row is the pair's ledger entry. A transactional subscriber's run marks its rows
succeeded in the transaction of its writes (so each pair commits once); a claim-first one
marks them ``running`` with its run first, then records each outcome. ``delivery_id`` stays
the same across attempts: a receiver that sees a retry of something it handled tells by it.
"""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class Delivery(models.Model):
    """One publish event for one subscriber, and where its delivery is."""

    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting")
        RUNNING = "running", _("Being delivered")
        SUCCEEDED = "succeeded", _("Delivered")
        FAILED = "failed", _("Gave up")

    # No database constraint: events are history and outlive nothing, but a delivery row is
    # written in bulk by the dispatcher, and the check would cost a lookup per row.
    event = models.ForeignKey(
        "publishing.PublishEvent",
        verbose_name=_("event"),
        on_delete=models.CASCADE,
        related_name="deliveries",
        db_constraint=False,
    )
    #: The subscriber's job name (``<plugin>.<name>``).
    subscriber = models.CharField(_("subscriber"), max_length=200)
    #: The post the event is about (kept when the post is deleted): the unit of ordering.
    post_id = models.BigIntegerField(_("post id"), null=True, blank=True)
    kind = models.CharField(_("event"), max_length=20)
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.PENDING
    )
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    #: When the next attempt may start (a failed attempt moves it on by the back-off).
    due_at = models.DateTimeField(_("due at"), db_default=Now())
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    #: Set when the delivery succeeded or was given up: open deliveries have none.
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    #: The run of a claim-first subscriber that holds the delivery while it is running. Not
    #: a constraint, nor cleared when the ledger's retention deletes runs: a run that is
    #: gone is over, as one that ended is.
    run = models.ForeignKey(
        "coordination.JobRun",
        verbose_name=_("run"),
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_constraint=False,
    )
    delivery_id = models.UUIDField(_("delivery id"), default=uuid.uuid4, unique=True)
    last_error = models.TextField(_("last error"), blank=True)

    class Meta:
        verbose_name = _("delivery")
        verbose_name_plural = _("deliveries")
        constraints = [
            models.UniqueConstraint(fields=["subscriber", "event"], name="outbox_delivery_once"),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "running", "succeeded", "failed"]),
                name="outbox_delivery_status_valid",
            ),
        ]
        indexes = [
            # A subscriber's open deliveries (no ``finished_at`` yet) in event order: its
            # job's one range scan.
            models.Index(
                fields=["subscriber", "finished_at", "event"], name="outbox_delivery_open"
            ),
            models.Index(fields=["post_id", "event"], name="outbox_delivery_post"),
            # Retention's range scan over finished deliveries.
            models.Index(fields=["finished_at"], name="outbox_delivery_finished"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} event {self.event_id} for {self.subscriber}: {self.status}"


class WebhookEndpoint(models.Model):
    """An operator's HTTP endpoint told about publish events (signed POSTs, retried)."""

    name = models.CharField(_("name"), max_length=100)
    url = models.URLField(
        _("URL"),
        max_length=500,
        help_text=_("Where deliveries are POSTed. https:// unless the operator allows http://."),
    )
    events = models.JSONField(
        _("events"), default=list, help_text=_("The publish events this endpoint is sent.")
    )
    #: ``whsec_`` and base64 (Standard Webhooks); shown to people once, then masked.
    secret = models.CharField(
        _("secret"),
        max_length=200,
        help_text=_("Signs every delivery (the webhook-signature header); keep it private."),
    )
    #: The secret before the last rotation: deliveries are signed with it too until
    #: ``previous_secret_until``, so receivers can move to the new one at their own pace.
    previous_secret = models.CharField(
        _("previous secret"), max_length=200, blank=True, editable=False
    )
    previous_secret_until = models.DateTimeField(
        _("previous secret signs until"), null=True, blank=True, editable=False
    )
    active = models.BooleanField(_("active"), default=True)
    created_at = models.DateTimeField(_("created at"), db_default=Now())
    disabled_at = models.DateTimeField(_("disabled at"), null=True, blank=True, editable=False)
    disabled_reason = models.TextField(_("why it was disabled"), blank=True, editable=False)
    #: The lane sending this endpoint's deliveries holds it until ``lane_until`` (database
    #: clock), renewing as it goes: one lane per endpoint across the cluster, and a lane
    #: lost with its process frees the endpoint when its lease runs out.
    lane_token = models.UUIDField(_("lane"), null=True, blank=True, editable=False)
    lane_until = models.DateTimeField(_("lane held until"), null=True, blank=True, editable=False)
    #: Its health, kept as attempts are recorded (:mod:`outbox.webhooks.health`).
    last_attempt_at = models.DateTimeField(_("last attempt"), null=True, blank=True, editable=False)
    last_success_at = models.DateTimeField(_("last success"), null=True, blank=True, editable=False)
    #: The first failed attempt since the last success (None while the last one succeeded).
    failing_since = models.DateTimeField(_("failing since"), null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("webhook endpoint")
        verbose_name_plural = _("webhook endpoints")
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def ledger_name(self) -> str:
        """The name its deliveries carry in the delivery ledger."""
        return webhook_ledger_name(self.pk)


#: The prefix of webhook endpoints' names in the delivery ledger.
WEBHOOK_PREFIX = "webhook:"


def webhook_ledger_name(endpoint_id: int) -> str:
    """Return the delivery ledger's name for endpoint ``endpoint_id``."""
    return f"{WEBHOOK_PREFIX}{endpoint_id}"


def is_webhook(ledger_name: str) -> bool:
    """Return True if a name in the delivery ledger is a webhook endpoint's."""
    return ledger_name.startswith(WEBHOOK_PREFIX)


class WebhookAttempt(models.Model):
    """One HTTP attempt of a webhook delivery: what was answered, or why nothing was."""

    delivery = models.ForeignKey(
        Delivery,
        verbose_name=_("delivery"),
        on_delete=models.CASCADE,
        related_name="webhook_attempts",
    )
    endpoint = models.ForeignKey(
        WebhookEndpoint,
        verbose_name=_("endpoint"),
        on_delete=models.CASCADE,
        related_name="webhook_attempts",
    )
    at = models.DateTimeField(_("at"), db_default=Now())
    ok = models.BooleanField(_("succeeded"))
    status_code = models.PositiveSmallIntegerField(_("response code"), null=True, blank=True)
    duration = models.FloatField(_("duration (s)"))
    response_head = models.TextField(_("response (first bytes)"), blank=True)
    error = models.TextField(_("error"), blank=True)
    #: What was sent: the body, and the headers with the signatures redacted.
    request_body = models.TextField(_("payload"), blank=True)
    request_headers = models.JSONField(_("headers sent"), default=dict, blank=True)

    class Meta:
        verbose_name = _("webhook attempt")
        verbose_name_plural = _("webhook attempts")
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["endpoint", "-at"], name="outbox_attempt_endpoint"),
            # Retention's range scan.
            models.Index(fields=["at"], name="outbox_attempt_at"),
        ]

    def __str__(self) -> str:
        return f"{self.endpoint}: {self.status_code or self.error}"


class Watch(models.Model):
    """An editor emailed about a post they did not write, as its author is (its watcher)."""

    post = models.ForeignKey(
        "publishing.Post", verbose_name=_("post"), on_delete=models.CASCADE, related_name="watches"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("editor"),
        on_delete=models.CASCADE,
        related_name="watches",
    )
    created_at = models.DateTimeField(_("watching since"), db_default=Now())

    class Meta:
        verbose_name = _("watcher")
        verbose_name_plural = _("watchers")
        constraints = [models.UniqueConstraint(fields=["post", "user"], name="outbox_watch_once")]

    def __str__(self) -> str:
        return f"{self.user} watches post {self.post_id}"


class Told(models.Model):
    """One person emailed about one publish event.

    The notifications' delivery is one per event, with several people to tell: each one told
    is recorded as soon as their email is sent, so a delivery tried again after a failure
    emails only those not told yet.
    """

    event = models.ForeignKey(
        "publishing.PublishEvent",
        verbose_name=_("event"),
        on_delete=models.CASCADE,
        related_name="told",
        db_constraint=False,
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("editor"), on_delete=models.CASCADE
    )
    at = models.DateTimeField(_("at"), db_default=Now())

    class Meta:
        verbose_name = _("person told")
        verbose_name_plural = _("people told")
        constraints = [models.UniqueConstraint(fields=["event", "user"], name="outbox_told_once")]
        # Retention's range scan.
        indexes = [models.Index(fields=["at"], name="outbox_told_at")]

    def __str__(self) -> str:
        return f"{self.user} told of event {self.event_id}"
