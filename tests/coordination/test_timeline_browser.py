"""In Chromium: a job's timeline draws its runs, a failure, missed slots and who led when.

The screenshot goes to ``test-artifacts/timeline.png`` so a person can check it reads well.
"""

from datetime import timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from coordination.models import JobRun, JobState, LeadershipTerm
from tests.support.browser import screenshot, signed_in

pytestmark = [pytest.mark.django_db(transaction=True)]


def history():
    now = database_now()
    JobState.objects.create(name="example.beat", group="plugins", schedule="every 1 minute")
    runs = []
    for minutes in range(55, 0, -5):
        slot = now - timedelta(minutes=minutes)
        node = "web-1" if minutes > 30 else "web-2"
        status = "failed" if minutes == 40 else "succeeded"
        runs.append(
            JobRun(
                job="example.beat", slot=slot, status=status, node=node, started_at=slot,
                finished_at=slot + timedelta(seconds=40), duration=40.0,
                error="RuntimeError: upstream said no" if status == "failed" else "",
            )
        )  # fmt: skip
    for minutes in (29, 28, 27):
        runs.append(
            JobRun(
                job="example.beat", slot=now - timedelta(minutes=minutes), status="missed",
                reason="downtime",
            )
        )  # fmt: skip
    JobRun.objects.bulk_create(runs)
    LeadershipTerm.objects.create(
        group="plugins", node="web-1", instance="a", started_at=now - timedelta(hours=2),
        ended_at=now - timedelta(minutes=30), end_reason="crashed",
        detail="the lock was freed without a clean shutdown",
    )  # fmt: skip
    LeadershipTerm.objects.create(
        group="plugins", node="web-2", instance="b", started_at=now - timedelta(minutes=26)
    )


def test_the_timeline_page_in_chromium(live_server, admin_user, browser, request):
    history()
    page = signed_in(browser, live_server, admin_user.username, "password")
    try:
        url = reverse("admin:coordination_jobstate_timeline", args=["example.beat"])
        page.goto(f"{live_server.url}{url}")
        svg = page.locator("svg.timeline")
        svg.wait_for()
        box = svg.bounding_box()
        assert box["width"] > 800 and box["height"] > 80, "the plot is drawn at a usable size"
        assert page.locator("svg.timeline rect.run.succeeded").count() == 10
        assert page.locator("svg.timeline rect.run.failed").count() == 1
        assert page.locator("svg.timeline line.missed").count() >= 1
        assert page.locator("svg.timeline rect.term").count() == 2
        assert page.locator("svg.timeline line.end.crashed").count() == 1
        labels = page.locator("svg.timeline .lane-label").all_text_contents()
        assert labels == [
            "who led",
            "Scheduler (node web-1)",
            "Scheduler (node web-2)",
            "missed slots",
        ]
        failed_title = page.locator("svg.timeline rect.run.failed title").text_content()
        assert "upstream said no" in failed_title
        table = page.inner_text("table.leadership-terms")
        assert "crashed: its process went away" in table and "still leading" in table
        screenshot(page, "timeline")
        # The 6 h window is one click away and still draws the same runs.
        page.click("text=6 h")
        page.wait_for_url("**hours=6")
        assert page.locator("svg.timeline rect.run").count() == 11
    except BaseException:
        screenshot(page, request.node.name)
        raise
