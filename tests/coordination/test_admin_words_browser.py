"""In Chromium, as an editor in Berlin: a job's timeline and its run list read as words.

The screenshots (``test-artifacts/words-timeline.png`` and ``words-runs.png``) are for a
person to check that the pages say ``Scheduler (node web-1)``, ``on time``, ``4 min 10 s`` and
times with ``CET``, as an editor who is not an engineer reads them.
"""

from datetime import timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from coordination.models import JobRun, JobState, LeadershipTerm
from editors.models import EditorProfile
from tests.support.browser import screenshot, signed_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def history() -> None:
    now = database_now()
    JobState.objects.create(name="example.beat", group="plugins", schedule="every 5 min")
    runs = []
    for minutes in range(55, 0, -5):
        slot = now - timedelta(minutes=minutes)
        node = "web-1" if minutes > 30 else "web-2"
        failed = minutes == 40
        late = 3.24 if minutes == 20 else 0.004
        took = 250.4 if minutes == 50 else 0.006441874999950414
        runs.append(
            JobRun(
                job="example.beat", slot=slot, status="failed" if failed else "succeeded",
                node=node, started_at=slot + timedelta(seconds=late),
                finished_at=slot + timedelta(seconds=late + took), duration=took,
                error="RuntimeError: upstream said no" if failed else "",
            )
        )  # fmt: skip
    JobRun.objects.bulk_create(runs)
    LeadershipTerm.objects.create(
        group="plugins", node="web-1", instance="a", started_at=now - timedelta(hours=2),
        ended_at=now - timedelta(minutes=30), end_reason="crashed",
    )  # fmt: skip
    LeadershipTerm.objects.create(
        group="plugins", node="web-2", instance="b", started_at=now - timedelta(minutes=29)
    )


def test_the_timeline_and_the_run_list_read_as_words(live_server, admin_user, browser, request):
    EditorProfile.objects.create(user=admin_user, time_zone="Europe/Berlin")
    history()
    page = signed_in(browser, live_server, admin_user.username, "password")
    # A laptop's width: at 1280 with the navigation sidebar open the run list scrolls sideways.
    page.set_viewport_size({"width": 1440, "height": 900})
    try:
        url = reverse("admin:coordination_jobstate_timeline", args=["example.beat"])
        page.goto(f"{live_server.url}{url}")
        page.locator("svg.timeline").wait_for()
        labels = page.locator("svg.timeline .lane-label").all_text_contents()
        assert labels[1:3] == ["Scheduler (node web-1)", "Scheduler (node web-2)"]
        assert page.locator("svg.timeline .axis-zone").text_content() == "times in CET"
        slow = page.locator("svg.timeline rect.run title").all_text_contents()
        assert any("took 4 min 10 s" in t and "started on time" in t for t in slow), slow
        assert any("started 3.2 s late" in t for t in slow), slow
        terms = page.inner_text("table.leadership-terms")
        assert "Scheduler (node web-1)" in terms and " CET" in terms
        assert "From " in page.inner_text("#content-main") and " CET to " in page.inner_text(
            "#content-main"
        )
        screenshot(page, "words-timeline")

        runs = reverse("admin:plugins_pluginrun_changelist") + "?job=example.beat"
        page.goto(f"{live_server.url}{runs}")
        table = page.locator("#result_list")
        table.wait_for()
        text = table.inner_text()
        for words in ("Scheduler (node web-1)", "on time", "3.2 s late", "6 ms", "4 min 10 s"):
            assert words in text, words
        assert " CET" in text and "0.0064" not in text
        node = page.locator("#result_list .scheduler").first
        assert node.get_attribute("title") in ("web-1", "web-2"), "the raw name, for operators"
        screenshot(page, "words-runs")
    except BaseException:
        screenshot(page, request.node.name)
        raise
