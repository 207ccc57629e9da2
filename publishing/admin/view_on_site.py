"""What the admin's "View on site" does for a post that is not live: the public site has no
page for it (a 404), so an editor who may share previews is taken to a short preview of it,
and anyone else back to the post with a message saying why it is not on the site."""

from datetime import timedelta

from django.contrib import messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext as _

from publishing import previews
from publishing.models import Post

#: How long the preview link made for "View on site" works: long enough to look it over.
PREVIEW_LIFETIME = timedelta(hours=1)


def off_site_response(request, post: Post) -> HttpResponseRedirect | None:
    """Return where "View on site" of ``post`` goes if it is not live, or None if it is."""
    if post.status == Post.Status.PUBLISHED:
        return None
    if previews.can_preview(request.user):
        return HttpResponseRedirect(
            previews.preview_url(post=post, user=request.user, expires_in=PREVIEW_LIFETIME)
        )
    messages.info(
        request,
        _("“%(title)s” is not on the site: its status is “%(status)s”.")
        % {"title": post, "status": post.get_status_display()},
    )
    return HttpResponseRedirect(reverse("admin:publishing_post_change", args=[post.pk]))
