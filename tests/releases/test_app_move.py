"""Releases and reviews moved out of publishing into apps of their own, on a database that
has data.

The move is of state only: the rows stay where they are and read as before, the content
types (and so editors' permissions and the admin's history) follow the models, and a review
of a release keeps it by id with no foreign key left in the database.
"""

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from releases.models import Release
from reviews.models import Review

pytestmark = pytest.mark.django_db(transaction=True)

MOVED = ("release", "releaseitem", "releaseevent")


def _old_content_type(model: str) -> ContentType:
    """Return the content type the model had in publishing, as a site before the move has."""
    ContentType.objects.filter(app_label="releases", model=model).delete()
    return ContentType.objects.get_or_create(app_label="publishing", model=model)[0]


def test_rows_permissions_and_reviews_come_through_the_move():
    call_command("migrate", "publishing", "0014_release_events", verbosity=0)
    call_command("migrate", "releases", "zero", verbosity=0)
    assert not ContentType.objects.filter(app_label="reviews").exists()
    try:
        release = Release.objects.create(name="Spring launch")
        review = Review.objects.create(
            target=Review.Target.RELEASE, release_id=release.pk, title="Spring launch"
        )
        change = Permission.objects.get_or_create(
            content_type=_old_content_type("release"), codename="change_release"
        )[0]
        for model in MOVED[1:]:
            _old_content_type(model)
        see_reviews = Permission.objects.get_or_create(
            content_type=ContentType.objects.get(app_label="publishing", model="review"),
            codename="view_review",
        )[0]
        editor = User.objects.create_user("launcher", is_staff=True)
        editor.user_permissions.add(change, see_reviews)
        call_command("migrate", verbosity=0)
    finally:
        call_command("migrate", verbosity=0)
    assert Release.objects.get(pk=release.pk).name == "Spring launch"
    assert Review.objects.get(pk=review.pk).release_id == release.pk
    assert set(ContentType.objects.filter(model__in=MOVED).values_list("app_label", flat=True)) == {
        "releases"
    }
    assert ContentType.objects.get(model="review").app_label == "reviews"
    moved = User.objects.get(pk=editor.pk)
    assert moved.has_perm("releases.change_release") and moved.has_perm("reviews.view_review")
    # No foreign key from the review to the release is left: the table may lose the row.
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {quote(Release._meta.db_table)} WHERE id = %s", [release.pk])
    assert Review.objects.filter(pk=review.pk).exists()


def test_deleting_a_release_deletes_its_reviews():
    release = Release.objects.create(name="Autumn launch")
    Review.objects.create(target=Review.Target.RELEASE, release_id=release.pk, title="Autumn")
    kept = Release.objects.create(name="Winter launch")
    Review.objects.create(target=Review.Target.RELEASE, release_id=kept.pk, title="Winter")
    release.delete()
    assert list(Review.objects.values_list("release_id", flat=True)) == [kept.pk]


def test_a_review_without_its_target_is_refused():
    with pytest.raises(IntegrityError), transaction.atomic():
        Review.objects.create(target=Review.Target.RELEASE, title="Nothing")
