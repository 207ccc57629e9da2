"""In Chromium: an editor finds their zone by typing, or takes the one their browser is set to."""

from django.urls import reverse

from editors.models import EditorProfile
from tests.support.browser import screenshot, signed_in

MY_ZONE = reverse("my_time_zone")


def visible_zones(page) -> list[str]:
    return page.eval_on_selector_all(
        "#id_time_zone optgroup:not([hidden]) option:not([hidden])", "os => os.map(o => o.value)"
    )


def test_the_browser_zone_is_offered_first_and_typing_finds_a_zone(
    live_server, editor, browser, request
):
    page = signed_in(browser, live_server, "editor", timezone_id="Asia/Kolkata")
    try:
        page.goto(f"{live_server.url}{MY_ZONE}")
        offer = page.locator(".zone-picker-browser")
        offer.wait_for(state="visible")
        assert offer.inner_text().startswith("Your browser is set to Asia/Kolkata.")
        screenshot(page, "zone-picker-browser-zone")

        page.fill(".zone-picker-find", "kolk")
        assert visible_zones(page) == ["Asia/Kolkata"]
        page.fill(".zone-picker-find", "buenos aires")
        assert visible_zones(page) == ["America/Argentina/Buenos_Aires"]
        page.fill(".zone-picker-find", "calcutta")
        assert visible_zones(page) == ["Asia/Kolkata"], "an old name finds the current zone"
        page.fill(".zone-picker-find", "atlantis")
        assert visible_zones(page) == []
        assert page.locator(".zone-picker-none").is_visible()
        screenshot(page, "zone-picker-no-match")

        page.fill(".zone-picker-find", "")
        page.click("[data-use-browser-zone]")
        assert page.input_value("#id_time_zone") == "Asia/Kolkata"
        page.click("input[type=submit]")
        page.wait_for_selector(".messagelist .success")
        assert EditorProfile.objects.get(user=editor).time_zone == "Asia/Kolkata"
        assert not page.locator(".zone-picker-browser").is_visible(), "already the chosen zone"
        screenshot(page, "zone-picker-saved")
    except BaseException:
        screenshot(page, request.node.name)
        raise
