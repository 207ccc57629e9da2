"""The admin's revisions page of a post: scheduled revisions, their history, compare, restore,
and preview links.

Reached from the post's change page (``admin:publishing_post_revisions``). Anyone who may view
the post sees its revisions; scheduling, cancelling and restoring need the publish permission
and handing out or revoking preview links the change permission: the actions check both, the
page only hides what the user could not do. Every form that writes carries the post's version
as the page showed it, so a colleague's change in between is refused, not undone.
"""

from datetime import timedelta

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from coordination.clock import database_now
from publishing import actions, go_live, previews, revisions, selectors
from publishing.diffs import revision_diff
from publishing.exceptions import EditConflict, InvalidSchedule, PublishingError
from publishing.forms import PreviewLinkForm, RevisionForm
from publishing.live_spans import live_spans
from publishing.models import Post, PostRevision
from publishing.words import moment_text, relative_text

S = Post.Status
R = PostRevision.Status


def _post(model_admin, request, object_id) -> Post:
    post = model_admin.get_object(request, object_id)
    if post is None:
        raise Http404(_("No such post."))
    if not model_admin.has_view_or_change_permission(request, post):
        raise PermissionDenied
    return post


def revisions_url(post: Post) -> str:
    return reverse("admin:publishing_post_revisions", args=[post.pk])


def _submitted_version(request_or_data) -> int | None:
    data = getattr(request_or_data, "POST", request_or_data)
    value = data.get("version", "")
    return int(value) if value.isdigit() else None


def current_revision_values(post: Post) -> dict:
    """Return what the schedule form starts from: the pending revision, or the live text."""
    pending = selectors.pending_revision(post)
    source = pending or post
    return {
        "title": source.title,
        "body": source.body,
        "publish_at": pending.publish_at if pending is not None else None,
    }


def _revision_form(request, post: Post) -> RevisionForm:
    data = request.POST if request.method == "POST" else None
    return RevisionForm(data, post=post, current=current_revision_values(post))


def revisions_view(model_admin, request, object_id):
    """Show the post's revisions; on POST, schedule a new one from the form."""
    post = _post(model_admin, request, object_id)
    may_publish = actions.can_publish(request.user)
    form = None
    if request.method == "POST" and not may_publish:
        raise PermissionDenied
    if post.status == S.PUBLISHED and may_publish:
        form = _revision_form(request, post)
        if form.is_bound and form.is_valid():
            try:
                return _schedule(request, post, form)
            except EditConflict:
                # A change landed between the form's check and the row lock: nothing was
                # written; merge the submission with it like any stale one.
                post = _post(model_admin, request, object_id)
                form = _revision_form(request, post)
                form.is_valid()
            except _NotScheduled:
                pass
    elif request.method == "POST":
        # Taken down since the page was opened: keep the editor's text on the page to copy.
        form = _revision_form(request, post)
        form.is_valid()
        form.add_error(
            None,
            _(
                "“%(title)s” is %(status)s now: revisions are scheduled for live posts only. "
                "Nothing was scheduled; copy your text from below and edit the post itself."
            )
            % {"title": post, "status": post.get_status_display()},
        )
    revisions = list(selectors.revisions_of(post))
    spans = live_spans(
        revisions,
        post_is_live=post.status == S.PUBLISHED,
        live_title=post.title,
        live_body=post.body,
    )
    for revision in revisions:
        revision.live_span = spans.get(revision.number)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "original": post,
        "title": _("Revisions of “%(title)s”") % {"title": post},
        "zone_name": timezone.get_current_timezone_name(),
        "revisions": revisions,
        "form": form,
        "may_publish": may_publish,
        "may_preview": previews.can_preview(request.user),
        "needs_approval": go_live.editor_notice(go_live.REVISION),
        "preview_form": PreviewLinkForm(),
        "preview_link": request.session.pop(_preview_key(post), None),
        "change_url": reverse("admin:publishing_post_change", args=[post.pk]),
        "list_url": reverse("admin:publishing_post_changelist"),
    }
    return TemplateResponse(request, "admin/publishing/post/revisions.html", context)


class _NotScheduled(Exception):
    """The actions refused the revision; the form holds why."""


def _schedule(request, post: Post, form: RevisionForm):
    """Schedule the form's revision and redirect; raise :class:`EditConflict` when stale.

    Other refusals are put on the form and raise :class:`_NotScheduled` to show it again.
    """
    data = form.cleaned_data
    try:
        revision = revisions.schedule_revision(
            post=post,
            title=data["title"],
            body=data["body"],
            publish_at=data["publish_at"],
            user=request.user,
            expected_version=data["version"],
        )
    except EditConflict:
        raise
    except InvalidSchedule as exc:
        for field, message in exc.errors.items():
            form.add_error(field if field in form.fields else None, message)
        raise _NotScheduled from exc
    except PublishingError as exc:
        form.add_error(None, str(exc))
        raise _NotScheduled from exc
    now = database_now()
    messages.success(
        request,
        _("Revision %(number)s of “%(title)s” goes live %(when)s, %(relative)s.")
        % {
            "number": revision.number,
            "title": post,
            "when": moment_text(revision.publish_at, timezone.get_current_timezone(), now),
            "relative": relative_text(revision.publish_at, now),
        },
    )
    return HttpResponseRedirect(revisions_url(post))


