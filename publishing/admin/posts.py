"""The post's page: write, schedule, reschedule, cancel, publish and unpublish a post (its
list, columns and list actions: :mod:`publishing.admin.post_list`).

Nothing here changes publishing state by itself: saving the form and the list actions call
:mod:`publishing.posts`, the same code scripts and tests use. Times are shown in
the editor's time zone (Django's current time zone) with the zone's name.
"""

from functools import partial

from django.contrib import admin, messages
from django.contrib.admin.options import IS_POPUP_VAR
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from coordination.clock import database_now
from coordination.wording import lateness_text
from publishing import actions, hooks, posts, selectors
from publishing.admin import bulk as admin_bulk
from publishing.admin.calendar import calendar_view
from publishing.admin.columns import with_zone, zone_name
from publishing.admin.draft_versions import draft_versions_view
from publishing.admin.events import PublishEventInline
from publishing.admin.panel import (
    PostState,
    not_done_text,
    outcome_text,
    saved_text,
    state_text,
)
from publishing.admin.post_list import PostListMixin
from publishing.admin.revisions import (
    compare_view,
    preview_view,
    revision_action_view,
    revisions_view,
)
from publishing.admin.sections import page_context, post_added
from publishing.admin.site_at import (
    site_at_feed_view,
    site_at_post_view,
    site_at_share_view,
    site_at_sitemap_view,
    site_at_view,
)
from publishing.admin.view_on_site import off_site_response
from publishing.exceptions import EditConflict, PublishingError
from publishing.forms import ACTION_BUTTON, PostAdminForm
from publishing.history import local_time
from publishing.models import Post, PostRevision, PublishEvent

S = Post.Status


