"""The Atom feed of live posts.

Every text it takes from a post or a user goes through :func:`validation.xml_text`: the
actions refuse characters XML 1.0 cannot carry, but one stored before (or written some
other way) must not make the feed fail for every reader.
"""

from django.contrib.syndication.views import Feed
from django.urls import reverse_lazy
from django.utils.feedgenerator import Atom1Feed

from publishing import selectors
from publishing.conf import settings
from publishing.models import Post
from publishing.validation import xml_text


class LatestPostsFeed(Feed):
    """The newest live posts; titles are plain text, bodies sanitized HTML."""

    feed_type = Atom1Feed
    title = "Instatic"
    subtitle = "The latest posts."
    link = reverse_lazy("publishing:index")

    def items(self):
        posts = selectors.live_posts().select_related("author").defer("body")
        return posts[: int(settings.FEED_SIZE)]

    def item_title(self, item: Post) -> str:
        return xml_text(item.title)

    def item_description(self, item: Post) -> str:
        return xml_text(item.body_html)  # sanitized when the body was saved

    def item_pubdate(self, item: Post):
        return item.published_at

    def item_updateddate(self, item: Post):
        return item.updated_at

    def item_author_name(self, item: Post) -> str:
        """Return the author's full name, else the site's: a login name is half a password."""
        name = item.author.get_full_name() if item.author_id is not None else ""
        return xml_text(name) if xml_text(name).strip() else self.title
