"""The releases' admin: put a launch together, check its items, schedule it or send it now.

Nothing here changes a release by itself: every button calls :mod:`releases.actions`, with
the release's version the page was loaded with, so a colleague's change made meanwhile is
never undone (the page says who made it and nothing is written). Posts join a release from
the post list (select them, then "Add selected posts to a release") or from a post's page;
the release's page lists its items, says of each whether it can still go out and why not,
and offers to refresh (release the post as it is now) or remove it. Times are in the
editor's zone.
"""

from functools import partial

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from coordination.clock import database_now
from coordination.wording import local_time
from publishing import actions
from publishing.admin import bulk as admin_bulk
from publishing.admin.bulk import remember_selection, selected_ids
from publishing.admin.columns import badge
from publishing.admin.site_at import site_at_link
from publishing.exceptions import EditConflict, PublishingError
from publishing.models import Post
from publishing.stale_forms import MergingFormMixin
from publishing.wall_time import WallTimeField
from releases import actions as releases
from releases import history as release_history
from releases import reviewing
from releases import stopping as release_checks
from releases.models import ItemAction, Release, ReleaseItem
from releases.rules import goes_out_on_repair
from reviews import actions as reviews

RS = Release.Status

BADGE_COLOURS = {
    RS.DRAFT: "#6c757d",
    RS.SCHEDULED: "#1f6feb",
    RS.RELEASED: "#1a7f37",
    RS.CANCELLED: "#57606a",
    "stopped": "#cf222e",
}

#: How many of a release's steps its history page shows (the newest).
HISTORY_SHOWN = 500

#: The release page's buttons: the name posted, and what the editor reads.
VERBS = {
    "schedule": _("Schedule"),
    "unschedule": _("Unschedule"),
    "release_now": _("Release now"),
    "cancel": _("Cancel the release"),
    "submit_review": _("Submit for review"),
    "refresh": _("Refresh"),
    "remove": _("Remove"),
}


def release_values(release: Release) -> dict:
    """Return what the release form edits, as stored: the base of a three-way merge."""
    return {"name": release.name, "release_at": release.release_at}


