"""Read-only admin views of scheduler state, so operators can see what ran where."""

from django.contrib import admin

from coordination.models import JobRun, JobState, Leadership, Node


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
    list_display = ["name", "host", "pid", "last_heartbeat", "stopped_at", "started_at"]
    search_fields = ["name", "host"]


@admin.register(Leadership)
class LeadershipAdmin(ReadOnlyAdmin):
    list_display = ["group", "node", "since", "session_id", "key"]


@admin.register(JobState)
class JobStateAdmin(ReadOnlyAdmin):
    list_display = [
        "name",
        "group",
        "schedule",
        "next_due",
        "last_status",
        "last_duration",
        "consecutive_failures",
        "paused",
        "retired_at",
    ]
    list_filter = ["group", "paused", "last_status"]
    search_fields = ["name"]


@admin.register(JobRun)
class JobRunAdmin(ReadOnlyAdmin):
    list_display = [
        "job",
        "slot",
        "status",
        "reason",
        "trigger",
        "node",
        "attempt",
        "duration",
        "started_at",
    ]
    list_filter = ["status", "reason", "trigger", "job"]
    search_fields = ["job", "node", "error"]
    date_hierarchy = "slot"
