"""The soak's image invariant, on recorded answers: an image served before any post showing
it was live breaks it; one served after, or refused before, does not."""

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from devtools.chaos.image_checks import no_unreleased_image_served

pytestmark = pytest.mark.sqlite

LIVE = datetime(2026, 12, 6, 4, 0, 10, tzinfo=UTC)
URL = "/media/abc/chaos-3.png"


def soak(*probes, published_at=LIVE):
    rows = [(f"Body.\n\n![Chaos picture 3]({URL})", published_at)]
    return SimpleNamespace(
        image_urls=[URL, "/media/def/chaos-6.png"],
        image_probes=list(probes),
        query=lambda sql, params=(): rows if published_at else [],
    )


def at(second: float) -> float:
    return LIVE.timestamp() + second


def test_refused_before_and_served_after_the_post_went_live_holds():
    held, detail = no_unreleased_image_served(soak((URL, 404, at(-2)), (URL, 200, at(0.5))), None)
    assert held, detail
    assert "1 served, 1 not found while embargoed; 0 served early" in detail


def test_served_before_the_post_went_live_breaks_it():
    held, detail = no_unreleased_image_served(soak((URL, 200, at(-0.01))), None)
    assert not held and "1 served early" in detail and URL in detail


def test_served_while_no_post_with_it_is_live_breaks_it():
    held, _ = no_unreleased_image_served(soak((URL, 200, at(5)), published_at=None), None)
    assert not held


def test_no_request_made_is_no_evidence():
    held, _ = no_unreleased_image_served(soak(), None)
    assert not held
