"""The sitemap of the site at a moment: the public sitemap's sections, with the posts live then.

The sections are the public ones (:mod:`publishing.sitemaps`), paged the same way (the posts
section by ranges of post ids), over the posts live at the moment
(:func:`publishing.site_at_facts.live_then`), each linked to its page at the moment. They carry
no dates: when a page of the moment will have last changed is not known now. The index is
written here rather than by Django's sitemap index view, which makes each section's address
from its name alone, and the moment's addresses carry the moment (``?at=``, a shared link's
token). Every answer carries the preview headers.
"""

from django.contrib.sitemaps import views as sitemap_views
from django.contrib.sitemaps.views import SitemapIndexItem
from django.template.response import TemplateResponse

from publishing.previews import PREVIEW_HEADERS
from publishing.site_at import apply
from publishing.site_at_facts import live_then, pages_of, read_changes
from publishing.site_at_pages import Links
from publishing.sitemaps import IndexSitemap, PostSitemap


class IndexAtSitemap(IndexSitemap):
    """The index's entry: the moment's front page."""

    def __init__(self, links: Links):
        self.links = links

    def location(self, item: str) -> str:
        return self.links.index(1)

    def lastmod(self, item: str):
        return None


class PostsAtSitemap(PostSitemap):
    """The posts section at the moment: ``posts`` (those live then), each at its page then."""

    def __init__(self, posts, links: Links):
        self.posts, self.links = posts, links

    def items(self):
        return self.posts.only("id", "slug").order_by("id")

    def last_id(self) -> int | None:
        return self.posts.order_by("-id").values_list("id", flat=True).first()

    def location(self, item) -> str:
        return self.links.post(item.slug)

    def lastmod(self, item):
        return None

    def get_latest_lastmod(self):
        return None


def sitemaps_at(at, links: Links) -> dict:
    """Return the sitemap's sections at ``at``, by name, as the public sitemap names them."""
    changes, touched = read_changes(at)
    unread = {change.post_id for change in changes} - set(touched)
    pages, _outcomes = apply(touched | (pages_of(unread) if unread else {}), changes, at)
    return {"pages": IndexAtSitemap(links), "posts": PostsAtSitemap(live_then(pages), links)}


def sitemap_at(request, at, links: Links, section: str | None = None):
    """Return the sitemap's index at ``at`` (``section`` None) or a page of one section
    (``?p=``), with the preview headers; an unknown section or page is a 404."""
    sitemaps = sitemaps_at(at, links)
    if section is None:
        listed = [
            SitemapIndexItem(request.build_absolute_uri(links.sitemap_section(name, page)), None)
            for name, site in sitemaps.items()
            for page in range(1, site.paginator.num_pages + 1)
        ]
        response = TemplateResponse(
            request,
            "sitemap_index.xml",
            {"sitemaps": listed},
            content_type="application/xml",
        )
    else:
        response = sitemap_views.sitemap(request, sitemaps, section=section)
    for header, value in PREVIEW_HEADERS.items():
        response[header] = value
    return response
