"""Plugin control state, the audit trail of who did what, and admin views of the engine's rows.

The engine (``coordination``) owns job state and the run ledger; the plugin admin shows the
plugin group's share of them through proxy models, so the engine's own read-only admin and this
one coexist on the same tables.
"""

from django.conf import settings
from django.db import models
from django.db.models.functions import Now
from django.utils.translation import gettext_lazy as _

from coordination.models import JobRun, JobState

PLUGIN_GROUP = "plugins"


class PluginState(models.Model):
    """Whether a plugin is enabled. No row means enabled: a new plugin runs without setup."""

    app_label = models.CharField(
        _("plugin"),
        max_length=100,
        unique=True,
        help_text=_("The plugin's name: the first part of its job names (usually its app label)."),
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("changed by"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    changed_at = models.DateTimeField(_("changed at"), null=True, blank=True)

    class Meta:
        verbose_name = _("plugin")
        verbose_name_plural = _("plugins")
        ordering = ["app_label"]
        permissions = [
            (
                "control_plugins",
                "Can enable and disable plugins, and pause, resume and run plugin jobs",
            )
        ]

    def __str__(self) -> str:
        return self.app_label


class ControlEvent(models.Model):
    """One control action on a plugin or plugin job: who did what, when (database clock)."""

    class Action(models.TextChoices):
        PLUGIN_ENABLED = "plugin_enabled", _("enabled plugin")
        PLUGIN_DISABLED = "plugin_disabled", _("disabled plugin")
        JOB_PAUSED = "job_paused", _("paused job")
        JOB_RESUMED = "job_resumed", _("resumed job")
        JOB_RUN_REQUESTED = "job_run_requested", _("requested a run now")

    at = models.DateTimeField(_("at"), db_default=Now(), editable=False)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("user"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    username = models.CharField(
        _("username"), max_length=150, blank=True, help_text=_("Kept if the user is deleted.")
    )
    action = models.CharField(_("action"), max_length=30, choices=Action.choices)
    target = models.CharField(_("plugin or job"), max_length=200)
    detail = models.CharField(_("detail"), max_length=255, blank=True)

    class Meta:
        verbose_name = _("control event")
        verbose_name_plural = _("control events")
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["target", "-at"], name="plugins_event_target")]

    def __str__(self) -> str:
        return f"{self.username or '?'} {self.get_action_display()} {self.target}"


class PluginJobManager(models.Manager):
    def get_queryset(self):
        return super().get_queryset().filter(group=PLUGIN_GROUP)


class PluginJob(JobState):
    """A plugin group job's durable state (a proxy of :class:`coordination.models.JobState`)."""

    objects = PluginJobManager()

    class Meta:
        proxy = True
        verbose_name = _("plugin job")
        verbose_name_plural = _("plugin jobs")

    @property
    def plugin(self) -> str:
        return self.name.split(".", 1)[0]


class GroupJobManager(models.Manager):
    def get_queryset(self):
        return super().get_queryset().exclude(group=PLUGIN_GROUP)


class GroupJob(JobState):
    """A job of any other group (publishing, a project's own ``@job(group=...)``): the same
    controls as a plugin job, without a plugin to enable or disable."""

    objects = GroupJobManager()

    class Meta:
        proxy = True
        verbose_name = _("job of another group")
        verbose_name_plural = _("jobs of other groups")


class PluginRunManager(models.Manager):
    def get_queryset(self):
        names = JobState.objects.filter(group=PLUGIN_GROUP).values("name")
        return super().get_queryset().filter(job__in=names)


class PluginRun(JobRun):
    """A run-ledger row of a plugin job (a proxy of :class:`coordination.models.JobRun`)."""

    objects = PluginRunManager()

    class Meta:
        proxy = True
        verbose_name = _("plugin job run")
        verbose_name_plural = _("plugin job runs")
