"""Read-only admin views of scheduler state, so operators can see what ran where.

Besides the tables, each job and each group has a timeline page: runs as bars by node, missed
slots with their reason and leadership terms with why each ended (``coordination.timeline``).
Every page says its values in words (:mod:`coordination.admin_words`): times in the viewer's
zone with its name, durations such as ``4 min 10 s``, ``on time`` for a run less than a second
late, and ``Scheduler (node web-1)`` for a scheduler process, its raw node name in the title.
"""

from datetime import timedelta
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models.functions import Now
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html, format_html_join

from coordination import timeline
from coordination.admin_columns import (
    RUN_FIELDS,
    RUN_LIST_DISPLAY,
    JobRunColumns,
    JobStateColumns,
)
from coordination.admin_paging import CappedCountPaginator
from coordination.admin_words import outcome_notes, scheduler_column, time_column, time_html
from coordination.clock import database_now
from coordination.conf import settings as coordination_settings
from coordination.models import JobRun, JobState, Leadership, LeadershipTerm, Node
from coordination.registry import registry
from coordination.selectors import timeline_rows
from coordination.wording import local_time

UPCOMING_SLOTS = 5


def group_timeline_url(group: str) -> str:
    return reverse("admin:coordination_group_timeline", args=[group])


def job_timeline_url(job_name: str) -> str:
    return reverse("admin:coordination_jobstate_timeline", args=[job_name])


class ReadOnlyAdminMixin:
    """For rows the system writes (scheduler state, histories): people look, they do not edit."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The scheduler owns these rows."""


@admin.register(Node)
class NodeAdmin(ReadOnlyAdmin):
    list_display = ["process", "host", "pid", "heartbeat", "stopped", "started"]
    search_fields = ["name", "host"]
    fields = ["process", "name", "host", "pid", "groups", "started", "heartbeat", "stopped"]
    readonly_fields = fields

    def get_queryset(self, request):
        # The database's time once per page, for the idle workers' column.
        return super().get_queryset(request).annotate(db_now=Now())

    # A scheduler's or a worker's: "Scheduler (node web-1)", "Worker (node web-1/worker-1)".
    process = scheduler_column("name", "process")
    stopped = time_column("stopped_at", "stopped")
    started = time_column("started_at", "started")

    @admin.display(description="last heartbeat", ordering="last_heartbeat")
    def heartbeat(self, obj: Node):
        """The last heartbeat, but for an idle worker (which writes none while it waits for
        work) ``idle since`` it, not a heartbeat that looks stale."""
        lease = timedelta(seconds=float(coordination_settings.LEASE))
        now = getattr(obj, "db_now", None) or database_now()
        idle = (
            obj.role == Node.Role.WORKER
            and obj.stopped_at is None
            and obj.last_heartbeat < now - lease
        )
        if idle:
            return format_html("idle since {}", time_html(obj.last_heartbeat))
        return time_html(obj.last_heartbeat)


@admin.register(Leadership)
class LeadershipAdmin(ReadOnlyAdmin):
    list_display = ["group", "scheduler", "since_local", "session_id", "key", "timeline"]
    fields = ["group", "scheduler", "node", "since_local", "session_id", "key", "timeline"]
    readonly_fields = fields

    scheduler = scheduler_column("node", "leader")
    since_local = time_column("since", "leading since")

    @admin.display(description="history")
    def timeline(self, obj: Leadership):
        return format_html('<a href="{}">timeline</a>', group_timeline_url(obj.group))


@admin.register(LeadershipTerm)
class LeadershipTermAdmin(ReadOnlyAdmin):
    list_display = ["group", "scheduler", "started", "ended", "end_reason", "detail"]
    list_filter = ["group", "end_reason"]
    search_fields = ["node"]
    show_full_result_count = False
    fields = ["group", "scheduler", "node", "started", "ended", "end_reason", "detail"]
    readonly_fields = fields

    scheduler = scheduler_column("node", "leader")
    started = time_column("started_at", "from")
    ended = time_column("ended_at", "to")


