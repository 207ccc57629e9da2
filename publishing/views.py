"""The public site: the index of live posts, one page per post, and preview links.

Only published posts exist here; every other state is a 404, and so is a preview link that is
not valid (expired, revoked, tampered with). Both pages answer conditional
requests (``ETag`` / ``Last-Modified``) from a cheap query. Bodies were rendered when they were
saved: a page view reads the stored HTML and excerpt and never renders Markdown.
"""

from django.http import Http404
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import condition, require_safe

from coordination.clock import database_now
from publishing import paging, previews, selectors
from publishing.conf import settings


def _page_number(request) -> str:
    return request.GET.get("page") or "1"


def _live_version(request) -> selectors.LiveVersion:
    """Return the live version once per request (both conditional checks need it)."""
    if not hasattr(request, "_publishing_live_version"):
        request._publishing_live_version = selectors.live_version()
    return request._publishing_live_version


def _index_etag(request) -> str:
    return _live_version(request).etag("index", _page_number(request))


def _index_last_modified(request):
    return _live_version(request).last_change


@require_safe
@condition(etag_func=_index_etag, last_modified_func=_index_last_modified)
def index(request):
    """List live posts, newest first, a page at a time (excerpts: bodies stay in the database)."""
    number = paging.page_number(request.GET.get("page"))
    page = None
    if number is not None:
        page = selectors.live_page(number=number, per_page=int(settings.POSTS_PER_PAGE))
    if page is None:
        raise Http404("No such page.")
    entries = [{"post": post, "excerpt": post.excerpt} for post in page.object_list]
    return render(request, "publishing/index.html", {"page": page, "entries": entries})


def _post_etag(request, slug: str) -> str | None:
    updated = selectors.live_post_version(slug)
    return f"{slug}-{updated.timestamp():.6f}" if updated else None


def _post_last_modified(request, slug: str):
    return selectors.live_post_version(slug)


@require_safe
@condition(etag_func=_post_etag, last_modified_func=_post_last_modified)
def post_detail(request, slug: str):
    """Show one live post; anything not live is a 404."""
    post = get_object_or_404(selectors.live_posts().defer("body"), slug=slug)
    # Safe: sanitized by nh3 when the body was saved (publishing.rendering.render).
    context = {"post": post, "body": mark_safe(post.body_html)}
    return render(request, "publishing/post_detail.html", context)


#: Headers of a preview: no search engine indexes it, no shared cache keeps it, and no link in
#: it tells another site the preview's address (the link is the key).
PREVIEW_HEADERS = {
    "X-Robots-Tag": "noindex, nofollow",
    "Cache-Control": "private, no-store, max-age=0",
    "Referrer-Policy": "no-referrer",
}


@require_safe
def preview(request, token: str):
    """Show the next version of a post to anyone holding a valid preview link.

    Anything wrong with the link is the site's ordinary 404, raised before anything else is
    done, so a visitor cannot tell an expired link from a revoked one or a made-up one.
    """
    claim = previews.read_token(token)
    if claim is None or claim.expires_at <= database_now():
        raise Http404("No such page.")
    page = selectors.preview_page(post_id=claim.post_id, generation=claim.generation)
    if page is None:
        raise Http404("No such page.")
    # Safe: sanitized by nh3 when the post or revision was saved (publishing.rendering.render).
    context = {
        "post": page,
        "body": mark_safe(page.body_html),
        "preview": page,
        "expires_at": claim.expires_at,
    }
    response = render(request, "publishing/preview.html", context)
    for header, value in PREVIEW_HEADERS.items():
        response[header] = value
    return response
