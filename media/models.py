"""Uploaded images, the posts whose texts use them, and posts' featured images.

An image's files live in the ``default`` storage (``STORAGES``) under ``images/<key>/``; the
row says what they are. :class:`ImageUse` is an index of the posts whose body or pending
revisions point at an image: the embargo asks it which posts to look at, then reads those
posts' live text (media.access), so a stale row never makes an image public.
"""

from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from media import rules


class Image(models.Model):
    """One uploaded image: its sizes are files, its words (alt text) are here."""

    key = models.CharField(_("key"), max_length=rules.KEY_LENGTH, unique=True, editable=False)
    name = models.CharField(_("file name"), max_length=100, editable=False)
    original_name = models.CharField(_("uploaded as"), max_length=255, editable=False)
    alt = models.CharField(
        _("alt text"),
        max_length=rules.ALT_MAX,
        help_text=_("What the image shows, for people who cannot see it."),
    )
    format = models.CharField(_("format"), max_length=10, editable=False)
    width = models.PositiveIntegerField(_("width"), editable=False)
    height = models.PositiveIntegerField(_("height"), editable=False)
    # The smaller widths stored beside the full size (media.rules.widths_for).
    widths = models.JSONField(_("smaller widths"), default=list, editable=False)
    size = models.PositiveBigIntegerField(_("bytes"), editable=False)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("uploaded by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        editable=False,
        related_name="+",
    )
    uploaded_at = models.DateTimeField(_("uploaded"), db_default=Now(), editable=False)

    class Meta:
        verbose_name = _("image")
        ordering = ["-uploaded_at", "-id"]
        indexes = [models.Index(fields=["-uploaded_at", "-id"], name="media_image_newest")]

    def __str__(self):
        return self.original_name or self.name

    @property
    def url(self) -> str:
        """Return the address of the full-size image."""
        return rules.public_path(self.key, self.name)

    @property
    def thumbnail_url(self) -> str:
        """Return the address of the smallest size (the full size if there is none)."""
        if not self.widths:
            return self.url
        return rules.public_path(self.key, self.name, width=self.widths[0])

    def markdown(self, alt: str | None = None) -> str:
        """Return the Markdown that shows this image in a post."""
        words = (alt if alt is not None else self.alt).replace("]", "\\]").replace("[", "\\[")
        return f"![{words}]({self.url})"

    def files(self) -> list[str]:
        """Return the storage paths of every file of this image."""
        paths = []
        for width in [None, *self.widths]:
            for webp in (False, True):
                paths.append(rules.storage_path(self.key, self.name, width=width, webp=webp))
        return paths


class ImageUse(models.Model):
    """A post whose body or pending revision points at an image (an index, see the module)."""

    image = models.ForeignKey(Image, on_delete=models.CASCADE, related_name="uses")
    post = models.ForeignKey(
        "publishing.Post", on_delete=models.CASCADE, related_name="+", db_constraint=True
    )

    class Meta:
        verbose_name = _("image use")
        constraints = [
            models.UniqueConstraint(fields=["image", "post"], name="media_use_once_per_post")
        ]
        indexes = [models.Index(fields=["post"], name="media_use_post")]

    def __str__(self):
        return f"{self.image} in post {self.post_id}"


class FeaturedImage(models.Model):
    """The image a post is shown with (at the top of its page)."""

    post = models.OneToOneField(
        "publishing.Post",
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="featured_image",
    )
    image = models.ForeignKey(Image, on_delete=models.PROTECT, related_name="featured_in")

    class Meta:
        verbose_name = _("featured image")

    def __str__(self):
        return f"{self.image} featured on post {self.post_id}"
