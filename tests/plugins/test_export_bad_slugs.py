"""A live post whose slug has no public address (possible only without the database's slug
constraint): the export leaves it out with one warning naming it, and writes the rest."""

import logging
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from plugins.builtin.static_export import CURRENT
from publishing.models import Post
from tests.publishing.conftest import make_post

SLUG_CONSTRAINT = "publishing_post_slug_is_url_slug"


@pytest.fixture
def without_slug_constraint(transactional_db):
    """The database without the slug constraint (as before its migration), every other table
    as it is; the constraint is put back after."""
    constraints = Post._meta.constraints
    constraint = next(c for c in constraints if c.name == SLUG_CONSTRAINT)
    # SQLite remakes the table from the model's constraints: leave it out of them meanwhile.
    Post._meta.constraints = [c for c in constraints if c is not constraint]
    try:
        with connection.schema_editor() as editor:
            editor.remove_constraint(Post, constraint)
        yield
        Post.objects.all().delete()
    finally:
        Post._meta.constraints = constraints
        with connection.schema_editor() as editor:
            editor.add_constraint(Post, constraint)


def test_a_live_post_without_an_address_is_skipped_with_one_warning(
    tmp_path, without_slug_constraint, caplog
):
    good = make_post(status=Post.Status.PUBLISHED, title="Reachable")
    bad = make_post(status=Post.Status.PUBLISHED, title="Unreachable", slug="has space/ü")
    out = StringIO()
    with caplog.at_level(logging.WARNING, logger="plugins.builtin.static_export"):
        call_command("exportsite", str(tmp_path), stdout=out)
    site = (tmp_path / CURRENT).resolve(strict=True)
    assert "Reachable" in (site / "index.html").read_text()
    assert (site / f"posts/{good.slug}/index.html").is_file()
    assert "Unreachable" not in (site / "index.html").read_text()
    assert "Unreachable" not in (site / "feed/index.xml").read_text()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"skipped post {bad.pk}: its slug 'has space/ü' is not a valid address" in warnings[0]
