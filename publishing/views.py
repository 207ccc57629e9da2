"""The public site: the index of live posts, one page per post, and preview links.

Only published posts exist here; every other state is a 404, and so is a preview link that is
not valid (expired, revoked, tampered with). Both pages answer conditional
requests (``ETag`` / ``Last-Modified``) from a cheap query. Bodies were rendered when they were
saved: a page view reads the stored HTML and excerpt and never renders Markdown.
"""

from urllib.parse import urlencode

from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import condition, require_safe

from coordination.clock import database_now
from publishing import paging, previews, selectors
from publishing.conf import settings
from publishing.page_bodies import page_body
from publishing.previews import PREVIEW_HEADERS
from publishing.site_at_feed import SiteAtFeed
from publishing.site_at_links import still_shown
from publishing.site_at_pages import Links, index_context, post_context, respond, slug_addresses
from publishing.site_at_sitemap import sitemap_at
from publishing.slugs import is_url_slug


def _live_version(request) -> selectors.LiveVersion:
    """Return the live version once per request (both conditional checks need it)."""
    if not hasattr(request, "_publishing_live_version"):
        request._publishing_live_version = selectors.live_version()
    return request._publishing_live_version


def _index_etag(request) -> str:
    query = request.GET
    return _live_version(request).etag("index", query.get("from", ""), query.get("page", ""))


def _index_last_modified(request):
    return _live_version(request).last_change


def index_link(key: str) -> str:
    """Return the address of the index page ``key``: ``/`` or ``/?from=<slug>``."""
    url = reverse("publishing:index")
    return url if key == selectors.FRONT else f"{url}?{urlencode({'from': key})}"


@require_safe
@condition(etag_func=_index_etag, last_modified_func=_index_last_modified)
def index(request):
    """List live posts, newest first, a page at a time (excerpts: bodies stay in the database).

    ``/`` is the front page and ``/?from=<slug>`` the page that starts with that post
    (``publishing.paging``). A link to a post that is live but no longer starts a page
    redirects to the page that lists it, and so does an old page number (``?page=N``,
    counted from the newest post, as the index was once paged); anything else is a 404.
    """
    per_page = int(settings.POSTS_PER_PAGE)
    key = request.GET.get("from")
    if key is not None:
        entry = selectors.index_entry(key) if is_url_slug(key) else None
        if entry is None:
            raise Http404("No such page.")
        holder = selectors.index_key_of(entry, per_page=per_page)
        if holder != key:
            return redirect(index_link(holder))
    else:
        number = paging.page_number(request.GET.get("page"))
        if number is None:
            raise Http404("No such page.")
        if number > 1:
            entry = selectors.index_entry_at((number - 1) * per_page)
            if entry is None:
                raise Http404("No such page.")
            return redirect(index_link(selectors.index_key_of(entry, per_page=per_page)))
        key = selectors.FRONT
    page = selectors.index_page(key=key, per_page=per_page, link=index_link)
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
    context = {"post": post, "body": page_body(post.pk, post.body_html)}
    return render(request, "publishing/post_detail.html", context)


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
    context = {
        "post": page,
        "body": page_body(claim.post_id, page.body_html, preview_until=claim.expires_at),
        "preview": page,
        "expires_at": claim.expires_at,
    }
    response = render(request, "publishing/preview.html", context)
    for header, value in PREVIEW_HEADERS.items():
        response[header] = value
    return response


def _shared_links(token: str):
    """Return what the shared link shows (``site_at_links.Showing``) and its pages' addresses;
    anything wrong is a 404."""
    showing = still_shown(token)
    if showing is None:
        raise Http404("No such page.")

    def index(number: int) -> str:
        url = reverse("publishing:site_at_shared", kwargs={"token": token})
        return url if number <= 1 else f"{url}?page={number}"

    def sitemap_section(section: str, page: int) -> str:
        kwargs = {"token": token, "section": section}
        url = reverse("publishing:site_at_shared_sitemap_section", kwargs=kwargs)
        return url if page <= 1 else f"{url}?p={page}"

    feed = reverse("publishing:site_at_shared_feed", kwargs={"token": token})
    sitemap = reverse("publishing:site_at_shared_sitemap", kwargs={"token": token})
    post = slug_addresses("publishing:site_at_shared_post", token=token)
    return showing, Links(
        index=index, post=post, feed=feed, sitemap=sitemap, sitemap_section=sitemap_section
    )


@require_safe
def site_at_shared(request, token: str):
    """The index as it will be at a shared link's moment, to anyone holding the link."""
    showing, links = _shared_links(token)
    at, page = showing.moment.at, request.GET.get("page")
    context = index_context(at, links, page=page, others=showing.others, count=showing.count)
    return respond(request, "publishing/site_at/index.html", context)


@require_safe
def site_at_shared_post(request, token: str, slug: str):
    """One post as it will be at a shared link's moment."""
    showing, links = _shared_links(token)
    at, now, others = showing.moment.at, showing.now, showing.others
    context = post_context(at, links, slug, now=now, others=others, count=showing.count)
    return respond(request, "publishing/site_at/post.html", context)


@require_safe
def site_at_shared_feed(request, token: str):
    """The Atom feed as it will be at a shared link's moment."""
    showing, links = _shared_links(token)
    return SiteAtFeed(showing.moment.at, links)(request)


@require_safe
def site_at_shared_sitemap(request, token: str, section: str | None = None):
    """The sitemap as it will be at a shared link's moment: its index, or a section's page."""
    showing, links = _shared_links(token)
    return sitemap_at(request, showing.moment.at, links, section)
