"""Releases: several changes of posts that go live together, at one instant, or not at all.

A release holds items, each one change of one post: publish a draft (or unpublished) post,
put a live post's pending revision live, or take a live post down. Each item pins the post's
``version`` (and, for a revision, the revision) it was added with, so what goes out is what
the editor reviewed: a later edit of the post makes the item *changed*, which stops the
release until an editor refreshes or removes the item (:mod:`releases.actions`).

The tables keep the names they had when releases were part of publishing (``publishing_release``,
``publishing_releaseitem``, ``publishing_releaseevent``): the app's first migration only moved
the models, not their rows.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _


class ReleaseStatus(models.TextChoices):
    """Where a release is: being put together, waiting for its time, gone out, or called off."""

    DRAFT = "draft", _("Draft")
    SCHEDULED = "scheduled", _("Scheduled")
    RELEASED = "released", _("Released")
    CANCELLED = "cancelled", _("Cancelled")


class ItemAction(models.TextChoices):
    """What a release does to one post."""

    PUBLISH = "publish", _("Publish the post")
    REVISION = "revision", _("Put its new revision live")
    UNPUBLISH = "unpublish", _("Take the post down")


class Release(models.Model):
    """A named set of post changes that the publish job applies in one transaction, at its time.

    ``problem`` says why a scheduled release is stopped (an item can no longer apply); the
    publish job skips it until an editor resolves the item, which clears it.
    """

    Status = ReleaseStatus

    name = models.CharField(_("name"), max_length=200)
    release_at = models.DateTimeField(
        _("release at"),
        null=True,
        blank=True,
        help_text=_("When every item of the release goes live together."),
    )
    status = models.CharField(
        _("status"),
        max_length=20,
        choices=Status.choices,
        default=Status.DRAFT,
        editable=False,
    )
    problem = models.TextField(
        _("problem"),
        blank=True,
        default="",
        editable=False,
        help_text=_("Why the release is stopped; cleared when its items are resolved."),
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("owner"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="releases",
        editable=False,
    )
    released_at = models.DateTimeField(
        _("went live at"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When the release actually went live (database clock)."),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now(), editable=False)
    updated_at = models.DateTimeField(_("updated at"), db_default=Now(), editable=False)
    updated_by = models.CharField(_("updated by"), max_length=200, blank=True, editable=False)
    # The optimistic-concurrency token, as on posts: every change adds one, and a form saved
    # against an older version is refused instead of undoing a colleague's change.
    version = models.PositiveIntegerField(_("version"), default=1, editable=False)

    class Meta:
        db_table = "publishing_release"
        verbose_name = _("release")
        verbose_name_plural = _("releases")
        ordering = ["-created_at", "-id"]
        indexes = [
            # The publish job's "which releases are due" and "when is the next one".
            models.Index(fields=["status", "release_at"], name="publishing_release_due"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ReleaseStatus.values),
                name="publishing_release_status_valid",
                violation_error_message=_("Unknown release status."),
            ),
            models.CheckConstraint(
                condition=~Q(status=ReleaseStatus.SCHEDULED) | Q(release_at__isnull=False),
                name="publishing_release_scheduled_has_time",
                violation_error_message=_("A scheduled release needs a time."),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_pending(self) -> bool:
        """Return True while the release can still go out (draft or scheduled)."""
        return self.status in (ReleaseStatus.DRAFT, ReleaseStatus.SCHEDULED)


class ReleaseItem(models.Model):
    """One post's change in a release, pinned to the version it was added with.

    The post may be deleted meanwhile: the item keeps its title, and the release stops.
    """

    Action = ItemAction

    release = models.ForeignKey(
        Release, verbose_name=_("release"), on_delete=models.CASCADE, related_name="items"
    )
    post = models.ForeignKey(
        "publishing.Post",
        verbose_name=_("post"),
        null=True,
        on_delete=models.SET_NULL,
        related_name="release_items",
    )
    post_title = models.CharField(_("post title"), max_length=200, blank=True)
    action = models.CharField(_("change"), max_length=20, choices=Action.choices)
    revision = models.ForeignKey(
        "publishing.PostRevision",
        verbose_name=_("revision"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    # The post's version when the item was added (or last refreshed): the item applies only
    # to exactly that version.
    pinned_version = models.PositiveIntegerField(_("pinned version"))
    added_at = models.DateTimeField(_("added at"), db_default=Now(), editable=False)
    added_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("added by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )

    class Meta:
        db_table = "publishing_releaseitem"
        verbose_name = _("release item")
        verbose_name_plural = _("release items")
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["release", "post"], name="publishing_release_post"),
            models.CheckConstraint(
                condition=Q(action__in=ItemAction.values),
                name="publishing_release_item_action_valid",
                violation_error_message=_("Unknown release item change."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()}: {self.post_title}"


class ReleaseEventKind(models.TextChoices):
    """One step in a release's life, as its history names it."""

    CREATED = "created", _("Created")
    RENAMED = "renamed", _("Renamed")
    TIME_PLANNED = "time_planned", _("Time planned")
    ITEM_ADDED = "item_added", _("Post added")
    ITEM_REMOVED = "item_removed", _("Post removed")
    ITEM_REFRESHED = "item_refreshed", _("Post refreshed")
    SCHEDULED = "scheduled", _("Scheduled")
    UNSCHEDULED = "unscheduled", _("Unscheduled")
    SENT_TO_REVIEW = "sent_to_review", _("Back to review")
    STOPPED = "stopped", _("Stopped")
    READY = "ready", _("Ready again")
    RELEASED = "released", _("Released")
    CANCELLED = "cancelled", _("Cancelled")


class ReleaseEvent(models.Model):
    """One step of a release, written in the transaction that made it.

    ``data`` holds what happened as typed values (times as ISO 8601 in UTC), never a sentence:
    :mod:`releases.history` says it in the reader's zone.
    """

    Kind = ReleaseEventKind

    release = models.ForeignKey(
        Release, verbose_name=_("release"), on_delete=models.CASCADE, related_name="events"
    )
    kind = models.CharField(_("what happened"), max_length=30, choices=Kind.choices)
    at = models.DateTimeField(_("at"), db_default=Now())
    by = models.CharField(_("by"), max_length=200, blank=True)
    data = models.JSONField(_("data"), default=dict, blank=True)

    class Meta:
        db_table = "publishing_releaseevent"
        verbose_name = _("release event")
        verbose_name_plural = _("release history")
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["release", "-at"], name="publishing_release_event_at")]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.release_id})"
