"""Wall times that do not exist or happen twice (DST) are refused with a suggestion.

One definition (``validation.wall_time_problem``) used by the post form's time fields: a time
in a spring-forward gap or an autumn fold is an error naming the zone and what to choose,
never silently shifted by an hour.
"""

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings
from django.urls import reverse

from publishing.models import Post
from publishing.validation import wall_time_problem
from tests.publishing.conftest import form_data, make_post

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
    assert "first at 02:30 CEST, then again 1 h later at 02:30 CET" in problem
    assert problem.endswith("Which one: 02:30 CEST or 02:30 CET? Choose it below.")


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


# --- a time stored in a fold, and choosing between a fold's two instants -------------------

FOLD_CEST = datetime(2099, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST in Berlin
FOLD_CET = datetime(2099, 10, 25, 1, 30, tzinfo=UTC)  # 02:30 CET, an hour later


def change_url(post: Post) -> str:
    return reverse("admin:publishing_post_change", args=[post.pk])


def fold_choices(html: str) -> list[str]:
    return re.findall(r'<input type="radio" name="publish_at_2"[^>]*value="([^"]+)"', html)


@pytest.mark.django_db
@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_live_post_whose_publish_time_is_in_a_fold_can_be_saved(as_editor):
    post = make_post(
        status=S.PUBLISHED, publish_at=datetime(2026, 10, 25, 0, 30, tzinfo=UTC), title="Old"
    )
    data = form_data(as_editor.get(change_url(post)))
    response = as_editor.post(change_url(post), {**data, "title": "New title"})
    assert response.status_code == 302, response.content.decode()[:3000]
    post.refresh_from_db()
    assert (post.title, post.publish_at) == ("New title", datetime(2026, 10, 25, 0, 30, tzinfo=UTC))


@pytest.mark.django_db
@override_settings(TIME_ZONE="Europe/Berlin")
@pytest.mark.parametrize("stored", [FOLD_CEST, FOLD_CET], ids=["CEST", "CET"])
@pytest.mark.parametrize("with_choice", [True, False], ids=["as-shown", "without-the-choice"])
def test_a_scheduled_post_keeps_its_folded_time_when_saved_unchanged(
    as_editor, stored, with_choice
):
    post = make_post(status=S.SCHEDULED, publish_at=stored, body="Before")
    page = as_editor.get(change_url(post))
    html = page.content.decode()
    assert fold_choices(html) == [FOLD_CEST.isoformat(), FOLD_CET.isoformat()]
    assert f'value="{stored.isoformat()}" checked' in html, "the stored instant is chosen"
    data = form_data(page)
    assert (data["publish_at_0"], data["publish_at_1"]) == ("2099-10-25", "02:30:00")
    if not with_choice:
        del data["publish_at_2"]  # a form from before the choice existed, or a script
    response = as_editor.post(change_url(post), {**data, "body": "After"})
    assert response.status_code == 302, response.content.decode()[:3000]
    post.refresh_from_db()
    assert (post.body, post.publish_at) == ("After", stored)


@pytest.mark.django_db
@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_typed_folded_time_offers_both_instants_and_takes_the_one_chosen(as_editor):
    response = schedule(as_editor, "2099-10-25", "02:30:00")
    html = response.content.decode()
    assert "Which one: 02:30 CEST or 02:30 CET? Choose it below." in html
    assert "set your time zone" not in html
    assert fold_choices(html) == [FOLD_CEST.isoformat(), FOLD_CET.isoformat()]
    assert "02:30:00 CEST, the first time, before the clocks go back" in html
    assert "02:30:00 CET, the second time, after the clocks go back" in html
    assert "checked" not in html.split('name="publish_at_2"', 1)[1].split("</div>")[0]

    data = {**form_data(response), "publish_at_2": FOLD_CET.isoformat()}
    assert as_editor.post(ADD_URL, data).status_code == 302
    assert Post.objects.get(slug="clock-change").publish_at == FOLD_CET


@pytest.mark.django_db
@override_settings(TIME_ZONE="Europe/Berlin")
def test_the_other_reading_of_a_stored_folded_time_can_be_chosen(as_editor):
    post = make_post(status=S.SCHEDULED, publish_at=FOLD_CEST)
    data = form_data(as_editor.get(change_url(post)))
    response = as_editor.post(change_url(post), {**data, "publish_at_2": FOLD_CET.isoformat()})
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Post.objects.get(pk=post.pk).publish_at == FOLD_CET


@pytest.mark.django_db
@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_choice_made_for_another_time_does_not_decide_a_new_folded_time(as_editor):
    """The stored instant's choice names its own wall time; a newly typed fold is asked about."""
    post = make_post(status=S.SCHEDULED, publish_at=datetime(2099, 10, 25, 0, 45, tzinfo=UTC))
    data = form_data(as_editor.get(change_url(post)))
    response = as_editor.post(change_url(post), {**data, "publish_at_1": "02:30:00"})
    assert response.status_code == 200
    assert "Which one: 02:30 CEST or 02:30 CET?" in response.content.decode()
    assert Post.objects.get(pk=post.pk).publish_at == datetime(2099, 10, 25, 0, 45, tzinfo=UTC)