def revision_action_view(model_admin, request, object_id, number: int, action: str):
    """Cancel (or discard) a pending revision, or restore an old one as a new draft."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    post = _post(model_admin, request, object_id)
    revision = get_object_or_404(PostRevision, post=post, number=number)
    act = {"cancel": revisions.cancel_revision, "restore": revisions.restore_revision}[action]
    try:
        done = act(
            revision=revision, user=request.user, expected_version=_submitted_version(request)
        )
    except EditConflict as conflict:
        messages.error(request, _("%(conflict)s Nothing was changed.") % {"conflict": conflict})
    except PublishingError as exc:
        messages.error(request, str(exc))
    else:
        if action == "cancel":
            text = _("Revision %(number)s was cancelled; it will not go live.")
        else:
            text = _(
                "Revision %(source)s was restored as draft revision %(number)s: check it "
                "below and schedule it."
            )
        messages.success(request, text % {"number": done.number, "source": revision.number})
    return HttpResponseRedirect(revisions_url(post))


def compare_view(model_admin, request, object_id):
    """Show the line diff of two revisions, ``?a=N&b=M`` (by number, older first)."""
    post = _post(model_admin, request, object_id)
    try:
        numbers = sorted({int(request.GET["a"]), int(request.GET["b"])})
    except (KeyError, ValueError):
        messages.error(request, _("Choose two revisions to compare."))
        return HttpResponseRedirect(revisions_url(post))
    found = {r.number: r for r in PostRevision.objects.filter(post=post, number__in=numbers)}
    if len(numbers) != 2 or len(found) != 2:
        messages.error(request, _("Choose two different revisions of this post to compare."))
        return HttpResponseRedirect(revisions_url(post))
    old, new = found[numbers[0]], found[numbers[1]]
    live_number = selectors.live_revision_number(post)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "original": post,
        "title": _("Revision %(old)s compared with revision %(new)s")
        % {"old": old.number, "new": new.number},
        "old": old,
        "new": new,
        "old_label": _revision_label(old, live_number),
        "new_label": _revision_label(new, live_number),
        "lines": revision_diff(
            old_title=old.title, old_body=old.body, new_title=new.title, new_body=new.body
        ),
        "revisions_url": revisions_url(post),
        "list_url": reverse("admin:publishing_post_changelist"),
        "change_url": reverse("admin:publishing_post_change", args=[post.pk]),
    }
    return TemplateResponse(request, "admin/publishing/post/revision_compare.html", context)


def _revision_label(revision: PostRevision, live_number: int | None) -> str:
    """Name where a revision is for the compare page: live now, was live, or its status."""
    if revision.number == live_number:
        return _("live now")
    if revision.status == R.PUBLISHED:
        return _("was live")
    return revision.get_status_display().lower()


def _preview_key(post: Post) -> str:
    return f"publishing:preview-link:{post.pk}"


def preview_view(model_admin, request, object_id, action: str):
    """Make a preview link (shown once, on the revisions page) or revoke all of them.

    Revoking asks first: anything but a POST with ``confirmed=yes`` shows the confirmation.
    """
    if action == "revoke" and not (request.method == "POST" and request.POST.get("confirmed")):
        return _revoke_confirmation(model_admin, request, _post(model_admin, request, object_id))
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    post = _post(model_admin, request, object_id)
    try:
        if action == "revoke":
            previews.revoke_preview_links(
                post=post, user=request.user, expected_version=_submitted_version(request)
            )
            messages.success(request, _("Every earlier preview link of this post is now dead."))
        else:
            form = PreviewLinkForm(request.POST)
            if not form.is_valid():
                messages.error(request, _("Choose how long the link works."))
                return HttpResponseRedirect(revisions_url(post))
            hours = form.cleaned_data["hours"]
            path = previews.preview_url(
                post=post, user=request.user, expires_in=timedelta(hours=hours)
            )
            # Shown once on the page after the redirect, not put in the URL or a message log.
            request.session[_preview_key(post)] = {
                "url": request.build_absolute_uri(path),
                "hours": hours,
            }
    except EditConflict as conflict:
        messages.error(request, _("%(conflict)s Nothing was changed.") % {"conflict": conflict})
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    return HttpResponseRedirect(revisions_url(post) + "#preview")


def _revoke_confirmation(model_admin, request, post: Post):
    """Ask before every preview link of ``post`` stops working (a page, no JavaScript needed)."""
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "original": post,
        "title": _("Revoke all preview links of “%(title)s”?") % {"title": post},
        "version": _submitted_version(request.POST if request.method == "POST" else request.GET),
        "revisions_url": revisions_url(post),
        "change_url": reverse("admin:publishing_post_change", args=[post.pk]),
        "list_url": reverse("admin:publishing_post_changelist"),
    }
    return TemplateResponse(request, "admin/publishing/post/preview_revoke.html", context)
