"""The post list's "Review" column: where each post's latest review stands.

Added to the post list through :func:`publishing.admin.sections.add_post_list_column`.
"""

from django.utils.translation import gettext_lazy as _

from publishing.admin.sections import ListColumn
from reviews.models import Review

#: A list cell's words for a review's status: short, as a column has room for.
WORDS = {
    Review.Status.PENDING: _("Waiting"),
    Review.Status.APPROVED: _("Approved"),
    Review.Status.REJECTED: _("Rejected"),
}


def review_cells(posts) -> dict:
    """Return the status of each post's latest review (of the post or a revision of it), by
    post id, in one query; a post never submitted is left out."""
    latest: dict[int, str] = {}
    rows = (
        Review.objects.filter(post_id__in=[post.pk for post in posts])
        .exclude(status=Review.Status.WITHDRAWN)
        .order_by("post_id", "-submitted_at", "-id")
        .values_list("post_id", "status")
    )
    for post_id, status in rows:
        latest.setdefault(post_id, status)
    return {post_id: WORDS.get(status, status) for post_id, status in latest.items()}


REVIEW_COLUMN = ListColumn(name="review", label=_("Review"), cells=review_cells)