@admin.register(Post)
class PostAdmin(PostListMixin, admin.ModelAdmin):
    """The post's page (its list is :class:`publishing.admin.post_list.PostListMixin`'s)."""

    form = PostAdminForm
    prepopulated_fields = {"slug": ["title"]}
    inlines = [PublishEventInline]
    system_fields = [
        "publishing_state",
        "published_at_local",
        "publish_lateness",
        "last_error",
        "author",
        "created_at_local",
        "updated_at_local",
    ]
    readonly_fields = system_fields
    # The fieldsets show the form's own hidden ``version`` and ``opened`` fields; the model's
    # version is never edited.
    exclude = ["version"]

    class Media:
        # The body's toolbar and live preview, the warning before leaving unsaved changes,
        # and the copy of the text kept in the browser until it is saved.
        js = ["publishing/editor.js"]
        css = {"all": ["publishing/editor.css"]}

    # --- permissions ------------------------------------------------------------------
    def has_publish_permission(self, request) -> bool:
        return actions.can_publish(request.user)

    def _may_touch(self, request, obj) -> bool:
        """Return False for scheduled or live posts when the user may not publish."""
        return (
            obj is None
            or obj.status not in (S.SCHEDULED, S.PUBLISHED)
            or self.has_publish_permission(request)
        )

    def has_change_permission(self, request, obj=None):
        return super().has_change_permission(request, obj) and (
            self._may_touch(request, obj) or self._is_stale_submission(request, obj)
        )

    def _is_stale_submission(self, request, obj) -> bool:
        """Return True for a form posted against an older version of ``obj``.

        A drafter's tab on a draft that a publisher scheduled meanwhile would otherwise get a
        bare 403; let it through to the form, which refuses every stale submission with the
        conflict message (and the actions would refuse the write anyway).
        """
        if obj is None or request.method != "POST":
            return False
        submitted = request.POST.get("version", "")
        return submitted.isdigit() and submitted != str(obj.version)

    def has_delete_permission(self, request, obj=None):
        return super().has_delete_permission(request, obj) and (
            obj is None or posts.can_delete(request.user, obj)
        )

    # --- deleting ---------------------------------------------------------------------
    def get_deleted_objects(self, objs, request):
        """Refuse (on the confirmation page) a bulk delete that includes posts the user may not
        delete, e.g. posts with a publish history for anyone but a superuser."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        if any(not posts.can_delete(request.user, post) for post in objs):
            perms_needed.add(
                _("posts that were scheduled or published (only superusers may delete them)")
            )
        return deleted, counts, perms_needed, protected

    def delete_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, object_id)
        keeps = obj is not None and posts.has_history(obj)
        extra_context = {**(extra_context or {}), "keeps_history": keeps}
        return super().delete_view(request, object_id, extra_context=extra_context)

    def delete_model(self, request, obj):
        posts.delete_post(post=obj, user=request.user)

    def delete_queryset(self, request, queryset):
        for post in queryset.order_by("pk"):
            posts.delete_post(post=post, user=request.user)

    # --- the form ---------------------------------------------------------------------
    def get_fieldsets(self, request, obj=None):
        publishing_fields = ["publishing_state", "publish_at", "unpublish_at"]
        description = _("Times are in %(zone)s.") % {"zone": zone_name()}
        if self.has_publish_permission(request):
            publishing_fields.append("target_status")
        else:
            description += " " + _(
                "Scheduling and publishing need the “Can schedule and publish posts” "
                "permission: ask an editor who has it to schedule or publish this post."
            )
        return [
            (None, {"fields": ["title", "slug", "body", "version", "opened"]}),
            (
                _("Publishing"),
                {
                    "fields": publishing_fields,
                    "classes": ["publishing-panel"],
                    "description": description,
                },
            ),
            (
                _("History"),
                {
                    "fields": [
                        "published_at_local",
                        "publish_lateness",
                        "last_error",
                        "author",
                        "created_at_local",
                        "updated_at_local",
                    ],
                },
            ),
        ]

    def get_readonly_fields(self, request, obj=None):
        fields = list(self.system_fields)
        if not self.has_publish_permission(request):
            fields += ["publish_at", "unpublish_at"]
        return fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.user = request.user
        return form

    def get_formset_kwargs(self, request, obj, inline, prefix):
        """Show the publish history as it is now, also when a submitted form comes back.

        A form shown again (a conflict, an error) would list only as many events as existed
        when it was loaded; the history is read-only, so bind it to the current events, which
        after a conflict are the ones that explain it.
        """
        kwargs = super().get_formset_kwargs(request, obj, inline, prefix)
        if isinstance(inline, PublishEventInline) and "data" in kwargs and obj and obj.pk:
            data = kwargs["data"]
            events = list(kwargs["queryset"].filter(post=obj).values_list("pk", flat=True))
            data[f"{prefix}-TOTAL_FORMS"] = data[f"{prefix}-INITIAL_FORMS"] = str(len(events))
            for index, pk in enumerate(events):
                data[f"{prefix}-{index}-id"] = str(pk)
        return kwargs

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        """Show a conflict the actions found under the row lock like one the form found.

        The form refuses a stale version before anything is saved; if a colleague's change
        lands between that check and the row lock, the actions raise :class:`EditConflict`,
        the view's transaction rolls back (nothing written), and the form is shown again, now
        seeing the newer version.
        """
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except EditConflict:
            return super().changeform_view(request, object_id, form_url, extra_context)

    def save_model(self, request, obj, form, change):
        """Save the content, then carry out the status the editor chose via the actions; what
        other apps did about the change (a release it stopped) joins the save's message."""
        with hooks.telling() as said:
            self._save_and_act(request, obj, form, change)
        if said:
            outcome = getattr(request, "publishing_outcome", None) or saved_text(str(obj))
            level = max(getattr(request, "publishing_outcome_level", 0), messages.WARNING)
            self._say(request, " ".join([outcome, *said]), level)

    def _save_and_act(self, request, obj, form, change):
        """Save the content, then carry out the status the editor chose via the actions.

        ``before`` is the status the form was loaded with (its version matched, so it is still
        the post's status): a status the editor left alone is never turned into a transition.
        """
        before = form.current_status
        user = request.user
        # The version the form was loaded with; each later call expects the one just written.
        expected = form.cleaned_data.get("version") if change else None
        posts.save_post(post=obj, user=user, expected_version=expected)
        if not change:
            # Before any action: what was chosen for the new post goes live with it.
            post_added(request, obj)
        if "target_status" not in form.cleaned_data:
            return
        if before == S.SCHEDULED and obj.status == S.DRAFT:
            # A save rule took the post off schedule (reviews: the new text needs a review
            # again); what it says joins the save's message.
            return
        target = form.cleaned_data.get("target_status") or before
        publish_at = form.cleaned_data.get("publish_at")
        unpublish_at = form.cleaned_data.get("unpublish_at")
        versioned = {"user": user, "expected_version": obj.version}
        done = True
        try:
            if target == S.SCHEDULED and before != S.SCHEDULED:
                posts.schedule_post(
                    post=obj, publish_at=publish_at, unpublish_at=unpublish_at, **versioned
                )
            elif target == S.SCHEDULED:
                posts.reschedule_post(
                    post=obj, publish_at=publish_at, unpublish_at=unpublish_at, **versioned
                )
            elif target == S.DRAFT and before == S.SCHEDULED:
                posts.cancel_schedule(post=obj, **versioned)
            elif target == S.PUBLISHED and before != S.PUBLISHED:
                posts.publish_now(post=obj, **versioned)
            elif target == S.PUBLISHED:
                posts.set_unpublish_at(post=obj, unpublish_at=unpublish_at, **versioned)
            elif target == S.UNPUBLISHED and before == S.PUBLISHED:
                posts.unpublish_now(post=obj, **versioned)
            else:
                done = False
        except EditConflict:
            raise
        except PublishingError as exc:
            self._say(request, not_done_text(str(obj), str(exc)), messages.ERROR)
        else:
            if done and (target != before or obj.status == S.SCHEDULED):
                request.publishing_outcome = self._outcome(obj)

    @staticmethod
    def _say(request, text: str, level: int) -> None:
        """Make ``text`` the one message of this save, in place of "changed successfully"."""
        request.publishing_outcome = text
        request.publishing_outcome_level = level

    def _outcome(self, post: Post) -> str:
        post.refresh_from_db()
        return outcome_text(
            str(post),
            self._state(post),
            zone=timezone.get_current_timezone(),
            now=database_now(),
        )

    def _state(self, post: Post) -> PostState:
        taken_down = None
        if post.pk and post.status == S.UNPUBLISHED:
            taken_down = (
                post.events.filter(kind=PublishEvent.Kind.UNPUBLISHED)
                .order_by("-at", "-id")
                .values_list("at", flat=True)
                .first()
            )
        return PostState.of(post, taken_down_at=taken_down)

    def response_add(self, request, obj, post_url_continue=None):
        return self._response_after_action(request, obj) or super().response_add(
            request, obj, post_url_continue
        )

    def response_change(self, request, obj):
        return self._response_after_action(request, obj) or super().response_change(request, obj)

    def _response_after_action(self, request, obj):
        """Say what a publishing action did, and stay on the post after a panel button.

        The message names when the post goes out, in the editor's zone, instead of Django's
        "was changed successfully"; a plain Save still goes where Django's would.
        """
        outcome = getattr(request, "publishing_outcome", None)
        if outcome is None or IS_POPUP_VAR in request.POST:
            return None
        level = getattr(request, "publishing_outcome_level", messages.SUCCESS)
        self.message_user(request, outcome, level)
        if ACTION_BUTTON in request.POST or "_continue" in request.POST:
            return HttpResponseRedirect(reverse("admin:publishing_post_change", args=[obj.pk]))
        if "_addanother" in request.POST:
            return HttpResponseRedirect(reverse("admin:publishing_post_add"))
        return self.response_post_save_change(request, obj)

    # "View on site" of a post that is not live (instatic.view_on_site asks for it).
    off_site_response = staticmethod(off_site_response)

    def get_urls(self):
        calendar = path(
            "calendar/",
            self.admin_site.admin_view(partial(calendar_view, self)),
            name="publishing_post_calendar",
        )
        bulk = path(
            "schedule/",
            self.admin_site.admin_view(partial(admin_bulk.bulk_schedule_view, self)),
            name="publishing_post_bulk_schedule",
        )

        def view(func, **kwargs):
            return self.admin_site.admin_view(partial(func, self, **kwargs))

        revisions = [
            path(
                "<path:object_id>/revisions/",
                view(revisions_view),
                name="publishing_post_revisions",
            ),
            path(
                "<path:object_id>/revisions/compare/",
                view(compare_view),
                name="publishing_post_revision_compare",
            ),
            path(
                "<path:object_id>/revisions/<int:number>/cancel/",
                view(revision_action_view, action="cancel"),
                name="publishing_post_revision_cancel",
            ),
            path(
                "<path:object_id>/revisions/<int:number>/restore/",
                view(revision_action_view, action="restore"),
                name="publishing_post_revision_restore",
            ),
            path(
                "<path:object_id>/drafts/",
                view(draft_versions_view),
                name="publishing_post_draft_versions",
            ),
            path(
                "<path:object_id>/preview/",
                view(preview_view, action="create"),
                name="publishing_post_preview",
            ),
            path(
                "<path:object_id>/preview/revoke/",
                view(preview_view, action="revoke"),
                name="publishing_post_preview_revoke",
            ),
        ]
        site_at = [
            path("site-at/", view(site_at_view), name="publishing_post_site_at"),
            path(
                "site-at/posts/<slug:slug>/",
                view(site_at_post_view),
                name="publishing_post_site_at_post",
            ),
            path("site-at/share/", view(site_at_share_view), name="publishing_post_site_at_share"),
            path("site-at/feed/", view(site_at_feed_view), name="publishing_post_site_at_feed"),
            path(
                "site-at/sitemap.xml",
                view(site_at_sitemap_view),
                name="publishing_post_site_at_sitemap",
            ),
            path(
                "site-at/sitemap-<section>.xml",
                view(site_at_sitemap_view),
                name="publishing_post_site_at_sitemap_section",
            ),
        ]
        return [calendar, bulk, *site_at, *revisions, *super().get_urls()]

    def add_view(self, request, form_url="", extra_context=None):
        """Show the sections other apps offer before the first save (media: images)."""
        extra_context = {**(extra_context or {}), **page_context(request, None)}
        return super().add_view(request, form_url, extra_context)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """Name the post's scheduled revision, which a direct edit of the text supersedes, and
        show the sections and tools other apps add (:mod:`publishing.admin.sections`)."""
        post = self.get_object(request, object_id)
        scheduled = PostRevision.Status.SCHEDULED
        pending = selectors.pending_revision(post, scheduled) if post else None
        extra_context = {
            **(extra_context or {}),
            "scheduled_revision": pending,
            **page_context(request, post),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(description=_("Status"))
    def publishing_state(self, post: Post) -> str:
        if post.pk is None:
            text = _("Draft: not saved yet; the public does not see it")
        else:
            text = state_text(
                self._state(post), zone=timezone.get_current_timezone(), now=database_now()
            )
        return format_html('<strong class="publishing-state">{}</strong>', text)

    @admin.display(description=with_zone("Went live at"))
    def published_at_local(self, post: Post) -> str:
        return local_time(post.published_at)

    @admin.display(description=_("Lateness of the last scheduled publish"))
    def publish_lateness(self, post: Post) -> str:
        if post.pk is None:
            return "—"
        event = post.events.filter(kind=PublishEvent.Kind.PUBLISHED).order_by("-at", "-id").first()
        if event is None:
            return "—"
        return _("published by hand") if event.lateness is None else lateness_text(event.lateness)

    @admin.display(description=with_zone("Created"))
    def created_at_local(self, post: Post) -> str:
        return local_time(post.created_at) if post.pk else "—"

    @admin.display(description=with_zone("Updated"))
    def updated_at_local(self, post: Post) -> str:
        return local_time(post.updated_at) if post.pk else "—"
