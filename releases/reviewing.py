"""Reviews of releases: what a reviewer approves of a release, and the gates that ask for it.

Publishing's reviews (:mod:`reviews.actions`) know posts and revisions; a release is a
review subject this app adds (:func:`reviews.actions.add_subject`). What a reviewer
approves is each item's post, change and exact text; a release goes out, or is scheduled,
only if a review approved it as it is now (its go-live check, :mod:`publishing.go_live`).
"""

from publishing import go_live
from publishing.diffs import revision_diff
from publishing.models import Post
from releases.models import ItemAction, Release, ReleaseItem
from reviews import actions as reviews
from reviews.models import Review
from reviews.rules import post_fingerprint, revision_fingerprint, snapshot_fingerprint

T = Review.Target
RS = Review.Status

#: Why a scheduled release went back to draft: its items changed after the approval.
SENT_BACK_NOTE = "its posts changed after it was approved; back to draft until approved"
#: Why a release does not go out at its time: its items' texts are not the approved ones.
HELD_PROBLEM = "Its posts as they are now were not approved by a reviewer."


def snapshot_of_release(release: Release) -> dict:
    """Return what a review of ``release`` keeps: each item's post, change and exact text.

    The text is what the item puts live (the post's, or its pinned revision's title and body
    with the post's slug) or, for a takedown, what it takes down (the post's now). Items
    whose post was deleted have no text: such a release cannot go out anyway.
    """
    rows = (
        ReleaseItem.objects.filter(release=release, post__isnull=False)
        .order_by("post_id")
        .values_list(
            "post_id",
            "post_title",
            "action",
            "post__title",
            "post__slug",
            "post__body",
            "revision__title",
            "revision__body",
        )
    )
    items = []
    for post_id, label, action, title, slug, body, revision_title, revision_body in rows:
        if action == ItemAction.REVISION:
            title, body = revision_title, revision_body
        items.append(
            {
                "post_id": post_id,
                "post_title": label,
                "action": action,
                "title": title,
                "slug": slug,
                "body": body,
            }
        )
    return {"items": items}


def fingerprint_of_release(release: Release) -> str:
    return snapshot_fingerprint(T.RELEASE, snapshot_of_release(release), post_id=None)


def is_release_approved(release: Release) -> bool:
    """Return True if review is off or ``release``'s items as they are now were approved."""
    return not reviews.required() or reviews.is_approved(
        target=T.RELEASE, fingerprint=fingerprint_of_release(release), release_id=release.pk
    )


def require_release_approved(release: Release) -> None:
    reviews.require_approved(
        target=T.RELEASE,
        fingerprint=fingerprint_of_release(release),
        what=f"The release “{release}”",
        release_id=release.pk,
    )


def submit(release: Release, *, user, note: str = "", reason: str = "") -> Review:
    """Submit ``release`` (locked by the caller), as its items are pinned now, for review."""
    return reviews.submit_snapshot(
        target=T.RELEASE,
        snapshot=snapshot_of_release(release),
        title=release.name,
        user=user,
        note=note,
        reason=reason,
        release_id=release.pk,
    )


def submit_items_again(release: Release, *, user) -> Review:
    """Submit ``release`` (locked by the caller) again after its items changed."""
    return submit(release, user=user, reason=SENT_BACK_NOTE)


def latest_review(release: Release) -> Review | None:
    return reviews.latest(release_id=release.pk)


def go_live_check(kind: str, ids: list[int]) -> dict[int, str]:
    """Hold a release whose items no reviewer approved as they are now (a go-live check);
    nothing when reviews are off."""
    if kind != go_live.RELEASE or not reviews.required():
        return {}
    return {pk: HELD_PROBLEM for pk in ids if not is_release_approved(Release(pk=pk))}


def rejected_texts(items: list[dict]) -> dict[tuple[int, str], Review]:
    """Return the rejection of each of a release snapshot's ``items`` whose very text a
    reviewer rejected on its own before, by ``(post id, action)``: the release's reviewer is
    shown it, so a rejected text never goes out unnoticed in a release."""
    wanted = {}
    for item in items:
        if item["action"] == ItemAction.PUBLISH:
            target = T.POST
            fingerprint = post_fingerprint(
                title=item["title"], slug=item["slug"], body=item["body"]
            )
        elif item["action"] == ItemAction.REVISION and item["title"] is not None:
            target = T.REVISION
            fingerprint = revision_fingerprint(
                post_id=item["post_id"], title=item["title"], body=item["body"]
            )
        else:
            continue
        wanted[(item["post_id"], target, fingerprint)] = (item["post_id"], item["action"])
    rejections = Review.objects.filter(
        status=RS.REJECTED, post_id__in={post_id for post_id, _, _ in wanted}
    ).select_related("decided_by")
    found = {}
    for review in rejections.order_by("decided_at"):
        key = wanted.get((review.post_id, review.target, review.fingerprint))
        if key is not None:
            found[key] = review
    return found


def lock(review: Review) -> None:
    """Lock the release ``review`` is about, so it cannot change while it is decided."""
    Release.objects.select_for_update().filter(pk=review.release_id).first()


def is_current(review: Review) -> bool:
    """Return True if the release ``review`` is about still has the items it names."""
    release = Release.objects.filter(pk=review.release_id).first()
    return release is not None and fingerprint_of_release(release) == review.fingerprint


def items_as_read(review: Review) -> list[dict]:
    """Return each item of a release's review as the reviewer reads it.

    Each has its change, its text as submitted, a diff against the live post now (a new
    revision's, or a takedown's if the live text changed since) and whether a reviewer
    rejected that very text before (:func:`rejected_texts`).
    """
    items = review.snapshot.get("items")
    if items is None:
        return []
    live = {
        post.pk: post
        for post in Post.objects.filter(pk__in=[item["post_id"] for item in items]).only(
            "title", "body", "status"
        )
    }
    rejected = rejected_texts(items)
    labels = dict(ItemAction.choices)
    shown = []
    for item in items:
        post = live.get(item["post_id"])
        diff = None
        if post is not None and item["action"] != ItemAction.PUBLISH:
            diff = revision_diff(
                old_title=post.title,
                old_body=post.body,
                new_title=item["title"],
                new_body=item["body"],
            )
        shown.append(
            {
                **item,
                "label": labels.get(item["action"], item["action"]),
                "diff": diff,
                "rejected": rejected.get((item["post_id"], item["action"])),
            }
        )
    return shown


def content(review: Review) -> dict:
    """Return what a release review's page shows: each item's change and text."""
    return {
        "release": True,
        "release_items": items_as_read(review),
        "not_kept": "items" not in review.snapshot,
    }


SUBJECT = reviews.Subject(lock=lock, is_current=is_current, content=content)


def delete_reviews_of(sender, instance: Release, **kwargs) -> None:
    """Delete a deleted release's reviews with it (a ``pre_delete`` receiver): a review holds
    its release by id only, so nothing else would."""
    Review.objects.filter(target=T.RELEASE, release_id=instance.pk).delete()
