"""In Chromium: a post whose publish time falls in a DST fold of the editor's zone.

The editor in Europe/Berlin sees which of the two 02:30s the post is planned for, saves a
change without touching the time, and picks the other 02:30 by its radio button. The
screenshot goes to ``test-artifacts/`` so a person can check it reads well.
"""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from editors.models import EditorProfile
from publishing.models import Post
from tests.publishing.conftest import make_post
from tests.support.browser import screenshot, signed_in

pytestmark = pytest.mark.sqlite

S = Post.Status
CEST = datetime(2099, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST in Berlin
CET = datetime(2099, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET, an hour later


def test_a_folded_publish_time_is_shown_saved_unchanged_and_switched(
    live_server, editor, browser, request
):
    EditorProfile.objects.create(user=editor, time_zone="Europe/Berlin")
    post = make_post(status=S.SCHEDULED, publish_at=CEST, title="Clock change")
    url = f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"
    page = signed_in(browser, live_server, "editor", "pw")
    try:
        page.goto(url)
        fold = page.locator(".field-publish_at .wall-time-fold")
        assert "This time happens twice" in fold.inner_text()
        assert page.is_checked("#id_publish_at_fold_0")
        assert "02:30:00 CEST, the first time, before the clocks go back" in fold.inner_text()
        assert "02:30:00 CET, the second time, after the clocks go back" in fold.inner_text()
        fold.scroll_into_view_if_needed()
        screenshot(page, "dst-fold-publish-time")

        page.fill("#id_body", "Mind the clocks.")
        page.click("input[name=_save]")
        page.wait_for_selector(".messagelist .success")
        post.refresh_from_db()
        assert (post.body, post.publish_at) == ("Mind the clocks.", CEST)

        page.goto(url)
        page.check("#id_publish_at_fold_1")
        page.click("input[name=_save]")
        page.wait_for_selector(".messagelist .success")
        post.refresh_from_db()
        assert post.publish_at == CET
    except BaseException:
        screenshot(page, request.node.name)
        raise
