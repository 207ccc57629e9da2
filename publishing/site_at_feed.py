"""The Atom feed of the site at a moment: the newest posts live then, as the public feed
would list them, with the preview headers."""

from django.utils.feedgenerator import Atom1Feed

from publishing.conf import settings
from publishing.feeds import LatestPostsFeed
from publishing.previews import PREVIEW_HEADERS
from publishing.site_at_facts import bodies_of
from publishing.site_at_pages import Links, newest_at
from publishing.validation import xml_text


class SiteAtFeed(LatestPostsFeed):
    """The public feed's entries at ``at``; links go to the moment's pages at ``links``."""

    feed_type = Atom1Feed
    subtitle = "The latest posts, as they will be."

    def __init__(self, at, links: Links):
        super().__init__()
        self.at, self.links = at, links

    def link(self) -> str:
        return self.links.index(1)

    def items(self):
        pages, _plan = newest_at(self.at, int(settings.FEED_SIZE))
        bodies = bodies_of(pages)
        return [(page, bodies.get(page.post_id, "")) for page in pages]

    def item_title(self, item) -> str:
        return xml_text(item[0].title)

    def item_description(self, item) -> str:
        return xml_text(item[1])

    def item_link(self, item) -> str:
        return self.links.post(item[0].slug)

    def item_pubdate(self, item):
        return item[0].published_at

    def item_updateddate(self, item):
        return item[0].published_at

    def item_author_name(self, item) -> str:
        return self.title

    def __call__(self, request, *args, **kwargs):
        response = super().__call__(request, *args, **kwargs)
        for header, value in PREVIEW_HEADERS.items():
            response[header] = value
        return response
