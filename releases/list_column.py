"""The post list's "Release" column: the pending release that will send each post out.

Added to the post list through :func:`publishing.admin.sections.add_post_list_column`.
"""

from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from coordination.wording import local_time
from publishing.admin.sections import ListColumn
from releases.stopping import pending_items


def release_cells(posts) -> dict:
    """Return a link to the pending release that holds each post, by post id, in one query;
    its title says when it goes out (in the editor's zone) or that it is a draft."""
    cells = {}
    for post_id, item in pending_items([post.pk for post in posts]).items():
        release = item.release
        when = (
            _("goes out at %(when)s") % {"when": local_time(release.release_at, seconds=False)}
            if release.release_at and release.status == release.Status.SCHEDULED
            else _("draft release: not scheduled")
        )
        cells[post_id] = format_html(
            '<a href="{}" title="{}">{}</a>',
            reverse("admin:releases_release_change", args=[release.pk]),
            when,
            release.name,
        )
    return cells


RELEASE_COLUMN = ListColumn(name="release", label=_("Release"), cells=release_cells)
