"""Reviews: a post, a revision or a release submitted for approval before it may go live.

Only with ``INSTATIC_REQUIRE_REVIEW`` on (:mod:`reviews.actions`). A review approves one
exact content: its ``snapshot`` keeps what was submitted (a post's title, slug and body, a
revision's title and body, each release item's change and text), which is what the reviewer
reads, and its ``fingerprint`` (:mod:`reviews.rules`) names it. Anything changed
after the approval has another fingerprint, so it needs a review again.

The table keeps the name it had when reviews were part of publishing (``publishing_review``):
the app's first migration only moved the model, not its rows.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class ReviewStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for review")
    APPROVED = "approved", _("Approved")
    REJECTED = "rejected", _("Rejected")
    WITHDRAWN = "withdrawn", _("Replaced by a newer submission")


class ReviewTarget(models.TextChoices):
    POST = "post", _("Post")
    REVISION = "revision", _("Revision")
    RELEASE = "release", _("Release")


class Review(models.Model):
    """One submission for review of one exact content, and the reviewer's decision."""

    Status = ReviewStatus
    Target = ReviewTarget

    target = models.CharField(_("what"), max_length=20, choices=Target.choices)
    post = models.ForeignKey(
        "publishing.Post",
        verbose_name=_("post"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="reviews",
    )
    revision = models.ForeignKey(
        "publishing.PostRevision",
        verbose_name=_("revision"),
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="reviews",
    )
    # The release reviewed, by id: releases are an app of their own that may not be
    # installed, so there is no foreign key to them; the releases app deletes a release's
    # reviews with it.
    release_id = models.BigIntegerField(_("release"), null=True, blank=True, db_index=True)
    title = models.CharField(_("title"), max_length=200)
    fingerprint = models.CharField(_("content fingerprint"), max_length=64, editable=False)
    # What was submitted, exactly: the reviewer reads this, never the content as it is now.
    # Empty only for reviews submitted before copies were kept.
    snapshot = models.JSONField(_("content submitted"), default=dict, editable=False)
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.PENDING
    )
    note = models.TextField(_("note to the reviewer"), blank=True)
    # Why Instatic submitted it again by itself (a change after the approval): never shown as
    # a person's note.
    reason = models.CharField(_("submitted again because"), max_length=300, blank=True)
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("submitted by"),
        null=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    submitted_at = models.DateTimeField(_("submitted at"), db_default=Now())
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("decided by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)
    comment = models.TextField(_("reviewer's comment"), blank=True)

    class Meta:
        db_table = "publishing_review"
        verbose_name = _("review")
        verbose_name_plural = _("reviews")
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["status", "-submitted_at"], name="reviews_review_queue"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ReviewStatus.values),
                name="reviews_review_status_valid",
            ),
            models.CheckConstraint(
                condition=(Q(target="post") & Q(post__isnull=False))
                | (Q(target="revision") & Q(revision__isnull=False) & Q(post__isnull=False))
                | (Q(target="release") & Q(release_id__isnull=False)),
                name="reviews_review_has_its_target",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_target_display()} “{self.title}”"
