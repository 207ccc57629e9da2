"""Schedule or reschedule many posts at once, from the post list.

The list's action "Schedule or reschedule selected posts" opens a page of its own: one publish
time (and an optional unpublish time) in the editor's zone, read by the same field as a single
post's form (:class:`publishing.wall_time.WallTimeField`: a time the clocks skip is refused
with the time to enter instead, one they pass twice asks which of the two is meant). Each post
then goes through the same action a single post's form calls (:func:`plan`, then
:mod:`publishing.posts`), in its own transaction, so one post that cannot be scheduled (it is
live, it cannot be published) is named and the others are scheduled.
"""

import enum
import secrets
from datetime import datetime

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from publishing import posts
from publishing.actions import can_publish
from publishing.exceptions import PublishingError
from publishing.models import Post
from publishing.wall_time import WallTimeField

S = Post.Status

#: How many posts one bulk change takes (the list's selection is capped to this too).
MOST = 1000
SELECTION = "publishing.selection."


class Step(enum.StrEnum):
    """What a bulk schedule does to one post, by its status."""

    SCHEDULE = "schedule"
    RESCHEDULE = "reschedule"
    REFUSE = "refuse"


def plan(status: str) -> Step:
    """Return what scheduling a post of ``status`` at a new time means: a pure rule."""
    if status in (S.DRAFT, S.UNPUBLISHED):
        return Step.SCHEDULE
    if status == S.SCHEDULED:
        return Step.RESCHEDULE
    return Step.REFUSE


class BulkScheduleForm(forms.Form):
    """One publish time and an optional unpublish time, in the editor's zone."""

    publish_at = WallTimeField(label=_("Goes live at"))
    unpublish_at = WallTimeField(
        label=_("Taken down at"),
        required=False,
        help_text=_("Optional: when the posts are taken down again."),
    )


def remember_selection(request, ids) -> str:
    """Keep a list's selection in the session; return the key its page is opened with.

    A thousand ids would not fit in a URL (servers refuse request lines over about 4 KB).
    """
    key = secrets.token_urlsafe(9)
    request.session[f"{SELECTION}{key}"] = [int(pk) for pk in list(ids)[:MOST]]
    return key


def selected_ids(request) -> list[int]:
    """Return the post ids a page was opened with: a kept selection, or ``ids`` (a few, by
    link), at most :data:`MOST`."""
    source = request.POST if request.method == "POST" else request.GET
    key = source.get("selection", "")
    if key:
        return list(request.session.get(f"{SELECTION}{key}", []))[:MOST]
    return [int(pk) for pk in source.get("ids", "").split(",") if pk.strip().isdigit()][:MOST]


def selection_url(request, name: str, ids) -> str:
    """Return the URL of page ``name`` for the list selection ``ids``."""
    return f"{reverse(name)}?selection={remember_selection(request, ids)}"


def _apply(post: Post, step: Step, *, publish_at: datetime, unpublish_at, user) -> None:
    if step == Step.SCHEDULE:
        posts.schedule_post(post=post, publish_at=publish_at, unpublish_at=unpublish_at, user=user)
    elif step == Step.RESCHEDULE:
        posts.reschedule_post(
            post=post, publish_at=publish_at, unpublish_at=unpublish_at, user=user
        )
    else:
        raise PublishingError(
            _("“%(title)s” is live: a new text goes live as a revision.") % {"title": post}
        )


def bulk_schedule_view(model_admin, request):
    """Ask for the time (GET), then schedule or reschedule each chosen post (POST)."""
    if not can_publish(request.user):
        raise PermissionDenied
    ids = selected_ids(request)
    chosen = list(Post.objects.filter(pk__in=ids).order_by("title", "pk"))
    form = BulkScheduleForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and chosen and form.is_valid():
        done = {Step.SCHEDULE: 0, Step.RESCHEDULE: 0}
        for post in chosen:
            step = plan(post.status)
            try:
                _apply(
                    post,
                    step,
                    publish_at=form.cleaned_data["publish_at"],
                    unpublish_at=form.cleaned_data["unpublish_at"],
                    user=request.user,
                )
            except (PublishingError, PermissionDenied) as why:
                messages.error(request, _("“%(title)s”: %(why)s") % {"title": post, "why": why})
            else:
                done[step] += 1
        if done[Step.SCHEDULE]:
            n = done[Step.SCHEDULE]
            messages.success(
                request, ngettext("%(n)d post scheduled.", "%(n)d posts scheduled.", n) % {"n": n}
            )
        if done[Step.RESCHEDULE]:
            n = done[Step.RESCHEDULE]
            messages.success(
                request,
                ngettext("%(n)d post rescheduled.", "%(n)d posts rescheduled.", n) % {"n": n},
            )
        return HttpResponseRedirect(reverse("admin:publishing_post_changelist"))
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": Post._meta,
        "title": _("Schedule or reschedule posts"),
        "rows": [(post, plan(post.status)) for post in chosen],
        "selection": remember_selection(request, ids),
        "form": form,
        "media": model_admin.media + form.media,
        "list_url": reverse("admin:publishing_post_changelist"),
    }
    return TemplateResponse(request, "admin/publishing/post/bulk_schedule.html", context)
