"""The operators' admin for plugins: enable/disable plugins, control jobs, browse run history.

Nothing here changes scheduler state by itself: every action calls :mod:`plugins.services`,
which records who did what (shown under "Control events" and on each job's page). Job state
and the run ledger are the engine's tables, shown through proxy models so the engine's own
read-only admin keeps working beside this one. Values read as words, as on the engine's pages
(:mod:`coordination.admin_words`): times with their zone, ``4 min 10 s``, ``on time``,
``Scheduler (node web-1)``.
"""

from urllib.parse import urlencode

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from coordination import ledger
from coordination.admin import ReadOnlyAdminMixin, job_timeline_url
from coordination.admin_columns import (
    RUN_FIELDS,
    RUN_LIST_DISPLAY,
    JobRunColumns,
    JobStateColumns,
)
from coordination.admin_words import outcome_notes, scheduler_html, time_column
from coordination.models import JobRun
from coordination.wording import local_time, scheduler_text
from plugins import selectors, services
from plugins.exceptions import ControlError
from plugins.models import ControlEvent, GroupJob, PluginJob, PluginRun, PluginState

NOTICES_TEMPLATE = "admin/plugins/change_list_with_notices.html"
STATUS_COLOURS = {
    "succeeded": "#1a7f37",
    "failed": "#cf222e",
    "timed_out": "#bc4c00",
    "abandoned": "#8250df",
    "running": "#1f6feb",
    "missed": "#57606a",
}


def _badge(text: str, colour: str, title: str = ""):
    return format_html(
        '<span style="background:{};color:#fff;border-radius:.6em;padding:0 .5em;'
        'white-space:nowrap"{}>{}</span>',
        colour,
        format_html(' title="{}"', title) if title else "",
        text,
    )


def _runs_url(job_name: str) -> str:
    return reverse("admin:plugins_pluginrun_changelist") + "?" + urlencode({"job": job_name})


def _jobs_url(plugin: str) -> str:
    return reverse("admin:plugins_pluginjob_changelist") + "?" + urlencode({"plugin": plugin})


def notices() -> list[dict]:
    """Return what operators must notice: self-paused jobs and nodes that disagree."""
    found = []
    paused = selectors.auto_paused_jobs()
    if paused:
        found.append(
            {
                "level": "error",
                "text": format_html(
                    "{} paused itself after failing {} times in a row: {}. Fix the cause "
                    "(see the job's last error), then resume it.",
                    ngettext("A plugin job", "%(count)d plugin jobs", len(paused))
                    % {"count": len(paused)},
                    selectors.failure_pause_threshold(),
                    format_html_join(
                        ", ",
                        '<a href="{}">{}</a>',
                        (
                            (reverse("admin:plugins_pluginjob_change", args=[s.pk]), s.name)
                            for s in paused
                        ),
                    ),
                ),
            }
        )
    deployment = selectors.deployment()
    if deployment.differs:
        parts = []
        for node in deployment.nodes:
            detail = []
            if node.extra:
                detail.append(f"also declares {', '.join(node.extra)}")
            if node.missing:
                detail.append(f"lacks {', '.join(node.missing)}")
            if not detail:
                detail.append("declares other schedules")
            parts.append(
                f"{scheduler_text(node.name)} ({node.fingerprint or 'no fingerprint'}): "
                f"{'; '.join(detail)}"
            )
        found.append(
            {
                "level": "warning",
                "text": format_html(
                    "Running schedulers declare different jobs (a rolling deploy?). A job "
                    "runs only while the leading scheduler declares it, and is never retired "
                    "while a running scheduler declares it. {}",
                    " · ".join(parts),
                ),
            }
        )
    return found


class ControlAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only rows; actions (for users allowed to control plugins) call the services."""

    change_list_template = NOTICES_TEMPLATE
    show_notices = True

    def has_control_permission(self, request) -> bool:
        return request.user.has_perm("plugins.control_plugins")

    def changelist_view(self, request, extra_context=None):
        if self.show_notices:
            extra_context = {"plugin_notices": notices(), **(extra_context or {})}
        return super().changelist_view(request, extra_context)

    def _apply(self, request, items, action, done_text):
        done = 0
        for item in items:
            try:
                action(item)
            except ControlError as exc:
                self.message_user(request, str(exc), messages.WARNING)
            else:
                done += 1
        if done:
            self.message_user(request, done_text(done), messages.SUCCESS)


# --- plugins ------------------------------------------------------------------------------


@admin.register(PluginState)
class PluginStateAdmin(ControlAdmin):
    list_display = ["app_label", "enabled", "jobs", "declared_here", "changed_by", "changed"]
    list_filter = ["enabled"]
    search_fields = ["app_label"]
    actions = ["enable_plugins", "disable_plugins"]
    fields = ["app_label", "enabled", "changed_by", "changed"]
    readonly_fields = ["changed"]

    changed = time_column("changed_at", _("changed"))

    def changelist_view(self, request, extra_context=None):
        # Plugins appear on their own: any plugin declared here or known to the scheduler.
        services.sync_plugins()
        return super().changelist_view(request, extra_context)

    @admin.display(description=_("jobs"))
    def jobs(self, obj: PluginState):
        count = selectors.plugin_job_states(obj.app_label).count()
        return format_html('<a href="{}">{} job(s)</a>', _jobs_url(obj.app_label), count)

    @admin.display(description=_("declared by this site"), boolean=True)
    def declared_here(self, obj: PluginState) -> bool:
        return obj.app_label in selectors.declared_plugin_jobs()

    @admin.action(description=_("Enable selected plugins"), permissions=["control"])
    def enable_plugins(self, request, queryset):
        self._toggle(request, queryset, enabled=True)

    @admin.action(
        description=_("Disable selected plugins (pause all their jobs)"), permissions=["control"]
    )
    def disable_plugins(self, request, queryset):
        self._toggle(request, queryset, enabled=False)

    def _toggle(self, request, queryset, *, enabled: bool):
        for state in queryset:
            count = services.set_plugin_enabled(
                plugin=state.app_label, enabled=enabled, user=request.user
            )
            verb = "enabled" if enabled else "disabled"
            jobs_verb = "resumed" if enabled else "paused"
            self.message_user(
                request,
                f"Plugin {state.app_label} {verb}; {count} job(s) {jobs_verb}.",
                messages.SUCCESS,
            )


# --- plugin jobs ----------------------------------------------------------------------------


class PluginFilter(admin.SimpleListFilter):
    title = _("plugin")
    parameter_name = "plugin"

    def lookups(self, request, model_admin):
        return [(name, name) for name in selectors.known_plugins()]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(name__startswith=f"{self.value()}.")
        return queryset


class StateFilter(admin.SimpleListFilter):
    title = _("state")
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [
            ("active", _("Active")),
            ("paused", _("Paused")),
            ("auto", _("Paused after failures")),
            ("retired", _("Retired")),
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value == "active":
            return queryset.filter(paused=False, retired_at__isnull=True)
        if value == "paused":
            return queryset.filter(paused=True)
        if value == "auto":
            return queryset.filter(paused=True, paused_reason__endswith="failures in a row")
        if value == "retired":
            return queryset.filter(retired_at__isnull=False)
        return queryset


@admin.register(PluginJob)
class PluginJobAdmin(JobStateColumns, ControlAdmin):
    list_filter = [PluginFilter, StateFilter, "last_status"]
    search_fields = ["name"]
    actions = ["pause_jobs", "resume_jobs", "run_jobs_now"]
    fields = [
        "name",
        "schedule",
        "state",
        "paused_reason",
        "next_slot",
        "run_requested",
        "run_requested_by",
        "last_slot_local",
        "last_status",
        "last_finished",
        "last_took",
        "last_late",
        "last_scheduler",
        "consecutive_failures",
        "missed_count",
        "retired",
        "history",
        "last_error_text",
        "control_events",
    ]
    readonly_fields = fields

    def get_list_display(self, request):
        deployment = selectors.deployment()

        @admin.display(description=_("declared by"))
        def declared_by(obj: PluginJob):
            names = deployment.declared_by(obj.name)
            if not deployment.differs or not deployment.nodes:
                return "every running scheduler" if names else "—"
            if len(names) == len(deployment.nodes):
                return "every running scheduler"
            return format_html(
                '<span style="color:#bc4c00">only {}</span>',
                format_html_join(", ", "{}", ((scheduler_html(n),) for n in names))
                if names
                else "no running scheduler",
            )

        return [
            "name",
            "schedule",
            "state",
            "last_outcome",
            "consecutive_failures",
            "next_slot",
            declared_by,
            "history",
        ]

    @admin.display(description=_("state"))
    def state(self, obj: PluginJob):
        if obj.retired_at is not None:
            return _badge("retired", "#57606a")
        if obj.paused and obj.paused_reason == services.PLUGIN_DISABLED_REASON:
            return _badge("plugin disabled", "#57606a")
        if selectors.is_auto_paused(obj):
            return _badge("paused after failures", "#cf222e")
        if obj.paused and obj.paused_reason.startswith(ledger.UNPLANNABLE):
            return _badge("cannot be planned", "#cf222e")
        if obj.paused:
            return _badge("paused", "#9a6700", obj.paused_reason)
        if obj.run_requested_at is not None:
            return _badge("run requested", "#1f6feb")
        return _badge("active", "#1a7f37")

    @admin.display(description=_("last run"), ordering="last_finished_at")
    def last_outcome(self, obj: PluginJob):
        if not obj.last_status:
            return "—"
        colour = STATUS_COLOURS.get(obj.last_status, "#57606a")
        return _badge(obj.last_status.replace("_", " "), colour)

    @admin.display(description=_("history"))
    def history(self, obj: PluginJob):
        return format_html(
            '<a href="{}">runs</a> · <a href="{}">timeline</a>',
            self.runs_url(obj.name),
            job_timeline_url(obj.name),
        )

    def runs_url(self, job_name: str) -> str:
        return _runs_url(job_name)

    @admin.display(description=_("last error"))
    def last_error_text(self, obj: PluginJob):
        if not obj.last_error:
            return "—"
        return format_html('<pre style="white-space:pre-wrap">{}</pre>', obj.last_error)

    @admin.display(description=_("who did what"))
    def control_events(self, obj: PluginJob):
        events = ControlEvent.objects.filter(target=obj.name)[:20]
        if not events:
            return "—"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>{} — {} {}{}</li>",
                (
                    (
                        local_time(event.at),
                        event.username or "?",
                        event.get_action_display(),
                        f" ({event.detail})" if event.detail else "",
                    )
                    for event in events
                ),
            ),
        )

    @admin.action(description=_("Pause selected jobs"), permissions=["control"])
    def pause_jobs(self, request, queryset):
        self._apply(
            request,
            queryset,
            lambda job: services.pause_job(job_name=job.name, user=request.user),
            lambda n: ngettext("Paused %d job.", "Paused %d jobs.", n) % n,
        )

    @admin.action(description=_("Resume selected jobs"), permissions=["control"])
    def resume_jobs(self, request, queryset):
        self._apply(
            request,
            queryset,
            lambda job: services.resume_job(job_name=job.name, user=request.user),
            lambda n: ngettext("Resumed %d job.", "Resumed %d jobs.", n) % n,
        )

    @admin.action(description=_("Run selected jobs now (even if paused)"), permissions=["control"])
    def run_jobs_now(self, request, queryset):
        self._apply(
            request,
            queryset,
            lambda job: services.run_job_now(job_name=job.name, user=request.user),
            lambda n: (
                ngettext(
                    "Asked the scheduler to run %d job now.",
                    "Asked the scheduler to run %d jobs now.",
                    n,
                )
                % n
            ),
        )


@admin.register(GroupJob)
class GroupJobAdmin(PluginJobAdmin):
    """The jobs of every other group (publishing, a project's own groups): the same controls,
    the same audit; their runs are listed by the engine's run ledger admin."""

    list_filter = ["group", StateFilter, "last_status"]
    fields = ["group", *PluginJobAdmin.fields]
    readonly_fields = fields
    show_notices = False

    def get_list_display(self, request):
        return [
            "name",
            "group",
            "schedule",
            "state",
            "last_outcome",
            "consecutive_failures",
            "next_slot",
            "history",
        ]

    def runs_url(self, job_name: str) -> str:
        return reverse("admin:coordination_jobrun_changelist") + "?" + urlencode({"job": job_name})


# --- run history ----------------------------------------------------------------------------


class JobFilter(admin.SimpleListFilter):
    title = _("job")
    parameter_name = "job"

    def lookups(self, request, model_admin):
        return [(name, name) for name in PluginJob.objects.values_list("name", flat=True)]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(job=self.value())
        return queryset


@admin.register(PluginRun)
class PluginRunAdmin(JobRunColumns, ControlAdmin):
    list_display = RUN_LIST_DISPLAY
    list_filter = [JobFilter, "status", "reason", "trigger"]
    search_fields = ["job", "node", "error"]
    date_hierarchy = "slot"
    fields = [*RUN_FIELDS, "error_text"]
    readonly_fields = fields

    @admin.display(description=_("outcome"), ordering="status")
    def outcome(self, obj: JobRun):
        """The status as a badge, then what else there is to say about the run (why missed,
        trigger, attempt, error): one column that reads as a sentence."""
        badge = _badge(obj.get_status_display(), STATUS_COLOURS.get(obj.status, "#57606a"))
        notes = outcome_notes(obj)
        if not notes:
            return badge
        return format_html("{} {}", badge, " · ".join(notes))

    @admin.display(description=_("error"))
    def error_text(self, obj: JobRun):
        if not obj.error:
            return "—"
        return format_html('<pre style="white-space:pre-wrap">{}</pre>', obj.error)


# --- audit ----------------------------------------------------------------------------------


@admin.register(ControlEvent)
class ControlEventAdmin(ControlAdmin):
    change_list_template = None
    show_notices = False
    list_display = ["when", "username", "action", "target", "detail"]
    list_filter = ["action"]
    search_fields = ["target", "username", "detail"]
    date_hierarchy = "at"
    fields = ["when", "user", "username", "action", "target", "detail"]
    readonly_fields = fields

    when = time_column("at", _("when"))
