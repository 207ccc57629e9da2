"""Publish history, read-only: the events page (the whole history across posts) and the
post page's own history (:class:`PublishEventInline`).

Times in the editor's zone; a page at a million events is one range scan of an index.
"""

from datetime import timedelta

from django.contrib import admin
from django.utils.translation import gettext_lazy as _

from coordination.admin import ReadOnlyAdminMixin
from coordination.admin_paging import CappedCountPaginator
from coordination.clock import database_now
from coordination.wording import lateness_text
from publishing.admin.columns import with_zone
from publishing.history import actor_name, describe, local_time
from publishing.models import PublishEvent


class EventWindowFilter(admin.SimpleListFilter):
    """Recent events by the database clock: a range scan of the ``(-at, -id)`` index.

    Instead of a date hierarchy, whose year and month links are a ``DISTINCT`` over the
    truncated time of every event (a million of them).
    """

    title = _("when")
    parameter_name = "within"
    WINDOWS = {
        "1h": (_("the last hour"), timedelta(hours=1)),
        "24h": (_("the last 24 hours"), timedelta(days=1)),
        "7d": (_("the last 7 days"), timedelta(days=7)),
        "30d": (_("the last 30 days"), timedelta(days=30)),
    }

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _span) in self.WINDOWS.items()]

    def queryset(self, request, queryset):
        window = self.WINDOWS.get(self.value() or "")
        return queryset.filter(at__gte=database_now() - window[1]) if window else queryset


class EventCells:
    """How an event reads in a row, on the events page and in a post's own history."""

    @admin.display(description=with_zone("When"), ordering="at")
    def when(self, event: PublishEvent) -> str:
        return local_time(event.at)

    @admin.display(description=_("Lateness"), ordering="lateness")
    def how_late(self, event: PublishEvent) -> str:
        return lateness_text(event.lateness)

    @admin.display(description=with_zone("Details"))
    def details(self, event: PublishEvent) -> str:
        return describe(event)

    @admin.display(description=_("By"))
    def actor(self, event: PublishEvent) -> str:
        return actor_name(event)


@admin.register(PublishEvent)
class PublishEventAdmin(EventCells, ReadOnlyAdminMixin, admin.ModelAdmin):
    """The whole publish history across posts, read-only (for audits and the failure count).

    A page at a million events is one range scan of an index matching its order: ``(-at,
    -id)``, or ``(kind, -at, -id)`` filtered by kind; the count stops at a cap, and recent
    windows replace the date hierarchy (see :class:`EventWindowFilter`).
    """

    list_display = ["when", "post_name", "kind", "actor", "how_late", "details"]
    list_filter = ["kind", EventWindowFilter]
    search_fields = ["post__title", "post_title", "node", "detail"]
    list_select_related = ["post", "user"]
    ordering = ["-at", "-id"]
    paginator = CappedCountPaginator
    show_full_result_count = False

    def get_queryset(self, request):
        # The post's title is all a row shows of it: leave its body in the database.
        return super().get_queryset(request).defer("post__body", "post__body_html", "post__excerpt")

    @admin.display(description=_("Post"), ordering="post__title")
    def post_name(self, event: PublishEvent) -> str:
        if event.post is not None:
            return str(event.post)
        return _("%(title)s (deleted)") % {"title": event.post_title or "?"}


class PublishEventInline(EventCells, ReadOnlyAdminMixin, admin.TabularInline):
    """The post's publish history, newest first; written by the actions only."""

    model = PublishEvent
    fields = ["when", "kind", "actor", "how_late", "details"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("publish history")

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user").order_by("-at", "-id")

    def has_view_permission(self, request, obj=None):
        user = request.user
        return user.has_perm("publishing.view_post") or user.has_perm("publishing.change_post")
