"""Admin pages that moved when reviews and releases became apps of their own.

Their addresses changed with the apps' labels (``/admin/publishing/release/…`` is
``/admin/releases/release/…``). Links already out there (review and release emails, bookmarks)
are sent on to the page's new address, its query string kept.
"""

from django.http import HttpResponsePermanentRedirect
from django.urls import re_path

#: Old admin path prefix -> new, for each moved model.
MOVED = {
    "publishing/release/": "releases/release/",
    "publishing/review/": "reviews/review/",
}


def _moved(request, old: str, rest: str):
    new = f"/admin/{MOVED[old]}{rest}"
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"{new}?{query}" if query else new)


urlpatterns = [re_path(rf"^admin/(?P<old>{old})(?P<rest>.*)$", _moved) for old in MOVED]
