"""In Chromium: the publishing admin's words and times as an editor reads them: the
scheduler named as such in a post's history, lateness in plain durations, the home page's
calendar link readable in light and dark mode, and the post list at 1,280 px with every
column in view (those reviews and releases add too) and titles that do not wrap onto four
lines.

Screenshots go to ``test-artifacts/`` so a person can check that the pages read well.
"""

from datetime import timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from editors.models import EditorProfile
from publishing import batches, posts
from publishing.models import Post
from tests.publishing.conftest import due_post, future_post, make_post
from tests.support.browser import screenshot, signed_in

pytestmark = [pytest.mark.sqlite]

S = Post.Status


def sign_in(browser, live_server, username: str, *, password="pw", width=1280, scheme="light"):
    return signed_in(
        browser,
        live_server,
        username,
        password,
        viewport={"width": width, "height": 900},
        timezone_id="UTC",
        color_scheme=scheme,
    )


def contrast(page, selector: str) -> float:
    """Return the WCAG contrast ratio of ``selector``'s text against its caption's background."""
    return page.evaluate(
        """(selector) => {
          const link = document.querySelector(selector);
          const rgb = (css) => css.match(/[\\d.]+/g).slice(0, 3).map(Number);
          let box = link;
          while (box && getComputedStyle(box).backgroundColor.match(/[\\d.]+/g).length > 3
                 && Number(getComputedStyle(box).backgroundColor.match(/[\\d.]+/g)[3]) === 0) {
            box = box.parentElement;
          }
          const lum = ([r, g, b]) => {
            const c = [r, g, b].map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92
              : Math.pow((v + 0.055) / 1.055, 2.4); });
            return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
          };
          const a = lum(rgb(getComputedStyle(link).color));
          const b = lum(rgb(getComputedStyle(box).backgroundColor));
          return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        }""",
        selector,
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_home_pages_calendar_link_is_readable(live_server, editor, browser, scheme):
    page = sign_in(browser, live_server, "editor", scheme=scheme)
    page.goto(f"{live_server.url}{reverse('admin:index')}")
    assert page.inner_text("#calendar-link") == "CALENDAR OF WHAT GOES OUT"
    ratio = contrast(page, "#calendar-link")
    screenshot(page, f"home-calendar-link-{scheme}")
    assert ratio >= 4.5, f"the calendar link's contrast is {ratio:.1f}:1 in {scheme} mode"


def test_the_history_names_the_scheduler_and_reads_lateness_in_plain_words(
    live_server, editor, admin_user, browser, request
):
    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    post = due_post(seconds_ago=0, title="On the hour")
    assert batches.publish_due(node="vm:11206").done == [post.pk]
    page = sign_in(browser, live_server, "editor")
    try:
        page.goto(f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}")
        history = page.inner_text("#events-group")
        assert "Scheduler (node vm:11206)" in history
        lateness = post.events.get().lateness
        assert ("on time" in history) == (lateness < 1)
        screenshot(page, "history-scheduler-named")
        admin = sign_in(browser, live_server, "admin", password="password")
        admin.goto(f"{live_server.url}{reverse('admin:publishing_publishevent_changelist')}")
        assert "Scheduler (node vm:11206)" in admin.inner_text("#result_list")
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_the_post_list_at_1280_px_shows_every_column_and_late_posts(
    live_server, editor, browser, request
):
    from releases import actions as releases
    from reviews.models import Review

    EditorProfile.objects.create(user=editor, time_zone="Asia/Tokyo")
    long = "Our opening hours over the winter holidays, and where to find us"
    make_post(title=long)
    scheduled = future_post(
        title=f"{long} (scheduled)", unpublish_at=database_now() + timedelta(days=9)
    )
    due_post(seconds_ago=300, title=f"{long} (late)")
    live = make_post(title=f"{long} (live)")
    posts.publish_now(post=live, user=editor)
    launch = releases.create_release(name="Winter launch", user=editor)
    releases.add_item(release=launch, post=make_post(title=f"{long} (launch)"), user=editor)
    Review.objects.create(
        target=Review.Target.POST, post=scheduled, title=scheduled.title, fingerprint="x"
    )
    Post.objects.update(author=editor)
    page = sign_in(browser, live_server, "editor", width=1280)
    try:
        page.goto(f"{live_server.url}{reverse('admin:publishing_post_changelist')}")
        overflow = page.evaluate(
            "(() => { const r = document.querySelector('#changelist .results');"
            " return r.scrollWidth - r.clientWidth; })()"
        )
        widths = page.evaluate(
            "[...document.querySelectorAll('#result_list thead th')]"
            ".map(th => th.className + '=' + Math.round(th.getBoundingClientRect().width))"
        )
        assert overflow <= 0, f"the list scrolls sideways by {overflow} px: {widths}"
        header = page.inner_text("#result_list thead")
        for column in (
            "TITLE",
            "STATUS",
            "REVIEW",
            "RELEASE",
            "SCHEDULED FOR",
            "WENT LIVE",
            "AUTHOR",
            "UPDATED",
        ):
            assert column in header.replace("\n", " ")
        for cell in ("th.column-author", "th.column-updated", "td.field-updated"):
            right = page.locator(f"#result_list {cell}").first.bounding_box()
            assert right["x"] + right["width"] <= 1280, f"{cell} is off screen"
        authors = page.locator("#result_list td.field-author").all_inner_texts()
        assert set(authors) == {"editor"}, f"the author's whole name: {authors}"
        launch_row = page.locator("#result_list tr", has_text="(launch)")
        assert launch_row.locator("td.field-release").inner_text() == "Winter launch"
        review_row = page.locator("#result_list tr", has_text="(scheduled)")
        assert review_row.locator("td.field-review").inner_text() == "Waiting"
        for title in page.locator("#result_list th.field-title a").all():
            line = float(title.evaluate("a => parseFloat(getComputedStyle(a).lineHeight)"))
            lines = round(title.bounding_box()["height"] / line)
            assert lines <= 3, f"{title.inner_text()!r} wraps onto {lines} lines"
        late_row = page.locator("#result_list tr", has_text="(late)")
        assert late_row.locator(".post-status-late").inner_text() == "Late"
        screenshot(page, "post-list-1280")
    except BaseException:
        screenshot(page, request.node.name)
        raise