@admin.register(JobState)
class JobStateAdmin(JobStateColumns, ReadOnlyAdmin):
    list_display = [
        "name",
        "group",
        "schedule",
        "next_slot",
        "last_status",
        "last_took",
        "last_late",
        "last_scheduler",
        "consecutive_failures",
        "paused",
        "paused_reason",
        "retired",
        "timeline",
    ]
    list_filter = ["group", "paused", "last_status"]
    search_fields = ["name"]
    fields = [
        "name",
        "group",
        "schedule",
        "next_slot",
        "upcoming_slots",
        "wake",
        "run_requested",
        "run_requested_by",
        "paused",
        "paused_reason",
        "retired",
        "last_slot_local",
        "last_started",
        "last_finished",
        "last_status",
        "last_took",
        "last_late",
        "last_scheduler",
        "consecutive_failures",
        "missed_count",
        "last_error",
        "timeline",
    ]
    readonly_fields = fields

    @admin.display(description="history")
    def timeline(self, obj: JobState):
        return format_html(
            '<a href="{}">job timeline</a> · <a href="{}">{} group timeline</a>',
            job_timeline_url(obj.name),
            group_timeline_url(obj.group),
            obj.group,
        )

    @admin.display(description="next slots")
    def upcoming_slots(self, obj: JobState):
        """The job's next slots in the site's zone and, when it differs, the viewer's."""
        job = registry.get(obj.name)
        if job is None or not job.schedule.periodic:
            return "not periodic here (no slots, or the job is not declared in this process)"
        site = ZoneInfo(django_settings.TIME_ZONE)
        viewer = timezone.get_current_timezone()
        zones = [site] if str(viewer) == str(site) else [site, viewer]
        now = database_now()
        slot = obj.next_due if obj.next_due and obj.next_due >= now else None
        slots = []
        try:
            slot = slot or job.schedule.next_after(now)
            while slot is not None and len(slots) < UPCOMING_SLOTS:
                slots.append(slot)
                slot = job.schedule.next_after(slot)
        except Exception as exc:
            return f"its slots cannot be computed ({type(exc).__name__}: {exc})"
        if not slots:
            return "none: the calendar ends before its next slot"
        header = format_html_join("", "<th>{}</th>", ((str(zone),) for zone in zones))
        rows = format_html_join(
            "",
            "<tr>{}</tr>",
            (
                (
                    format_html_join(
                        "",
                        "<td>{}</td>",
                        ((local_time(s, z),) for z in zones),
                    ),
                )
                for s in slots
            ),
        )
        return format_html('<table class="upcoming-slots"><tr>{}</tr>{}</table>', header, rows)

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path(
                "group/<str:group>/timeline/",
                view(self.group_timeline_view),
                name="coordination_group_timeline",
            ),
            path(
                "<path:object_id>/timeline/",
                view(self.job_timeline_view),
                name="coordination_jobstate_timeline",
            ),
            *super().get_urls(),
        ]

    def job_timeline_view(self, request, object_id: str):
        state = JobState.objects.filter(name=object_id).first()
        if state is None:
            raise Http404("no such job")
        return self._timeline(
            request, title=f"Timeline of {state.name}", jobs=[state.name], group=state.group
        )

    def group_timeline_view(self, request, group: str):
        jobs = list(JobState.objects.filter(group=group).values_list("name", flat=True))
        if not jobs and not LeadershipTerm.objects.filter(group=group).exists():
            raise Http404("no such group")
        return self._timeline(
            request, title=f"Timeline of the {group} group", jobs=jobs, group=group
        )

    def _timeline(self, request, *, title: str, jobs: list[str], group: str):
        if not self.has_view_permission(request):
            raise PermissionDenied
        hours = _window_hours(request.GET.get("hours"))
        now = database_now()
        end = _window_end(request.GET.get("end"), now)
        start = end - timedelta(hours=hours)
        runs, terms, truncated = timeline_rows(
            jobs=jobs, groups=[group], start=start, end=end, limit=timeline.MAX_RUNS
        )
        drawn = timeline.build(
            start=start,
            end=end,
            now=now,
            runs=runs,
            terms=terms,
            zone=timezone.get_current_timezone(),
            truncated=truncated,
            show_job=len(jobs) != 1,
        )
        context = {
            **self.admin_site.each_context(request),
            "title": title,
            "opts": self.model._meta,
            "timeline": drawn,
            "hours": hours,
            "windows": timeline.WINDOWS,
            "earlier": (end - timedelta(hours=hours)).isoformat(),
            "later": (end + timedelta(hours=hours)).isoformat() if end < now else None,
            "group": group,
            "group_url": group_timeline_url(group),
            "single_job": jobs[0] if len(jobs) == 1 else None,
        }
        return TemplateResponse(request, "admin/coordination/timeline.html", context)