class ReleaseForm(MergingFormMixin, forms.ModelForm):
    """A release's name and time (in the editor's zone), with the version the page showed.

    A form saved after a colleague changed the release saves nothing: it comes back merged with
    their change, as a post's form does (:mod:`publishing.stale_forms`), so neither editor's
    change is lost and nothing is saved that the editor did not see.
    """

    version = forms.IntegerField(widget=forms.HiddenInput, required=False)
    opened = forms.CharField(widget=forms.HiddenInput, required=False)

    merge_fields = ("name", "release_at")
    time_fields = ("release_at",)
    opened_salt = "releases.admin.opened"
    stale = None
    opened_base = None
    merge_report = None

    class Meta:
        model = Release
        fields = ["name", "release_at"]
        field_classes = {"release_at": WallTimeField}
        labels = {"release_at": _("Goes out at")}
        help_texts = {
            "release_at": _(
                "Every item goes live together at this time, in your time zone. A draft "
                "release waits until you schedule it."
            )
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A release that went out or was called off shows its fields read-only.
        if "release_at" in self.fields:
            self.fields["release_at"].required = False
        if not self.instance.pk or "version" not in self.fields:
            return
        self.fields["version"].initial = self.instance.version
        submitted = _version(self.data) if self.is_bound else None
        self.stale = (
            releases.release_conflict(self.instance, submitted)
            if self.is_bound and submitted is not None
            else None
        )
        self.start_merge(
            post=self.instance.pk,
            version=self.instance.version,
            current=release_values(self.instance),
            stale=self.stale,
            submitted=submitted,
        )

    def full_clean(self):
        """Validate; a stale submission is merged instead and reports only the conflict."""
        super().full_clean()
        if self.stale is not None:
            message = _(
                "%(conflict)s Nothing was saved. Their change and yours are merged in the form "
                "below: check it, then save to keep it."
            )
            self.merge_stale(str(message % {"conflict": self.stale}))
            for name, value in self.merge_current.items():
                setattr(self.instance, name, value)

    def clean(self):
        cleaned = super().clean()
        self.apply_picks(cleaned)
        return cleaned


class ReleaseChoiceField(forms.ModelChoiceField):
    """A pending release, named with when it goes out (in the editor's zone)."""

    def label_from_instance(self, release: Release) -> str:
        if release.status == RS.SCHEDULED:
            return _("%(name)s (goes out at %(when)s)") % {
                "name": release.name,
                "when": local_time(release.release_at, seconds=False),
            }
        return _("%(name)s (draft)") % {"name": release.name}


class AddToReleaseForm(forms.Form):
    """Which pending release the chosen posts join, and what it does to them."""

    release = ReleaseChoiceField(
        queryset=Release.objects.none(), label=_("Release"), empty_label=None
    )
    action = forms.ChoiceField(
        label=_("What the release does"),
        choices=[("", _("Publish drafts, put live posts' new revisions live"))]
        + [(ItemAction.UNPUBLISH, ItemAction.UNPUBLISH.label)],
        required=False,
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["release"].queryset = Release.objects.filter(
            status__in=releases.PENDING
        ).order_by("release_at", "name")


def _version(data) -> int | None:
    """Return the version a page or form was loaded with (``None``: it carries none)."""
    value = data.get("version", "")
    return int(value) if str(value).isdigit() else None


def _release_state(release: Release) -> tuple[str, str]:
    """Return the badge key and words for ``release``'s state."""
    if release.status == RS.SCHEDULED and release.problem:
        return "stopped", str(_("Stopped: needs you"))
    return release.status, release.get_status_display()


class ReleaseAdmin(admin.ModelAdmin):
    """Releases, for editors who may publish."""

    form = ReleaseForm
    list_display = ["name", "state_badge", "goes_out", "item_count", "owner"]
    list_filter = ["status"]
    search_fields = ["name"]
    # The form's own hidden ``version``; the model's version is never edited.
    exclude = ["version"]
    fieldsets = [(None, {"fields": ["name", "release_at", "version", "opened"]})]
    change_form_template = "admin/releases/release/change_form.html"

    # --- who may do what ----------------------------------------------------------------
    def _may_publish(self, request) -> bool:
        return actions.can_publish(request.user)

    def has_module_permission(self, request):
        return self._may_publish(request)

    def has_view_permission(self, request, obj=None):
        return self._may_publish(request)

    def has_add_permission(self, request):
        return self._may_publish(request)

    def has_change_permission(self, request, obj=None):
        return self._may_publish(request) and (obj is None or obj.is_pending)

    def has_delete_permission(self, request, obj=None):
        return False  # a release is cancelled, and its record kept

    # --- the list -----------------------------------------------------------------------
    def get_queryset(self, request):
        return super().get_queryset(request).select_related("owner").annotate(n=Count("items"))

    @admin.display(description=_("State"), ordering="status")
    def state_badge(self, release: Release) -> str:
        key, label = _release_state(release)
        return badge("release-state", key, BADGE_COLOURS[key], label, title=release.problem)

    @admin.display(description=_("Goes out at"), ordering="release_at")
    def goes_out(self, release: Release) -> str:
        if release.status == RS.RELEASED:
            return local_time(release.released_at, seconds=False)
        if release.release_at is None:
            return "—"
        return local_time(release.release_at, seconds=False)

    @admin.display(description=_("Posts"))
    def item_count(self, release: Release) -> int:
        return release.n

    # --- the page -----------------------------------------------------------------------
    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        if not change:
            created = releases.create_release(
                name=data["name"], release_at=data.get("release_at"), user=request.user
            )
            obj.pk = created.pk
            return
        releases.edit_release(
            release=obj,
            name=data["name"],
            release_at=data.get("release_at"),
            user=request.user,
            expected_version=data.get("version"),
        )

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        """Show what the actions refuse (a colleague's change, a time that cannot be) as the
        page's message, with nothing written."""
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except (EditConflict, PublishingError) as refused:
            messages.error(request, _("%(why)s Nothing was changed.") % {"why": refused})
            target = (
                reverse("admin:releases_release_change", args=[object_id])
                if object_id
                else reverse("admin:releases_release_add")
            )
            return HttpResponseRedirect(target)

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        context["show_save_and_add_another"] = False
        return super().render_change_form(request, context, add, change, form_url, obj)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        release = self.get_object(request, object_id)
        extra = {}
        if release is not None:
            extra = {
                "items": release_checks.item_states(release),
                "release_state": _release_state(release)[1],
                "verbs": self._verbs(release),
                "act_url": reverse("admin:releases_release_act", args=[release.pk]),
                "posts_url": reverse("admin:publishing_post_changelist"),
                "time_zone_name": timezone.get_current_timezone_name(),
                "review": reviewing.latest_review(release) if reviews.required() else None,
                "review_required": reviews.required(),
                "approved": reviewing.is_release_approved(release),
                "site_at_url": site_at_link(release.release_at) if release.release_at else "",
            }
        return super().change_view(request, object_id, form_url, {**extra, **(extra_context or {})})

    def history_view(self, request, object_id, extra_context=None):
        """Show the release's steps, newest first, each time in the reader's zone."""
        release = self.get_object(request, object_id)
        if release is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_view_permission(request, release):
            raise PermissionDenied
        steps = [
            (event, release_history.describe(event))
            for event in release.events.order_by("-at", "-id")[:HISTORY_SHOWN]
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": release,
            "title": _("History: %(name)s") % {"name": release},
            "steps": steps,
            "time_zone_name": timezone.get_current_timezone_name(),
            "more": release.events.count() > HISTORY_SHOWN,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/releases/release/history.html", context)

    def _verbs(self, release: Release) -> list[tuple[str, str]]:
        if release.status == RS.DRAFT:
            names = ["schedule", "release_now", "cancel"]
            if reviews.required() and not reviewing.is_release_approved(release):
                # Scheduling and sending out need the approval first: not offered.
                names = ["submit_review", "cancel"]
        elif release.status == RS.SCHEDULED:
            names = ["release_now", "unschedule", "cancel"]
        else:
            names = []
        return [(name, VERBS[name]) for name in names]

    def get_urls(self):
        def view(func):
            return self.admin_site.admin_view(partial(func, self))

        return [
            path("<int:object_id>/act/", view(act_view), name="releases_release_act"),
            path("add-posts/", view(add_posts_view), name="releases_release_add_posts"),
            *super().get_urls(),
        ]


def act_view(model_admin, request, object_id: int):
    """Carry out one of the release page's buttons (POST), then show the page again."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    release = get_object_or_404(Release, pk=object_id)
    verb = request.POST.get("verb", "")
    version = _version(request.POST)
    user = request.user
    page = reverse("admin:releases_release_change", args=[release.pk])
    try:
        if verb in ("refresh", "remove"):
            item = get_object_or_404(ReleaseItem, pk=request.GET.get("item", ""), release=release)
            past_due = request.POST.get("past_due", "")
            if past_due not in ("send", "hold") and _goes_out_on_repair(release):
                return _ask_past_due(model_admin, request, release, item, verb)
            hold = past_due == "hold"
            if verb == "refresh":
                seen = request.GET.get("seen", "")
                releases.refresh_item(
                    item=item,
                    user=user,
                    seen_post_version=int(seen) if seen.isdigit() else None,
                    hold=hold,
                )
                done = _("“%(title)s” will go out as it is now.") % {"title": item.post_title}
            else:
                releases.remove_item(item=item, user=user, hold=hold)
                done = _("“%(title)s” was taken out of the release.") % {"title": item.post_title}
            if hold:
                done += " " + _("The release waits as a draft: schedule it again when ready.")
        elif verb == "schedule":
            if release.release_at is None:
                raise PublishingError(_("Set the time it goes out at, save, then schedule it."))
            releases.schedule_release(
                release=release, release_at=release.release_at, user=user, expected_version=version
            )
            done = _("Scheduled: every item goes out together at %(when)s.") % {
                "when": local_time(release.release_at)
            }
        elif verb == "submit_review":
            releases.submit_release(release=release, user=user)
            done = _("Submitted for review: the reviewers have been told.")
        elif verb == "unschedule":
            releases.unschedule_release(release=release, user=user, expected_version=version)
            done = _("Unscheduled: the release waits as a draft.")
        elif verb == "release_now":
            releases.release_now(release=release, user=user, expected_version=version)
            done = _("Released: every item went out together.")
        elif verb == "cancel":
            releases.cancel_release(release=release, user=user, expected_version=version)
            done = _("Cancelled: none of its items goes out, and its posts are free again.")
        else:
            return HttpResponseRedirect(page)
    except (EditConflict, PublishingError, PermissionDenied) as refused:
        messages.error(request, _("%(why)s Nothing was changed.") % {"why": refused})
    else:
        messages.success(request, done)
    return HttpResponseRedirect(page)


def _goes_out_on_repair(release: Release) -> bool:
    return goes_out_on_repair(
        status=release.status,
        problem=release.problem,
        release_at=release.release_at,
        now=database_now(),
    )


def _ask_past_due(model_admin, request, release: Release, item: ReleaseItem, verb: str):
    """Ask before a repair of a stopped release past its time sends it out at once."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": Release._meta,
        "original": release,
        "item": item,
        "verb": verb,
        "title": _("Send “%(name)s” now?") % {"name": release},
        "due": local_time(release.release_at, seconds=False),
        "act_url": request.get_full_path(),
        "page_url": reverse("admin:releases_release_change", args=[release.pk]),
        "version": request.POST.get("version", ""),
    }
    return TemplateResponse(request, "admin/releases/release/past_due.html", context)


@admin.action(description=_("Add selected posts to a release"), permissions=["publish"])
def add_to_release_action(model_admin, request, queryset):
    """Ask which release the selected posts join (a page of its own); a post list action."""
    ids = queryset.values_list("pk", flat=True)[: admin_bulk.MOST]
    url = admin_bulk.selection_url(request, "admin:releases_release_add_posts", ids)
    return HttpResponseRedirect(url)


def add_posts_view(model_admin, request):
    """Ask which release the chosen posts join (GET), then add each of them (POST)."""
    if not actions.can_publish(request.user):
        raise PermissionDenied
    ids = selected_ids(request)
    chosen = list(Post.objects.filter(pk__in=ids).order_by("title"))
    form = AddToReleaseForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid() and chosen:
        release = form.cleaned_data["release"]
        action = form.cleaned_data["action"] or None
        added, refused = 0, []
        for post in chosen:
            try:
                releases.add_item(release=release, post=post, action=action, user=request.user)
                added += 1
            except (PublishingError, PermissionDenied) as why:
                refused.append(str(why))
        if added:
            messages.success(
                request,
                ngettext(
                    "%(n)d post added to “%(release)s”.",
                    "%(n)d posts added to “%(release)s”.",
                    added,
                )
                % {"n": added, "release": release},
            )
        for why in refused:
            messages.error(request, why)
        return HttpResponseRedirect(reverse("admin:releases_release_change", args=[release.pk]))
    held = {
        pk: item.release
        for pk, item in release_checks.pending_items(post.pk for post in chosen).items()
    }
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": Release._meta,
        "title": _("Add to a release"),
        "rows": [(post, held.get(post.pk)) for post in chosen],
        "selection": remember_selection(request, ids),
        "form": form,
        "add_url": reverse("admin:releases_release_add"),
    }
    return TemplateResponse(request, "admin/releases/release/add_posts.html", context)


admin.site.register(Release, ReleaseAdmin)
