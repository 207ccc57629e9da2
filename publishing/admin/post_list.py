"""The post list: its columns, filters, search and the actions on the posts selected.

Times are shown in the editor's time zone with the zone's name; the list reads no bodies and
counts no further than a cap, so a page stays one index range scan at 100,000 posts.
"""

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ChangeList
from django.http import HttpResponseRedirect
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from coordination.admin_paging import CappedCountPaginator
from coordination.clock import database_now
from coordination.wording import lateness_text
from publishing import posts, selectors
from publishing.admin import bulk as admin_bulk
from publishing.admin.columns import badge, column_with_zone, zone_name
from publishing.admin.panel import is_late
from publishing.admin.sections import ListColumn, post_list_actions, post_list_columns
from publishing.exceptions import PublishingError
from publishing.history import local_time
from publishing.models import Post

S = Post.Status

BADGE_COLOURS = {
    S.DRAFT: "#6c757d",
    S.SCHEDULED: "#1f6feb",
    S.PUBLISHED: "#1a7f37",
    S.UNPUBLISHED: "#57606a",
    "late": "#9a6700",
    "failed": "#cf222e",
}


class FailedFilter(admin.SimpleListFilter):
    title = _("publish problem")
    parameter_name = "failed"

    def lookups(self, request, model_admin):
        return [("yes", _("Failed to publish")), ("no", _("No problem"))]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(status=S.SCHEDULED).exclude(last_error="")
        if self.value() == "no":
            return queryset.filter(last_error="")
        return queryset


class PostChangeList(ChangeList):
    """The post list: rows without their bodies, the lateness of the page's posts only, and
    which of them are late (scheduled, their time passed), as the calendar shows them; the
    cells of the columns other apps add, read for the page's posts at once.

    The lateness of each post's last scheduled publish is read for the page's posts in one
    query after the page is chosen, not as a subquery of the list's queryset, which the
    capped count would evaluate for ten thousand rows.
    """

    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        return queryset.defer("body", "body_html", "excerpt")

    def get_results(self, request):
        super().get_results(request)
        self.result_list = list(self.result_list)
        lateness = selectors.last_publish_lateness([post.pk for post in self.result_list])
        now = database_now()
        for post in self.result_list:
            post.last_publish_lateness = lateness.get(post.pk)
            post.is_late = is_late(post.status, post.publish_at, now)
            post.list_cells = {}
        for column in post_list_columns():
            cells = column.cells(self.result_list)
            for post in self.result_list:
                post.list_cells[column.name] = cells.get(post.pk)


def _column_cell(column: ListColumn):
    """Return the list_display callable of ``column``: its cell read by get_results."""

    def cell(post: Post):
        return getattr(post, "list_cells", {}).get(column.name)

    cell.__name__ = column.name
    return admin.display(description=column.label, empty_value="—")(cell)


