"""Which posts use which images: the index kept from the post-changed hook.

Publishing tells every change of a post (``publishing.hooks.post_changed``, in the change's
transaction). For each changed post the index is made to hold the images its body and its
pending revisions point at: a revision's text may go live later without an editor's change
(the publish job, a release), and its images must then be found. The index may name more
posts than use an image now; the embargo reads the live text of the posts it names.
"""

import logging

from django.db import transaction

from media import rules
from media.models import Image, ImageUse
from publishing.models import PENDING_REVISION, Post, PostRevision

logger = logging.getLogger(__name__)


def texts_of(post_ids: list[int]) -> dict[int, list[str]]:
    """Return each post's body and pending revisions' bodies."""
    texts: dict[int, list[str]] = {pk: [] for pk in post_ids}
    for pk, body in Post.objects.filter(pk__in=post_ids).values_list("pk", "body"):
        texts[pk].append(body)
    pending = PostRevision.objects.filter(post_id__in=post_ids, status__in=PENDING_REVISION)
    for pk, body in pending.values_list("post_id", "body"):
        texts[pk].append(body)
    return texts


def record_uses(post_ids, *, by_editor: bool = True, user=None) -> None:
    """Make the index hold the images each post in ``post_ids`` points at now.

    The publish job's changes (``by_editor`` False) put live a text whose images were
    indexed when it was written, and must not wait on rows an editor holds: nothing to do.
    """
    if not by_editor or not post_ids:
        return
    texts = texts_of(list(post_ids))
    with transaction.atomic():
        ImageUse.objects.filter(post_id__in=list(texts)).delete()
        wanted = {pk: rules.keys_in(*bodies) for pk, bodies in texts.items() if bodies}
        keys = set().union(*wanted.values()) if wanted else set()
        ids = dict(Image.objects.filter(key__in=keys).values_list("key", "pk")) if keys else {}
        ImageUse.objects.bulk_create(
            [
                ImageUse(image_id=ids[key], post_id=pk)
                for pk, found in wanted.items()
                for key in sorted(found)
                if key in ids
            ]
        )
