"""The timeline pages: layout of runs, missed slots and leadership terms, and the admin views."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse

from coordination import timeline
from coordination.clock import database_now
from coordination.models import JobRun, JobState, LeadershipTerm

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def run(job="g.a", *, slot, status="succeeded", node="n1", took=1.0, reason="", error=""):
    started = None if status == "missed" else slot
    return JobRun(
        job=job,
        slot=slot,
        status=status,
        node="" if status == "missed" else node,
        started_at=started,
        finished_at=started + timedelta(seconds=took) if started else None,
        duration=took if started else None,
        reason=reason,
        error=error,
    )


def term(node, start, end=None, reason="", detail=""):
    return LeadershipTerm(
        group="g", node=node, instance=node, started_at=start, ended_at=end,
        end_reason=reason, detail=detail,
    )  # fmt: skip


def layout(runs, terms=(), hours=1, zone=UTC):
    return timeline.build(
        start=T0,
        end=T0 + timedelta(hours=hours),
        now=T0 + timedelta(hours=hours),
        runs=list(runs),
        terms=list(terms),
        zone=zone,
    )


def test_runs_are_bars_in_their_node_lane_coloured_by_status_with_the_error_in_the_title():
    drawn = layout(
        [
            run(slot=T0 + timedelta(minutes=15), node="n1", took=180),
            run(
                slot=T0 + timedelta(minutes=30), node="n2", status="failed", error="Traceback\nBoom"
            ),
        ]
    )
    assert [(lane.label, lane.node) for lane in drawn.lanes] == [
        ("who led", ""),
        ("Scheduler (node n1)", "n1"),
        ("Scheduler (node n2)", "n2"),
        ("missed slots", ""),
    ]
    ok, failed = drawn.marks
    assert (ok.x, ok.width, ok.lane, ok.css) == (250.0, 50.0, 1, "run succeeded")
    assert (failed.x, failed.lane, failed.css) == (500.0, 2, "run failed")
    assert failed.title.endswith("Boom")
    assert ok.title == (
        "g.a · slot 2026-11-30 12:15:00 UTC · Succeeded on Scheduler (node n1) · started on time · "
        "took 3 min"
    )


def test_missed_slots_on_one_pixel_column_are_one_mark_that_counts_them_with_the_reason():
    second = [
        run(slot=T0 + timedelta(minutes=9, milliseconds=i * 100), status="missed", reason="paused")
        for i in range(20)
    ]
    drawn = layout(
        second + [run(slot=T0 + timedelta(minutes=40), status="missed", reason="overlap")]
    )
    marks = [m for m in drawn.marks if m.css == "missed"]
    assert len(marks) == 2
    assert marks[0].title.startswith("20 slots paused (g.a)")
    assert "overlap" in marks[1].title
    assert {m.lane for m in marks} == {len(drawn.lanes) - 1}


def test_a_million_missed_slots_draw_at_most_one_mark_per_pixel_column():
    runs = [
        run(slot=T0 + timedelta(seconds=i * 3600 / 20_000), status="missed", reason="downtime")
        for i in range(20_000)
    ]
    assert len(layout(runs).marks) <= timeline.WIDTH + 1


def test_leadership_terms_show_who_led_and_why_each_term_ended():
    drawn = layout(
        [],
        [
            term("n1", T0 - timedelta(hours=1), T0 + timedelta(minutes=20), "crashed", "gone"),
            term("n2", T0 + timedelta(minutes=20)),
        ],
    )
    bars = [m for m in drawn.marks if m.css == "term"]
    assert [(b.x, b.width) for b in bars] == [(0.0, 333.3), (333.3, 666.7)]
    assert "crashed: its process went away (gone)" in bars[0].title
    assert "still leading" in bars[1].title
    ends = [m for m in drawn.marks if m.css.startswith("end")]
    assert [(m.css, m.lane) for m in ends] == [("end crashed", 1)]
    assert bars[0].title.startswith("Scheduler (node n1) led the g group from 2026-11-30 11:00:00")


def test_axis_labels_are_round_times_in_the_viewers_zone():
    drawn = layout([], hours=6, zone=ZoneInfo("Asia/Kolkata"))  # UTC+05:30
    assert [label for _, label in drawn.ticks][:3] == ["18:00", "18:30", "19:00"]
    assert drawn.ticks[0][0] == pytest.approx(1000 / 12, abs=0.1)


# --- the admin pages ---------------------------------------------------------------------
@pytest.fixture
def ledger(db):
    now = database_now()
    JobState.objects.create(name="example.beat", group="plugins", schedule="every 1 minute")
    JobState.objects.create(name="example.other", group="plugins", schedule="every 1 minute")
    JobRun.objects.bulk_create(
        [
            run("example.beat", slot=now - timedelta(minutes=30), node="web-1"),
            run("example.beat", slot=now - timedelta(minutes=20), status="failed", node="web-2"),
            run("example.beat", slot=now - timedelta(minutes=10), status="missed", reason="paused"),
            run("example.other", slot=now - timedelta(minutes=5), node="web-2"),
        ]
    )
    LeadershipTerm.objects.create(
        group="plugins",
        node="web-1",
        instance="a",
        started_at=now - timedelta(minutes=40),
        ended_at=now - timedelta(minutes=25),
        end_reason="fenced",
        detail="removed by web-2: no heartbeat for 12.0s",
    )
    LeadershipTerm.objects.create(
        group="plugins", node="web-2", instance="b", started_at=now - timedelta(minutes=25)
    )


def test_the_job_timeline_page_draws_its_runs_missed_slots_and_the_groups_leaders(
    admin_client, ledger
):
    page = admin_client.get(reverse("admin:coordination_jobstate_timeline", args=["example.beat"]))
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('<rect class="run ') == 2  # the other job's run is not drawn
    assert 'class="run failed"' in html
    assert 'class="missed"' in html and "paused" in html
    assert "fenced: no heartbeat within the lease (removed by web-2" in html
    assert "still leading" in html


def test_the_group_timeline_page_draws_every_job_of_the_group(admin_client, ledger):
    page = admin_client.get(reverse("admin:coordination_group_timeline", args=["plugins"]))
    assert page.status_code == 200
    assert page.content.decode().count('<rect class="run ') == 3
    assert (
        admin_client.get(reverse("admin:coordination_group_timeline", args=["nope"])).status_code
        == 404
    )


def test_an_earlier_window_shows_nothing_newer(admin_client, ledger):
    url = reverse("admin:coordination_jobstate_timeline", args=["example.beat"])
    end = (database_now() - timedelta(hours=2)).isoformat()
    page = admin_client.get(url, {"hours": 1, "end": end})
    assert page.status_code == 200
    assert '<rect class="run ' not in page.content.decode()


def test_timelines_need_the_view_permission(client, django_user_model, ledger):
    user = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(user)
    url = reverse("admin:coordination_jobstate_timeline", args=["example.beat"])
    assert client.get(url).status_code == 403


def test_a_jobs_page_lists_its_next_five_slots_in_the_sites_and_the_viewers_zone(
    admin_client, settings
):
    from django.utils import timezone

    settings.TIME_ZONE = "UTC"
    JobState.objects.create(name="example.digest", group="plugins", schedule="daily")
    url = reverse("admin:coordination_jobstate_change", args=["example.digest"])
    with timezone.override(ZoneInfo("America/New_York")):
        html = admin_client.get(url).content.decode()
    table = html[html.index('<table class="upcoming-slots">') :]
    table = table[: table.index("</table>")]
    assert "<th>UTC</th><th>America/New_York</th>" in table
    # Daily at 06:00 Berlin: five days in a row, each shown in both zones.
    assert table.count("<tr>") == 6
    assert table.count(" CET</td>") == 0 and table.count(" UTC</td>") == 5
    assert table.count(" EST</td>") == 5


def test_a_run_on_a_worker_is_drawn_in_the_lane_of_the_worker_that_ran_it_not_while_queued():
    queued = run(slot=T0 + timedelta(minutes=10), node="n1")
    queued.status, queued.started_at, queued.finished_at = "queued", None, None
    ran = run(slot=T0 + timedelta(minutes=5), node="n2/worker-1", took=60)

    drawn = layout([queued, ran])

    assert [lane.node for lane in drawn.lanes] == ["", "n2/worker-1", ""]
    (mark,) = drawn.marks
    assert (mark.lane, mark.css) == (1, "run succeeded")
