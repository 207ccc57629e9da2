"""The release rules as tables: what may be added to a release, and whether an item still applies.

Pure functions (releases.rules): no database, no clock.
"""

from datetime import UTC, datetime, timedelta

import pytest

from publishing.models import PostStatus, RevisionStatus
from releases.models import ItemAction
from releases.rules import (
    ItemFacts,
    PostFacts,
    RevisionFacts,
    action_for,
    add_problem,
    item_problem,
    release_problem,
)

A = ItemAction
S = PostStatus
R = RevisionStatus
NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def post(status, version=4, **kw):
    return PostFacts(status=status, version=version, **kw)


@pytest.mark.parametrize(
    ("status", "has_revision", "expected"),
    [
        (S.DRAFT, False, A.PUBLISH),
        (S.UNPUBLISHED, False, A.PUBLISH),
        (S.PUBLISHED, True, A.REVISION),
        (S.PUBLISHED, False, None),  # a takedown is asked for by name, never guessed
        (S.SCHEDULED, False, None),
    ],
)
def test_the_change_a_release_makes_when_none_is_named(status, has_revision, expected):
    assert action_for(post(status), has_pending_revision=has_revision) == expected


REVISION = RevisionFacts(status=R.DRAFT, post_id=7)


@pytest.mark.parametrize(
    ("action", "facts", "revision", "other", "says"),
    [
        (A.PUBLISH, post(S.DRAFT), None, "", ""),
        (A.PUBLISH, post(S.UNPUBLISHED), None, "", ""),
        (A.PUBLISH, post(S.SCHEDULED), None, "", "scheduled on its own"),
        (A.PUBLISH, post(S.PUBLISHED), None, "", "live already"),
        (A.PUBLISH, post(S.DRAFT, content_problems=("A title is needed.",)), None, "", "title"),
        (A.PUBLISH, post(S.DRAFT), None, "Launch", "already in the release “Launch”"),
        (A.REVISION, post(S.PUBLISHED), REVISION, "", ""),
        (A.REVISION, post(S.PUBLISHED), None, "", "no pending revision"),
        (A.REVISION, post(S.DRAFT), REVISION, "", "Only a live post's revision"),
        (
            A.REVISION,
            post(S.PUBLISHED),
            RevisionFacts(status=R.DRAFT, post_id=7, content_problems=("A body is needed.",)),
            "",
            "body",
        ),
        (A.UNPUBLISH, post(S.PUBLISHED), None, "", ""),
        (A.UNPUBLISH, post(S.DRAFT), None, "", "Only a live post can be taken down"),
        (A.UNPUBLISH, post(S.PUBLISHED), None, "Launch", "already in the release"),
    ],
)
def test_what_may_be_added_to_a_release(action, facts, revision, other, says):
    problem = add_problem(action, facts, revision=revision, other_release=other)
    if says:
        assert says in problem
    else:
        assert problem == ""


def item(action, pinned=4, facts=None, revision=None, post_id=7):
    return ItemFacts(
        action=action, pinned_version=pinned, post_id=post_id, post=facts, revision=revision
    )


@pytest.mark.parametrize(
    ("facts", "says"),
    [
        (item(A.PUBLISH, facts=post(S.DRAFT)), ""),
        (item(A.PUBLISH, facts=post(S.UNPUBLISHED)), ""),
        (item(A.PUBLISH, facts=None, post_id=None), "deleted"),
        # Any change after the item was added, however small, is for an editor to look at.
        (item(A.PUBLISH, facts=post(S.DRAFT, version=5)), "changed after it was added"),
        (item(A.PUBLISH, facts=post(S.PUBLISHED)), "no longer a draft"),
        (
            item(A.PUBLISH, facts=post(S.DRAFT, unpublish_at=NOW - timedelta(seconds=1))),
            "unpublish time has passed",
        ),
        (item(A.PUBLISH, facts=post(S.DRAFT, unpublish_at=NOW + timedelta(hours=1))), ""),
        (item(A.PUBLISH, facts=post(S.DRAFT, content_problems=("A slug is needed.",))), "slug"),
        (item(A.REVISION, facts=post(S.PUBLISHED), revision=REVISION), ""),
        (
            item(A.REVISION, facts=post(S.PUBLISHED), revision=RevisionFacts(R.SCHEDULED, 7)),
            "",
        ),
        (item(A.REVISION, facts=post(S.PUBLISHED), revision=None), "revision is gone"),
        (
            item(A.REVISION, facts=post(S.PUBLISHED), revision=RevisionFacts(R.DRAFT, 8)),
            "revision is gone",
        ),
        (
            item(A.REVISION, facts=post(S.PUBLISHED), revision=RevisionFacts(R.SUPERSEDED, 7)),
            "cancelled, replaced or has gone live",
        ),
        (item(A.REVISION, facts=post(S.UNPUBLISHED), revision=REVISION), "no longer live"),
        (item(A.UNPUBLISH, facts=post(S.PUBLISHED)), ""),
        (item(A.UNPUBLISH, facts=post(S.UNPUBLISHED)), "no longer live"),
        (item(A.UNPUBLISH, facts=post(S.PUBLISHED, version=9)), "changed after it was added"),
    ],
)
def test_whether_an_item_still_applies(facts, says):
    problem = item_problem(facts, now=NOW)
    if says:
        assert says in problem
    else:
        assert problem == ""


def test_a_release_problem_names_its_items_and_counts_beyond_five():
    assert release_problem([("A", ""), ("B", "")]) == ""
    assert release_problem([("A", ""), ("B", "The post was deleted.")]) == (
        "“B”: The post was deleted."
    )
    many = release_problem([(f"P{n}", "gone") for n in range(8)])
    assert many.startswith("“P0”: gone; “P1”: gone")
    assert many.endswith("and 3 more item(s)")
    assert "P5" not in many
