"""Releases on the site at a moment: each item's change at its release's time.

A change source of :mod:`publishing.site_at`. A scheduled release due by the moment sends
every item's change at its time (after the publish job's own changes of that instant); a
stopped release, or one the go-live checks hold (reviews), sends none, each with why.
"""

from datetime import datetime

from publishing import go_live
from publishing.site_at import NEW_TEXT, ORDER, PUBLISH, UNPUBLISH, Change
from releases.models import ItemAction, Release, ReleaseItem

KINDS = {
    ItemAction.PUBLISH: PUBLISH,
    ItemAction.UNPUBLISH: UNPUBLISH,
    ItemAction.REVISION: NEW_TEXT,
}


def changes_by(moment: datetime) -> list[Change]:
    """Return the items' changes of the scheduled releases due by ``moment`` (two queries,
    and the go-live checks')."""
    releases = {
        pk: (name, at, problem)
        for pk, name, at, problem in Release.objects.filter(
            status=Release.Status.SCHEDULED, release_at__lte=moment
        ).values_list("pk", "name", "release_at", "problem")
    }
    if not releases:
        return []
    held = go_live.why_not(go_live.RELEASE, list(releases))
    items = ReleaseItem.objects.filter(release_id__in=list(releases), post__isnull=False)
    changes = []
    columns = (
        "release_id",
        "post_id",
        "action",
        "revision_id",
        "revision__title",
        "revision__excerpt",
    )
    for release_id, post_id, action, revision, title, excerpt in items.values_list(*columns):
        name, at, problem = releases[release_id]
        why = f"the release is stopped: {problem}" if problem else held.get(release_id, "")
        text = {"title": title, "excerpt": excerpt, "revision": revision}
        changes.append(
            Change(
                at,
                ORDER["other"],
                post_id,
                KINDS[action],
                f"the release “{name}”",
                **(text if action == ItemAction.REVISION else {}),
                why_not=why,
            )
        )
    return changes
