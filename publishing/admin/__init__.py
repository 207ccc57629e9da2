"""Publishing's admin: one module per page.

``posts`` the post's page, ``post_list`` the post list and its actions, ``events`` the
publish history, ``revisions`` a post's revisions and preview links, ``calendar`` what goes
out by day, ``bulk`` scheduling many posts at once; ``panel`` the words of the post page's
publishing panel, ``sections`` what other apps add to the post page and list, ``columns``
times in the editor's zone, ``view_on_site`` the post page's "View on site". Importing the
package registers the pages.
"""

from publishing.admin import events, posts  # noqa: F401  (register their pages)
