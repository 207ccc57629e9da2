"""Watching a post: an editor who did not write it gets the emails its author gets.

The post's admin page has a "Watch" link at the top (a tool added through
:mod:`publishing.admin.sections`); it opens :func:`watch_post`, a page that says what
watching means and starts or stops it with one button, then goes back to the post. A link
to a page of its own, not a button in the post's form: the form may hold changes the editor
has not saved.

The editor's "My notifications" page lists the posts they watch (:func:`watched_section`,
added through :mod:`editors.sections`). Who may watch is asked again whenever a watcher (or
the author) is about to be emailed (:func:`may_see`): an editor who lost the right since is
not told.
"""

from django.contrib import messages
from django.contrib.admin import site
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from outbox.models import Watch
from publishing.models import Post

#: Watched posts listed on "My notifications" at most (newest first); the rest are counted.
WATCHED_SHOWN = 200


def may_watch(request, post: Post | None = None) -> bool:
    """Return True if the signed-in user may watch posts (``post``: that one): anyone the
    posts' admin lets see them (who may view them, or change them)."""
    return site.get_model_admin(Post).has_view_permission(request, post)


def may_see(user, post: Post) -> bool:
    """Return True if ``user`` may see ``post`` now, as the watch page would let them: the
    admin lets them in (active and staff) and :func:`may_watch`.

    Asked without a request (when an email is sent), so asked of one made for ``user``.
    """
    request = HttpRequest()
    request.method = "GET"
    request.user = user
    return site.has_permission(request) and may_watch(request, post)


def is_watching(user, post: Post) -> bool:
    return Watch.objects.filter(post=post, user=user).exists()


def watch_tool(request, post: Post) -> tuple[str, str] | None:
    """The post page's "Watch" (or "Watching") link, for an editor who did not write it."""
    user = request.user
    if post.author_id == user.pk or not may_watch(request):
        return None
    words = _("Watching") if is_watching(user, post) else _("Watch")
    return words, reverse("watch_post", args=[post.pk])


def watch_post(request, post_id: int):
    """Show whether the signed-in editor watches the post; start or stop it on POST."""
    if not may_watch(request):
        raise PermissionDenied
    post = get_object_or_404(Post, pk=post_id)
    back = reverse("admin:publishing_post_change", args=[post.pk])
    if request.method == "POST":
        if request.POST.get("watch") == "1":
            Watch.objects.get_or_create(post=post, user=request.user)
            messages.success(
                request,
                _(
                    "You are watching “%(title)s”: you get an email when it goes live, cannot be "
                    "published or is late."
                )
                % {"title": post.title},
            )
        else:
            Watch.objects.filter(post=post, user=request.user).delete()
            messages.success(request, _("You no longer watch “%(title)s”.") % {"title": post.title})
        return redirect(back)
    context = {
        **site.each_context(request),
        "title": _("Watch “%(title)s”") % {"title": post.title},
        "post": post,
        "back": back,
        "watching": is_watching(request.user, post),
        "email": request.user.email,
        "wrote_it": post.author_id == request.user.pk,
        "settings_url": reverse("my_notifications"),
    }
    return TemplateResponse(request, "admin/outbox/watch_post.html", context)


def watched_section(request) -> SafeString | None:
    """The "My notifications" page's list of the posts the signed-in editor watches, each
    with its state, since when, and its watch page (to stop); ``None`` for one who may not
    watch. Added through :mod:`editors.sections`."""
    if not may_watch(request):
        return None
    watches = (
        Watch.objects.filter(user=request.user)
        .select_related("post")
        .only("created_at", "post__title", "post__status")
        .order_by("-created_at", "-id")
    )
    context = {"watches": [(watch, watch.post) for watch in watches[:WATCHED_SHOWN]]}
    context["more"] = max(0, watches.count() - WATCHED_SHOWN) if context["watches"] else 0
    return render_to_string("admin/outbox/watched_posts.html", context, request=request)
