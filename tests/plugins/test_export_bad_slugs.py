"""A live post whose slug has no public address (possible only without the database's slug
constraint): the export leaves it out with one warning naming it, and writes the rest."""

import logging
from io import StringIO

import pytest
from django.core.management import call_command

from plugins.builtin.static_export import CURRENT
from publishing.models import Post
from tests.publishing.conftest import make_post

BEFORE_THE_CONSTRAINT = "0006_event_post_without_constraint"


@pytest.fixture
def without_slug_constraint(transactional_db):
    """The database as before the slug constraint's migration; every app migrated forward
    after (going back unapplied the migrations that depend on publishing's)."""
    call_command("migrate", "publishing", BEFORE_THE_CONSTRAINT, verbosity=0)
    yield
    call_command("migrate", verbosity=0)


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
