"""What each editor chooses for themself: the time zone the admin shows and reads times in."""

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from editors.zones import zone_choices


class EditorProfile(models.Model):
    """One per user who set a preference; a user without one gets the site's defaults."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        on_delete=models.CASCADE,
        related_name="editor_profile",
    )
    # Choices are a callable: the zone list comes from the host's tzdata, not the migration.
    time_zone = models.CharField(
        _("time zone"),
        max_length=64,
        blank=True,
        choices=zone_choices,
        help_text=_(
            "The zone the admin shows times in and reads the times you enter in. "
            "Blank: the site's zone."
        ),
    )

    # Emails about the posts the user wrote (outbox.notifications), each kind on its own.
    email_published = models.BooleanField(
        _("when my post goes live"),
        default=True,
        help_text=_("Not when you published it yourself."),
    )
    email_failed = models.BooleanField(
        _("when my scheduled post cannot be published"),
        default=True,
        help_text=_("It stays scheduled and is not tried again until it is changed."),
    )
    email_late = models.BooleanField(
        _("when my scheduled post is late"),
        default=True,
        help_text=_("Still not live a few minutes after its time."),
    )

    #: The email switches by the publish event kind they are about.
    EMAIL_SWITCHES = {
        "published": "email_published",
        "failed": "email_failed",
        "late": "email_late",
    }

    class Meta:
        verbose_name = _("editor profile")
        verbose_name_plural = _("editor profiles")

    def __str__(self) -> str:
        return f"{self.user}: {self.time_zone or 'site zone'}"
