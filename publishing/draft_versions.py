"""A draft's earlier texts: each save that changes a draft's title or body keeps the text it
replaces, so an editor can read, compare and restore what the draft said before.

Kept for drafts and unpublished posts (a live or scheduled post's texts are its revisions,
:mod:`publishing.revisions`). :func:`keep_replaced` is called by :func:`publishing.posts.save_post`
under the post's row lock, in the save's transaction: one version per save that changed the
text, never one for a save that changed only times or the slug. At most :data:`KEPT` versions
a post are kept; each new one past that deletes the oldest (one statement), so a draft saved
every minute for a week costs no more than fifty rows. Restoring a version saves its text as
the draft's through ``save_post``, which keeps the text it replaces in turn: nothing is lost
by restoring.
"""

import logging

from django.db.models import Max

from publishing.models import DraftVersion, Post

logger = logging.getLogger(__name__)

#: Versions kept a post at most; the oldest go first.
KEPT = 50


def keep_replaced(current: Post, new: Post) -> DraftVersion | None:
    """Keep ``current``'s text (the locked row) if ``new`` changes its title or body."""
    if (new.title, new.body) == (current.title, current.body):
        return None
    last = DraftVersion.objects.filter(post=current).aggregate(n=Max("number"))["n"] or 0
    version = DraftVersion.objects.create(
        post=current,
        number=last + 1,
        title=current.title,
        body=current.body,
        saved_by=current.updated_by,
        saved_at=current.updated_at,
    )
    pruned, _ = DraftVersion.objects.filter(post=current, number__lte=last + 1 - KEPT).delete()
    if pruned:
        logger.debug("post %s: %s oldest draft versions pruned", current.pk, pruned)
    return version


def versions_of(post: Post) -> list[DraftVersion]:
    """Return ``post``'s kept versions, newest first."""
    return list(DraftVersion.objects.filter(post=post).order_by("-number"))
