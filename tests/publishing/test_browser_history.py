"""In Chromium: a post's publish history reads in the editor's time zone, to the second.

No raw UTC instant ("2031-06-01T12:00:05.586000+00:00") stands beside times in the editor's
zone. The screenshot goes to ``test-artifacts/`` so a person can check it.
"""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from editors.models import EditorProfile
from publishing import posts
from tests.publishing.conftest import make_post
from tests.support.browser import screenshot, signed_in

pytestmark = pytest.mark.sqlite

PUBLISH_AT = datetime(2031, 6, 1, 12, 0, 5, 586000, tzinfo=UTC)
LATER = datetime(2031, 6, 2, 12, 0, 5, tzinfo=UTC)


def test_the_history_on_the_post_page_is_in_the_editors_zone(live_server, editor, browser, request):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    post = make_post(title="Summer opening")
    posts.schedule_post(post=post, publish_at=PUBLISH_AT, user=editor)
    posts.reschedule_post(post=post, publish_at=LATER, user=editor)
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}")
        history = page.locator("#events-group")
        history.scroll_into_view_if_needed()
        text = history.inner_text()
        assert "details (asia/tokyo)" in text.lower()
        assert "publish at 2031-06-01 21:00:05 JST" in text
        assert "publish at 2031-06-01 21:00:05 JST → 2031-06-02 21:00:05 JST" in text
        assert "T12:00:05" not in text and ".586" not in text and "+00:00" not in text
        shot = screenshot(page, "publish-history-in-the-editors-zone")
        assert shot.stat().st_size > 0
    except BaseException:
        screenshot(page, request.node.name)
        raise
