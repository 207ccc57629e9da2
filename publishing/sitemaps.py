"""``sitemap.xml``: the index and every live post."""

from django.contrib.sitemaps import Sitemap
from django.urls import reverse

from publishing import selectors
from publishing.models import Post


class IndexSitemap(Sitemap):
    changefreq = "hourly"
    priority = 1.0

    def items(self):
        return ["publishing:index"]

    def location(self, item: str) -> str:
        return reverse(item)

    def lastmod(self, item: str):
        return selectors.live_version().last_change


class PostSitemap(Sitemap):
    changefreq = "weekly"
    priority = 0.6
    limit = 5000

    def items(self):
        return selectors.live_posts().only("slug", "updated_at").order_by("id")

    def lastmod(self, item: Post):
        return item.updated_at


SITEMAPS = {"pages": IndexSitemap, "posts": PostSitemap}
