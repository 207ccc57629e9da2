"""Links to admin pages that moved with reviews and releases go on to their new addresses."""

import pytest


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/admin/publishing/release/7/change/", "/admin/releases/release/7/change/"),
        (
            "/admin/publishing/release/?status__exact=scheduled",
            "/admin/releases/release/?status__exact=scheduled",
        ),
        ("/admin/publishing/review/3/change/", "/admin/reviews/review/3/change/"),
    ],
)
def test_links_to_the_old_pages_go_on_to_the_new_ones(client, old, new):
    """Review and release emails sent before the move link to the old addresses."""
    response = client.get(old)
    assert (response.status_code, response["Location"]) == (301, new)
