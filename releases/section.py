"""The post page's "Release" section and notice: the pending release that will send it out.

Added to the post's admin page through :mod:`publishing.admin.sections`. The section names
the release, what it does to the post and when, and whether it is stopped (and why); a post
in no release gets a link to add it to one, for editors who may publish. The notice, above
the form, tells everyone who opens the post that it is in a pending release, before they
change it and so stop the release.
"""

from django.template.loader import render_to_string
from django.urls import reverse

from publishing.actions import can_publish
from releases.models import Release, ReleaseItem
from releases.stopping import pending_item_of


def release_section(request, post):
    """Return the section's HTML, or ``None`` for a user who may not publish."""
    if not can_publish(request.user):
        return None
    item = pending_item_of(post)
    last = (
        ReleaseItem.objects.filter(post=post, release__status=Release.Status.RELEASED)
        .select_related("release")
        .order_by("-release__released_at")
        .first()
    )
    context = {
        "item": item,
        "release": item.release if item else None,
        "last": last.release if last else None,
        "add_url": f"{reverse('admin:releases_release_add_posts')}?ids={post.pk}",
    }
    return render_to_string("admin/releases/release/post_section.html", context, request=request)


def release_notice(request, post):
    """Return the notice's HTML, or ``None`` for a post in no pending release."""
    item = pending_item_of(post)
    if item is None:
        return None
    context = {
        "item": item,
        "release": item.release,
        "may_open": can_publish(request.user),
    }
    return render_to_string("admin/releases/release/post_notice.html", context, request=request)
