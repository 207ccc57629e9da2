"""Posts and their publish history.

A post's life is ``draft -> scheduled -> published -> unpublished``; every change of that state
goes through :mod:`publishing.posts` (editors) or :mod:`publishing.batches` (the publish job),
which write a :class:`PublishEvent` for it. Times that say when something *happened*
(``published_at``, ``created_at``, ``updated_at``, event ``at``) come from the database clock,
never from an app server's clock.
"""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from publishing.slugs import IsURLSlug
from publishing.validation import validate_body_text, validate_title_text


class PostStatus(models.TextChoices):
    """Where a post is in its life; the actions move it, nothing else."""

    DRAFT = "draft", _("Draft")
    SCHEDULED = "scheduled", _("Scheduled")
    PUBLISHED = "published", _("Published")
    UNPUBLISHED = "unpublished", _("Unpublished")


class Post(models.Model):
    """A Markdown post that editors schedule and the publish job puts live."""

    Status = PostStatus

    title = models.CharField(_("title"), max_length=200, validators=[validate_title_text])
    slug = models.SlugField(
        _("slug"),
        max_length=200,
        unique=True,
        help_text=_("The post's address, /posts/this-slug/: letters, digits, - and _."),
    )
    body = models.TextField(
        _("body"),
        help_text=_("Markdown. Raw HTML is sanitized."),
        validators=[validate_body_text],
    )
    # Rendered once when the body is saved (publishing.rendering.render), never on a page view.
    body_html = models.TextField(
        _("body as HTML"), blank=True, default="", db_default="", editable=False
    )
    excerpt = models.TextField(_("excerpt"), blank=True, default="", db_default="", editable=False)
    status = models.CharField(
        _("status"),
        max_length=20,
        choices=Status.choices,
        default=Status.DRAFT,
        editable=False,
    )
    publish_at = models.DateTimeField(
        _("publish at"),
        null=True,
        blank=True,
        help_text=_("When the post goes live (a scheduled post needs one)."),
    )
    unpublish_at = models.DateTimeField(
        _("unpublish at"),
        null=True,
        blank=True,
        help_text=_("Optional: when the post is taken down again."),
    )
    published_at = models.DateTimeField(
        _("went live at"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When the post actually went live (database clock)."),
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("author"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="posts",
        editable=False,
    )
    last_error = models.TextField(
        _("publish error"),
        blank=True,
        editable=False,
        help_text=_("Why the last publish attempt failed; cleared when the post is edited."),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now(), editable=False)
    updated_at = models.DateTimeField(_("updated at"), db_default=Now(), editable=False)
    updated_by = models.CharField(
        _("updated by"),
        max_length=200,
        blank=True,
        editable=False,
        help_text=_("Who made the last change: an editor's username or the scheduler's node."),
    )
    # The optimistic-concurrency token: every write adds one (see publishing.actions), so a
    # form saved against an older version is refused instead of undoing a colleague's change.
    # Not updated_at: on PostgreSQL Now() is the transaction's start, which need not move.
    version = models.PositiveIntegerField(_("version"), default=1, editable=False)
    # Part of every preview link's signed payload (publishing.previews): adding one revokes
    # every link given out so far, and nothing else does.
    preview_generation = models.PositiveIntegerField(
        _("preview links generation"), default=0, db_default=0, editable=False
    )

    class Meta:
        verbose_name = _("post")
        verbose_name_plural = _("posts")
        ordering = ["-created_at", "-id"]
        permissions = [
            ("publish_post", "Can schedule and publish posts"),
            ("review_post", "Can approve or reject posts, revisions and releases for review"),
        ]
        indexes = [
            # The publish job's "what is due" and "what is next" queries.
            # With the id, so the job's order (newest due first, then id) is the index's own:
            # a backlog of posts due at the same instant is never sorted to take a batch.
            models.Index(fields=["status", "publish_at", "id"], name="publishing_post_due"),
            models.Index(fields=["status", "unpublish_at", "id"], name="publishing_post_expiry"),
            # The public index: live posts, newest first.
            models.Index(fields=["status", "-published_at", "-id"], name="publishing_post_live"),
            # The public pages' Last-Modified: the latest change of a live post, in one probe.
            models.Index(fields=["status", "-updated_at"], name="publishing_post_changed"),
            # The admin's post list in its default order: a page is a range scan at any size,
            # never a sort of every post. Filtered by status, the same scan stops after a
            # page of matches; a rare status is found through the indexes above. No index
            # more than needed: publishing a post writes an entry in every one.
            models.Index(fields=["-created_at", "-id"], name="publishing_post_recent"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=PostStatus.values),
                name="publishing_post_status_valid",
                violation_error_message=_("Unknown post status."),
            ),
            models.CheckConstraint(
                condition=~Q(status=PostStatus.SCHEDULED) | Q(publish_at__isnull=False),
                name="publishing_post_scheduled_has_publish_at",
                violation_error_message=_("A scheduled post needs a publish time."),
            ),
            models.CheckConstraint(
                condition=~Q(status=PostStatus.PUBLISHED) | Q(published_at__isnull=False),
                name="publishing_post_published_has_published_at",
                violation_error_message=_("A published post records when it went live."),
            ),
            models.CheckConstraint(
                condition=Q(publish_at__isnull=True)
                | Q(unpublish_at__isnull=True)
                | Q(unpublish_at__gt=F("publish_at")),
                name="publishing_post_unpublish_after_publish",
                violation_error_message=_("The unpublish time must be after the publish time."),
            ),
            # The public URL's slug rule (publishing.slugs), so no path (a form, a script, the
            # ORM) stores a post whose address cannot be built.
            models.CheckConstraint(
                condition=IsURLSlug("slug"),
                name="publishing_post_slug_is_url_slug",
                violation_error_message=_(
                    "The slug may only hold letters a-z and A-Z, digits, - and _."
                ),
            ),
        ]

    def __str__(self) -> str:
        return self.title or f"(untitled: {self.slug})"

    def get_absolute_url(self) -> str:
        return reverse("publishing:post_detail", kwargs={"slug": self.slug})

    @property
    def is_failed(self) -> bool:
        """Return True for a scheduled post whose publish failed (skipped until edited)."""
        return self.status == self.Status.SCHEDULED and bool(self.last_error)


class PublishEvent(models.Model):
    """One entry of a post's publish history: who or which node did what, and when."""

    class Kind(models.TextChoices):
        SCHEDULED = "scheduled", _("Scheduled")
        RESCHEDULED = "rescheduled", _("Rescheduled")
        CANCELLED = "cancelled", _("Schedule cancelled")
        PUBLISHED = "published", _("Published")
        UNPUBLISHED = "unpublished", _("Unpublished")
        FAILED = "failed", _("Publish failed")
        LATE = "late", _("Publish late")
        DELETED = "deleted", _("Post deleted")
        REVISION_SCHEDULED = "revision_scheduled", _("Revision scheduled")
        REVISION_CANCELLED = "revision_cancelled", _("Revision cancelled")
        REVISION_SUPERSEDED = "revision_superseded", _("Revision superseded")
        REVISION_PUBLISHED = "revision_published", _("Revision published")
        PREVIEWS_REVOKED = "previews_revoked", _("Preview links revoked")
        REVIEW_REQUESTED = "review_requested", _("Submitted for review")
        REVIEW_APPROVED = "review_approved", _("Approved")
        REVIEW_REJECTED = "review_rejected", _("Rejected")
        REVIEW_RESET = "review_reset", _("Sent back to review")

    # History outlives its post: deleting a post keeps its events, named by post_title.
    # No database constraint, as history tables usually have none: Django sets ``post`` to
    # NULL when a post is deleted, and a constraint only re-checked every event's post at
    # commit, a primary-key lookup per event (0.8 s of a 100,000-post backlog, more than a
    # third of the plain UPDATE of those posts). Nor an index of its own: the
    # ``publishing_event_post`` index starts with ``post`` and serves every lookup by post.
    post = models.ForeignKey(
        Post,
        verbose_name=_("post"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="events",
        db_constraint=False,
        db_index=False,
    )
    post_title = models.CharField(
        _("post title"),
        max_length=200,
        blank=True,
        help_text=_("The title of a deleted post, kept with its history."),
    )
    kind = models.CharField(_("event"), max_length=20, choices=Kind.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    node = models.CharField(
        _("scheduler node"), max_length=200, blank=True, help_text=_("The node that acted.")
    )
    at = models.DateTimeField(_("at"), db_default=Now())
    lateness = models.FloatField(
        _("lateness (s)"),
        null=True,
        blank=True,
        help_text=_("For scheduled publishes and unpublishes: seconds after the planned time."),
    )
    # What happened, as typed values (times as ISO 8601 in UTC): publishing.history turns it
    # into words in the viewer's time zone. See publishing.history for the keys.
    data = models.JSONField(_("data"), default=dict, blank=True)
    # Free text of events written before ``data`` existed that migration 0005 could not read.
    detail = models.TextField(_("detail (older events)"), blank=True)
    # The outbox mark, set by the ``outbox`` app's dispatcher: when an event of a public
    # change (``publishing.public_events.OUTBOX_KINDS``) was handed to the subscribers
    # declared then. Every event is dispatched (the others to nobody), so the undispatched
    # ones are one range of the ``publishing_event_outbox`` index on every database.
    dispatched_at = models.DateTimeField(_("dispatched at"), null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("publish event")
        verbose_name_plural = _("publish history")
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["post", "-at"], name="publishing_event_post"),
            # The publish history at a million events: its default order, and by kind (the
            # kind filter; the public pages' "latest unpublish" reads the same index).
            models.Index(fields=["-at", "-id"], name="publishing_event_recent"),
            models.Index(fields=["kind", "-at", "-id"], name="publishing_event_kind"),
            # The outbox: events not dispatched yet, in the order they were written.
            models.Index(fields=["dispatched_at", "id"], name="publishing_event_outbox"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} by {self.actor}"

    @property
    def actor(self) -> str:
        """Return who acted: the user's name, the scheduler node's name, or ``system``."""
        if self.user_id is not None and self.user is not None:
            return self.user.get_username()
        return self.node or "system"


class RevisionStatus(models.TextChoices):
    """Where a revision is: pending (draft or scheduled), or done with one way or another."""

    DRAFT = "draft", _("Draft")
    SCHEDULED = "scheduled", _("Scheduled")
    PUBLISHED = "published", _("Went live")
    CANCELLED = "cancelled", _("Cancelled")
    SUPERSEDED = "superseded", _("Superseded")


#: A revision that has not gone live and may still: what a takedown sets aside, and what a
#: release's revision item can put live.
PENDING_REVISION = (RevisionStatus.DRAFT, RevisionStatus.SCHEDULED)


class PostRevision(models.Model):
    """A version of a live post's title and body: planned, live once, or set aside.

    A post has at most one pending revision (draft or scheduled): scheduling or restoring one
    supersedes the one before, under the post's row lock. The publish job switches a scheduled
    revision in with a conditional change (``scheduled -> published`` only while still
    scheduled and due by the database clock, and only onto a live post), so a cancelled or
    superseded revision never goes live and none goes live twice. The body is rendered when
    the revision is saved, so the switch only copies columns.
    """

    Status = RevisionStatus

    post = models.ForeignKey(
        Post, verbose_name=_("post"), on_delete=models.CASCADE, related_name="revisions"
    )
    number = models.PositiveIntegerField(_("number"), editable=False)
    title = models.CharField(_("title"), max_length=200)
    body = models.TextField(_("body"))
    body_html = models.TextField(_("body as HTML"), blank=True, default="", editable=False)
    excerpt = models.TextField(_("excerpt"), blank=True, default="", editable=False)
    status = models.CharField(
        _("status"), max_length=20, choices=Status.choices, default=Status.DRAFT, editable=False
    )
    publish_at = models.DateTimeField(_("publish at"), null=True, blank=True)
    published_at = models.DateTimeField(
        _("went live at"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("When the revision actually went live (database clock)."),
    )
    created_at = models.DateTimeField(_("created at"), db_default=Now(), editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("created by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )
    # Who or what ended it: the editor who cancelled it, the scheduler node that put it live.
    closed_by = models.CharField(_("closed by"), max_length=200, blank=True, editable=False)
    closed_at = models.DateTimeField(_("closed at"), null=True, blank=True, editable=False)
    note = models.CharField(_("note"), max_length=300, blank=True, editable=False)
    restored_from = models.ForeignKey(
        "self",
        verbose_name=_("restored from"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        editable=False,
    )

    class Meta:
        verbose_name = _("revision")
        verbose_name_plural = _("revisions")
        ordering = ["-number"]
        indexes = [
            # The publish job's "which revisions are due" and "when is the next one".
            models.Index(fields=["status", "publish_at"], name="publishing_revision_due"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["post", "number"], name="publishing_revision_number"),
            models.CheckConstraint(
                condition=Q(status__in=RevisionStatus.values),
                name="publishing_revision_status_valid",
                violation_error_message=_("Unknown revision status."),
            ),
            models.CheckConstraint(
                condition=~Q(status=RevisionStatus.SCHEDULED) | Q(publish_at__isnull=False),
                name="publishing_revision_scheduled_has_publish_at",
                violation_error_message=_("A scheduled revision needs a publish time."),
            ),
        ]

    def __str__(self) -> str:
        return f"revision {self.number} of “{self.post}”"

    @property
    def is_pending(self) -> bool:
        return self.status in (RevisionStatus.DRAFT, RevisionStatus.SCHEDULED)


__all__ = [
    "Post",
    "PostRevision",
    "PostStatus",
    "PublishEvent",
    "RevisionStatus",
]


class DraftVersion(models.Model):
    """A draft's text as it was saved, before a later save changed it
    (:mod:`publishing.draft_versions`).

    Kept for drafts and unpublished posts (a live post's texts are its revisions), at most
    ``draft_versions.KEPT`` a post: the oldest are deleted as new ones come.
    """

    post = models.ForeignKey(
        Post, verbose_name=_("post"), on_delete=models.CASCADE, related_name="draft_versions"
    )
    number = models.PositiveIntegerField(_("number"))
    title = models.CharField(_("title"), max_length=200)
    body = models.TextField(_("body"), blank=True)
    # Who saved this text and when (the post's ``updated_by`` and ``updated_at`` then).
    saved_by = models.CharField(_("saved by"), max_length=200, blank=True)
    saved_at = models.DateTimeField(_("saved at"))

    class Meta:
        verbose_name = _("draft version")
        constraints = [
            models.UniqueConstraint(fields=["post", "number"], name="draft_version_number_unique")
        ]

    def __str__(self) -> str:
        return f"{self.post_id} v{self.number}"
