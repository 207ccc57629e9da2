"""The admin's page of a draft's earlier texts (:mod:`publishing.draft_versions`): each kept
version, who saved it and when, its changes up to the draft as it is now (the revisions'
compare, :func:`publishing.diffs.revision_diff`), and restore.

Reached from the post's change page (``admin:publishing_post_draft_versions``). Anyone who may
view the post reads its versions; restoring saves the version's text as the draft's through
:func:`publishing.posts.save_post`, with the post's version the page showed, so a colleague's
save in between is refused, not undone.
"""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext as _

from publishing import draft_versions, posts
from publishing.admin.revisions import _post, _submitted_version
from publishing.diffs import revision_diff
from publishing.exceptions import EditConflict, PublishingError
from publishing.models import DraftVersion, Post

S = Post.Status


def draft_versions_url(post: Post) -> str:
    return reverse("admin:publishing_post_draft_versions", args=[post.pk])


def draft_versions_view(model_admin, request, object_id):
    """List the draft's kept versions (``?compare=N``: N's changes up to now); on POST,
    restore version ``restore``."""
    post = _post(model_admin, request, object_id)
    may_restore = post.status in (S.DRAFT, S.UNPUBLISHED) and model_admin.has_change_permission(
        request, post
    )
    if request.method == "POST":
        if not may_restore:
            raise PermissionDenied
        return _restore(request, post)
    versions = draft_versions.versions_of(post)
    compared = None
    if request.GET.get("compare", "").isdigit():
        compared = get_object_or_404(DraftVersion, post=post, number=int(request.GET["compare"]))
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "original": post,
        "title": _("Earlier texts of “%(title)s”") % {"title": post},
        "versions": versions,
        "kept": draft_versions.KEPT,
        "compared": compared,
        "lines": revision_diff(
            old_title=compared.title,
            old_body=compared.body,
            new_title=post.title,
            new_body=post.body,
        )
        if compared
        else None,
        "may_restore": may_restore,
        "list_url": reverse("admin:publishing_post_changelist"),
        "change_url": reverse("admin:publishing_post_change", args=[post.pk]),
    }
    return TemplateResponse(request, "admin/publishing/post/draft_versions.html", context)


def _restore(request, post: Post):
    number = request.POST.get("restore", "")
    if not number.isdigit():
        raise Http404(_("No such version."))
    version = get_object_or_404(DraftVersion, post=post, number=int(number))
    post.title, post.body = version.title, version.body
    try:
        posts.save_post(post=post, user=request.user, expected_version=_submitted_version(request))
    except EditConflict as conflict:
        messages.error(request, _("%(conflict)s Nothing was changed.") % {"conflict": conflict})
        return HttpResponseRedirect(draft_versions_url(post))
    except PublishingError as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(draft_versions_url(post))
    messages.success(
        request,
        _(
            "The text of version %(number)s is the draft's again; the text it replaced is "
            "kept as a version too."
        )
        % {"number": version.number},
    )
    return HttpResponseRedirect(reverse("admin:publishing_post_change", args=[post.pk]))
