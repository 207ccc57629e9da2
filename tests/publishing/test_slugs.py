"""A post's slug follows the public URL's rule in Python, in the database and in the URLconf,
and the migration that adds the constraint rewrites slugs that broke it."""

import logging

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.urls import NoReverseMatch, reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from publishing.models import Post
from publishing.slugs import is_url_slug
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db


def url_accepts(slug: str) -> bool:
    try:
        reverse("publishing:post_detail", kwargs={"slug": slug})
    except NoReverseMatch:
        return False
    return True


def database_accepts(slug: str) -> bool:
    try:
        with transaction.atomic():
            Post.objects.create(title="t", slug=slug, body="b")
            transaction.set_rollback(True)
    except IntegrityError:
        return False
    return True


SLUGS = {
    "hello-world": True,
    "Hello_World-2026": True,
    "-": True,
    "_": True,
    "a" * 200: True,
    "": False,
    " ": False,
    "has space": False,
    "trailing ": False,
    "line\n": False,
    "tab\t": False,
    "slash/": False,
    "dot.": False,
    "ünïcode": False,
    "\u212a": False,  # the Kelvin sign: a case-insensitive match would fold it into "k"
    "\u0131": False,  # dotless i
    "\uff41": False,  # a fullwidth "a"
    "%20": False,
    "[a]": False,
    "*": False,
    "?": False,
    "^": False,
}


@pytest.mark.parametrize(("slug", "valid"), SLUGS.items())
def test_python_the_url_and_the_database_agree_on_a_slug(slug, valid):
    assert is_url_slug(slug) is valid
    assert url_accepts(slug) is valid
    assert database_accepts(slug) is valid


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=30).filter(lambda s: "\x00" not in s))
def test_the_database_refuses_exactly_the_slugs_the_url_rejects(slug):
    assert database_accepts(slug) is url_accepts(slug) is is_url_slug(slug)


def test_a_model_form_check_names_the_rule():
    post = Post(title="t", slug="has space", body="b")
    with pytest.raises(Exception, match="letters a-z and A-Z, digits, - and _"):
        post.validate_constraints()


@pytest.mark.django_db(transaction=True)
def test_the_migration_rewrites_slugs_the_url_rejects_and_says_so(caplog):
    call_command("migrate", "publishing", "0006_event_post_without_constraint", verbosity=0)
    try:
        taken = make_post(slug="hello-world")
        spaced = make_post(slug="Hello World")  # slugify: "hello-world", taken
        accented = make_post(slug="Ünïcode café")
        empty = make_post(slug="")
        fine = make_post(slug="fine_as-it-is")
        with caplog.at_level(logging.WARNING, logger="publishing.migrations"):
            call_command("migrate", "publishing", verbosity=0)
    finally:
        # Every app: going back unapplied the migrations that depend on publishing's (the
        # outbox's tables).
        call_command("migrate", verbosity=0)
    slugs = dict(Post.objects.values_list("pk", "slug"))
    assert slugs[taken.pk] == "hello-world"
    assert slugs[spaced.pk] == f"hello-world-{spaced.pk}"
    assert slugs[accented.pk] == "unicode-cafe"
    assert slugs[empty.pk] == f"post-{empty.pk}"
    assert slugs[fine.pk] == "fine_as-it-is"
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 3, logged
    assert f"post {spaced.pk}: slug 'Hello World' is not a valid address" in logged[0]
    assert logged[0].endswith(f"now 'hello-world-{spaced.pk}'")
