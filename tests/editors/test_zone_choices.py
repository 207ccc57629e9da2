"""The zone picker's list: current zones by region, old names left out, a stored one kept."""

import pytest
from django.urls import reverse

from editors.forms import MyTimeZoneForm, TimeZoneForm
from editors.models import EditorProfile
from editors.zones import current_zone_names, grouped_zone_choices, zone_label

pytestmark = pytest.mark.django_db


def flat(choices) -> dict[str, str]:
    values = {}
    for value, label in choices:
        if isinstance(label, list):
            values.update(label)
        else:
            values[value] = label
    return values


@pytest.mark.parametrize(
    "old", ["Asia/Calcutta", "Etc/GMT+1", "US/Eastern", "Europe/Kiev", "GB", "Etc/UTC"]
)
def test_old_names_and_etc_zones_are_not_offered(old):
    assert old not in flat(grouped_zone_choices())


@pytest.mark.parametrize(
    "zone",
    ["Asia/Kolkata", "Asia/Tokyo", "Europe/Amsterdam", "America/Argentina/Buenos_Aires", "UTC"],
)
def test_current_zones_are_offered(zone):
    assert zone in flat(grouped_zone_choices())


def test_zones_are_grouped_by_region_after_the_site_zone_and_utc(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    choices = grouped_zone_choices()
    assert choices[:2] == [("", "The site's zone (Europe/Berlin)"), ("UTC", "UTC")]
    regions = [region for region, _ in choices[2:]]
    assert regions == sorted(regions)
    assert {"Africa", "America", "Asia", "Europe", "Pacific"} <= set(regions)
    for region, zones in choices[2:]:
        assert all(value.startswith(f"{region}/") for value, _ in zones)
        assert [label for _, label in zones] == sorted(label for _, label in zones)


@pytest.mark.parametrize(
    ("zone", "label"),
    [
        ("Asia/Tokyo", "Tokyo"),
        ("America/New_York", "New York"),
        ("America/Argentina/Buenos_Aires", "Argentina / Buenos Aires"),
        ("UTC", "UTC"),
    ],
)
def test_zone_labels_read_as_places(zone, label):
    assert zone_label(zone) == label


def test_every_offered_zone_is_one_the_profile_accepts():
    from editors.zones import zone_names

    assert set(current_zone_names()) <= set(zone_names())


def test_a_stored_old_name_stays_on_top_and_saves_unchanged(editor):
    profile = EditorProfile.objects.create(user=editor, time_zone="Asia/Calcutta")
    choices = grouped_zone_choices("Asia/Calcutta")
    assert choices[1] == (
        "Asia/Calcutta",
        "Asia/Calcutta (an older name; pick its current one below)",
    )
    form = MyTimeZoneForm({"time_zone": "Asia/Calcutta"}, instance=profile)
    assert form.is_valid(), form.errors
    form.save()
    assert EditorProfile.objects.get(user=editor).time_zone == "Asia/Calcutta"


def test_an_old_name_typed_in_is_refused(editor):
    form = TimeZoneForm({"time_zone": "Asia/Calcutta"}, instance=EditorProfile(user=editor))
    assert not form.is_valid()


def test_the_page_and_the_user_admin_use_the_zone_picker(client, admin_user):
    client.force_login(admin_user)
    for url in (reverse("my_time_zone"), reverse("admin:auth_user_change", args=[admin_user.pk])):
        html = client.get(url).content.decode()
        assert "data-zone-picker" in html, url
        assert "editors/zone_picker.js" in html, url
        assert '<optgroup label="Europe">' in html, url
        assert 'value="Asia/Calcutta"' not in html, url


@pytest.mark.parametrize(
    ("old", "current"),
    [
        ("Asia/Calcutta", "Asia/Kolkata"),
        ("US/Eastern", "America/New_York"),
        ("GB", "Europe/London"),
    ],
)
def test_old_names_a_browser_may_report_map_to_an_offered_zone(old, current):
    from editors.zones import old_zone_names

    assert old_zone_names()[old] == current
    assert set(old_zone_names().values()) <= set(current_zone_names())
    assert not set(old_zone_names()) & set(current_zone_names())
