"""Wall times that do not exist or happen twice (DST) are refused with a suggestion.

One definition (``validation.wall_time_problem``) used by the post form's time fields: a time
in a spring-forward gap or an autumn fold is an error naming the zone and what to choose,
never silently shifted by an hour.
"""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from django.urls import reverse

from publishing.models import Post
from publishing.validation import wall_time_problem
from tests.publishing.conftest import form_data

S = Post.Status
BERLIN = ZoneInfo("Europe/Berlin")
ADD_URL = reverse("admin:publishing_post_add")


def test_a_time_in_the_spring_gap_does_not_exist_and_the_later_one_is_suggested():
    problem = wall_time_problem(datetime(2026, 3, 29, 2, 30), BERLIN)
    assert problem == (
        "02:30 does not exist on 2026-03-29 in Europe/Berlin (clocks go forward by 1 h); "
        "did you mean 03:30?"
    )


def test_a_time_in_the_autumn_fold_happens_twice_and_both_are_named():
    problem = wall_time_problem(datetime(2026, 10, 25, 2, 30), BERLIN)
    assert problem is not None
    assert problem.startswith("02:30 happens twice on 2026-10-25 in Europe/Berlin (clocks go back")
    assert "first at 02:30 CEST (00:30 UTC), then at 02:30 CET (01:30 UTC)" in problem
    assert "choose a time 1 h away or set your time zone to UTC" in problem


def test_a_half_hour_shift_is_described_as_such():
    problem = wall_time_problem(datetime(2026, 10, 4, 2, 15), ZoneInfo("Australia/Lord_Howe"))
    assert problem is not None
    assert "clocks go forward by 30 min" in problem
    assert "did you mean 02:45?" in problem


@pytest.mark.parametrize(
    "value",
    [datetime(2026, 3, 29, 1, 59), datetime(2026, 3, 29, 3, 0), datetime(2026, 10, 25, 3, 0)],
)
def test_ordinary_times_are_fine(value):
    assert wall_time_problem(value, BERLIN) is None
    assert wall_time_problem(value, UTC) is None


def schedule(client, date: str, time: str):
    data = form_data(client.get(ADD_URL))
    data.update(
        title="Clock change",
        slug="clock-change",
        body="Mind the clocks.",
        target_status=S.SCHEDULED,
        publish_at_0=date,
        publish_at_1=time,
    )
    return client.post(ADD_URL, data)


@pytest.mark.django_db
@override_settings(TIME_ZONE="Europe/Berlin")
@pytest.mark.parametrize(
    ("date", "expected"),
    [
        ("2099-03-29", "02:30 does not exist on 2099-03-29 in Europe/Berlin"),
        ("2099-10-25", "02:30 happens twice on 2099-10-25 in Europe/Berlin"),
    ],
)
def test_the_post_form_refuses_a_gap_or_fold_and_saves_nothing(as_editor, date, expected):
    response = schedule(as_editor, date, "02:30:00")
    assert response.status_code == 200, "the form comes back with the error"
    html = response.content.decode()
    assert expected in html
    assert "couldn’t be interpreted" not in html, "not Django's generic message"
    assert not Post.objects.filter(slug="clock-change").exists()


@pytest.mark.django_db
@override_settings(TIME_ZONE="Europe/Berlin")
def test_the_suggested_time_is_accepted(as_editor):
    assert schedule(as_editor, "2099-03-29", "03:30:00").status_code == 302
    assert Post.objects.get(slug="clock-change").publish_at == datetime(
        2099, 3, 29, 1, 30, tzinfo=UTC
    )