class PostListMixin:
    """The post admin's list page: the columns (with those other apps add after the status),
    the filters and the list actions (publishing's own, then other apps')."""

    list_display = [
        "title",
        "status_badge",
        "scheduled_for",
        "went_live",
        "unpublish_time",
        "author",
        "updated",
    ]
    list_filter = ["status", FailedFilter]
    search_fields = ["title", "slug", "body"]
    # A page at 100,000 posts is one range scan of an index matching the order:
    # no full count (it stops at a cap and says "more than"), no date hierarchy (its links
    # are a DISTINCT over every post; the calendar is the view by time), no bodies read.
    ordering = ["-created_at", "-id"]
    paginator = CappedCountPaginator
    show_full_result_count = False
    own_actions = [
        "publish_now_action",
        "cancel_schedule_action",
        "unpublish_action",
        "bulk_schedule_action",
    ]

    @property
    def actions(self) -> list:
        """Publishing's own list actions, then those other apps add (releases: "Add selected
        posts to a release")."""
        return [*self.own_actions, *post_list_actions()]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("author")

    def get_changelist(self, request, **kwargs):
        return PostChangeList

    def get_list_display(self, request):
        """Publishing's columns, with those other apps add after the status."""
        shown = list(super().get_list_display(request))
        at = shown.index("status_badge") + 1
        shown[at:at] = [_column_cell(column) for column in post_list_columns()]
        return shown

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "time_zone_name": zone_name()}
        return super().changelist_view(request, extra_context=extra_context)

    @admin.display(description=mark_safe('<input type="checkbox" id="action-toggle">'))
    def action_checkbox(self, post: Post) -> str:
        """Django's row checkbox, written out: its widget template is a fifth of a page's cost."""
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            post.pk,
            _("Select this object for an action - {}").format(post),
        )

    @admin.display(description=_("Status"), ordering="status")
    def status_badge(self, post: Post) -> str:
        if post.is_failed:
            key, label = "failed", _("Late — publish failed")
        elif getattr(post, "is_late", False):
            key, label = "late", _("Late")
        else:
            key, label = post.status, post.get_status_display()
        title = post.last_error or (
            _("Its time has passed; not published yet") if key == "late" else ""
        )
        return badge("post-status", key, BADGE_COLOURS[key], label, title=title)

    @admin.display(description=column_with_zone("Scheduled for"), ordering="publish_at")
    def scheduled_for(self, post: Post) -> str:
        if post.status != S.SCHEDULED:
            return "—"
        return local_time(post.publish_at, seconds=False)

    @admin.display(description=column_with_zone("Went live"), ordering="published_at")
    def went_live(self, post: Post) -> str:
        if post.published_at is None or post.status not in (S.PUBLISHED, S.UNPUBLISHED):
            return "—"
        lateness = getattr(post, "last_publish_lateness", None)
        late = _("by hand") if lateness is None else lateness_text(lateness)
        return f"{local_time(post.published_at, seconds=False)} · {late}"

    @admin.display(description=column_with_zone("Unpublish at"), ordering="unpublish_at")
    def unpublish_time(self, post: Post) -> str:
        return local_time(post.unpublish_at, seconds=False) if post.unpublish_at else "—"

    @admin.display(description=column_with_zone("Updated"), ordering="updated_at")
    def updated(self, post: Post) -> str:
        return local_time(post.updated_at, seconds=False)

    # --- actions ----------------------------------------------------------------------
    def _run_action(self, request, queryset, action, done_text: str) -> None:
        done = 0
        for post in queryset.order_by("pk"):
            try:
                action(post=post, user=request.user)
            except PublishingError as exc:
                self.message_user(request, str(exc), messages.ERROR)
            else:
                done += 1
        if done:
            self.message_user(
                request,
                ngettext("%(count)d post %(done)s.", "%(count)d posts %(done)s.", done)
                % {"count": done, "done": done_text},
                messages.SUCCESS,
            )

    @admin.action(description=_("Publish selected posts now"), permissions=["publish"])
    def publish_now_action(self, request, queryset):
        self._run_action(request, queryset, posts.publish_now, "published")

    @admin.action(description=_("Cancel the schedule of selected posts"), permissions=["publish"])
    def cancel_schedule_action(self, request, queryset):
        self._run_action(request, queryset, posts.cancel_schedule, "taken back to draft")

    @admin.action(description=_("Unpublish selected posts"), permissions=["publish"])
    def unpublish_action(self, request, queryset):
        self._run_action(request, queryset, posts.unpublish_now, "unpublished")

    @admin.action(description=_("Schedule or reschedule selected posts"), permissions=["publish"])
    def bulk_schedule_action(self, request, queryset):
        """Ask for the time the selected posts go live at (a page of its own)."""
        ids = queryset.values_list("pk", flat=True)[: admin_bulk.MOST]
        url = admin_bulk.selection_url(request, "admin:publishing_post_bulk_schedule", ids)
        return HttpResponseRedirect(url)