class JobNameFilter(admin.SimpleListFilter):
    """Filter the ledger by job, listing the jobs from ``JobState`` (one row per job).

    Django's field filter would list the names with a ``DISTINCT`` over the whole ledger on
    every page view.
    """

    title = "job"
    parameter_name = "job"

    def lookups(self, request, model_admin):
        names = JobState.objects.order_by("name").values_list("name", flat=True)
        return [(name, name) for name in names]

    def queryset(self, request, queryset):
        return queryset.filter(job=self.value()) if self.value() else queryset


class SlotWindowFilter(admin.SimpleListFilter):
    """Recent slots by the database clock: a range scan of the slot index.

    Instead of a date hierarchy, whose year and month links are a ``DISTINCT`` over the
    truncated slot of every ledger row.
    """

    title = "slot"
    parameter_name = "within"
    WINDOWS = {
        "1h": ("the last hour", timedelta(hours=1)),
        "24h": ("the last 24 hours", timedelta(days=1)),
        "7d": ("the last 7 days", timedelta(days=7)),
        "30d": ("the last 30 days", timedelta(days=30)),
    }

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _span) in self.WINDOWS.items()]

    def queryset(self, request, queryset):
        window = self.WINDOWS.get(self.value() or "")
        return queryset.filter(slot__gte=database_now() - window[1]) if window else queryset


@admin.register(JobRun)
class JobRunAdmin(JobRunColumns, ReadOnlyAdmin):
    """The run ledger, a page at a time however long it grows (a million rows and more).

    Every page is one range scan of an index that matches its order: ``(-slot, -id)`` for the
    whole ledger and the slot windows, ``(job, -slot)`` for one job. Nothing counts or scans
    the ledger: the count stops at a cap (:mod:`coordination.admin_paging`), the job filter
    lists the jobs from ``JobState``, and there is no full count beside a filtered one.
    """

    list_display = RUN_LIST_DISPLAY
    list_filter = ["status", "reason", "trigger", JobNameFilter, SlotWindowFilter]
    search_fields = ["job", "node", "error"]
    ordering = ["-slot", "-id"]
    paginator = CappedCountPaginator
    show_full_result_count = False
    fields = [*RUN_FIELDS, "retry", "error"]
    readonly_fields = fields

    @admin.display(description="outcome", ordering="status")
    def outcome(self, obj: JobRun) -> str:
        """The status, then why missed, trigger, attempt and error: one sentence."""
        return " · ".join([obj.get_status_display(), *outcome_notes(obj)])


def _window_hours(value: str | None) -> int:
    try:
        hours = int(value or timeline.WINDOWS[0])
    except ValueError:
        return timeline.WINDOWS[0]
    return hours if hours in timeline.WINDOWS else timeline.WINDOWS[0]


def _window_end(value: str | None, now):
    """The window's end: ``?end=`` (ISO 8601, aware) if given and not in the future, else now."""
    try:
        end = parse_datetime(value or "")
    except ValueError:
        end = None
    if end is None or timezone.is_naive(end) or end > now:
        return now
    return end
