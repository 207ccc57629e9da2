"""The Atom feed of live posts."""

from django.contrib.syndication.views import Feed
from django.urls import reverse_lazy
from django.utils.feedgenerator import Atom1Feed

from publishing import selectors
from publishing.conf import settings
from publishing.models import Post


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
        return item.title

    def item_description(self, item: Post) -> str:
        return item.body_html  # sanitized when the body was saved

    def item_pubdate(self, item: Post):
        return item.published_at

    def item_updateddate(self, item: Post):
        return item.updated_at

    def item_author_name(self, item: Post) -> str:
        """Return the author's full name, else the site's: a login name is half a password."""
        if item.author_id is not None and item.author.get_full_name():
            return item.author.get_full_name()
        return self.title
