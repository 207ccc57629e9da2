"""In Chromium, as an editor: the post page's images (upload by the file picker and by
dropping a file on the body, alt text required, insert at the cursor, feature one), the
toolbar and live preview, the question before leaving unsaved changes, the text kept in the
browser and offered back; an anonymous visitor asking for the image before and after the post
goes live; the media library. On a new post's page, before its first save: upload, insert
and feature, the images private until a release puts the post live. Screenshots go to
``test-artifacts/``."""

import base64
import re

import pytest
from django.urls import reverse

from media.models import FeaturedImage, Image
from publishing import posts
from publishing.models import Post
from releases import actions as releases
from tests.media.conftest import image_bytes
from tests.support.browser import screenshot, signed_in

pytestmark = [pytest.mark.sqlite]


def sign_in(browser, live_server):
    return signed_in(browser, live_server, "editor", timezone_id="UTC")


def test_an_editor_writes_with_images_a_preview_and_nothing_lost(
    live_server, editor, browser, request
):
    post = posts.save_post(
        post=Post(title="Harbour day", slug="harbour-day", body="Boats at dawn.\n\nThe end."),
        user=editor,
    )
    change = f"{live_server.url}{reverse('admin:publishing_post_change', args=[post.pk])}"
    page = sign_in(browser, live_server)
    try:
        page.goto(change)
        # The live preview renders what is there, then follows the typing.
        page.wait_for_selector("#editor-preview-body p:has-text('Boats at dawn.')")
        body = page.locator("#id_body")
        body.click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\n\nA **calm** sea.")
        page.wait_for_selector("#editor-preview-body strong:has-text('calm')")
        # The toolbar wraps the selection.
        page.evaluate(
            "() => { const b = document.getElementById('id_body');"
            " const at = b.value.indexOf('dawn'); b.setSelectionRange(at, at + 4); }"
        )
        page.click(".editor-tool[data-tool=italic]")
        assert "Boats at _dawn_." in body.input_value()

        # Upload through the file picker, at the cursor (after the first paragraph).
        page.evaluate(
            "() => { const b = document.getElementById('id_body');"
            " const at = b.value.indexOf('\\n\\nThe end.'); b.setSelectionRange(at, at); }"
        )
        with page.expect_file_chooser() as chooser:
            page.click("#images-choose")
        chooser.value.set_files(
            {
                "name": "harbour.jpg",
                "mimeType": "image/jpeg",
                "buffer": image_bytes(size=(1600, 900)),
            }
        )
        page.wait_for_selector("#images-alt")
        page.click("#images-upload")
        error = page.locator("#images-error")
        assert "Describe the image in a few words" in error.inner_text()
        assert not Image.objects.exists()
        page.fill("#images-alt", "Fishing boats in the harbour at dawn")
        page.click("#images-upload")
        page.wait_for_selector("#images-status:has-text('Inserted')")
        image = Image.objects.get()
        text = body.input_value()
        assert (
            f"Boats at _dawn_.\n\n![Fishing boats in the harbour at dawn]({image.url})\n\nThe end."
            in text
        )
        page.wait_for_selector(f"#editor-preview-body img[src='{image.url}']")

        # A file dropped on the body goes in where it is dropped, after its alt text.
        dropped = base64.b64encode(image_bytes("PNG", size=(640, 480), color=(20, 90, 200)))
        page.evaluate(
            """(data) => {
              const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
              const file = new File([bytes], "chart.png", { type: "image/png" });
              const transfer = new DataTransfer();
              transfer.items.add(file);
              const b = document.getElementById("id_body");
              b.setSelectionRange(0, 0);
              const how = { dataTransfer: transfer, bubbles: true, cancelable: true };
              b.dispatchEvent(new DragEvent("dragover", how));
              b.dispatchEvent(new DragEvent("drop", how));
            }""",
            dropped.decode(),
        )
        page.fill("#images-alt", "A chart of the tides")
        page.keyboard.press("Enter")
        page.wait_for_selector("#images-status:has-text('A chart of the tides')")
        chart = Image.objects.get(alt="A chart of the tides")
        assert body.input_value().startswith(f"![A chart of the tides]({chart.url})\n\n")

        # Reuse: the library in the section lists both; feature the harbour.
        page.fill("#images-search", "harbour")
        page.wait_for_selector("#images-list li:has-text('Fishing boats') >> text=Feature")
        page.wait_for_function("() => document.querySelectorAll('#images-list li').length === 1")
        page.click("#images-list li:has-text('Fishing boats') >> text=Feature")
        page.wait_for_selector("#images-featured-current img")
        assert FeaturedImage.objects.get(post=post).image == image
        screenshot(page, "media-post-page-editing")

        # Leaving by a link with unsaved text asks first; staying keeps everything.
        questions = []
        page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
        page.click("#content-start a, .breadcrumbs a >> nth=-1")
        assert questions and "not saved" in questions[0]
        assert page.url == change
        # A closed tab leaves the text in this browser; coming back offers it.
        typed = body.input_value()
        context = page.context
        page.close(run_before_unload=False)
        page = context.new_page()
        page.goto(change)
        page.wait_for_selector("#editor-restore")
        kept = page.inner_text("#editor-restore")
        assert re.search(r"\(\d{4}-\d\d-\d\d \d\d:\d\d [A-Z+\-0-9]+\)", kept), kept
        screenshot(page, "media-restore-offer")
        assert page.locator("#id_body").input_value() == "Boats at dawn.\n\nThe end."
        page.click("#editor-restore-yes")
        assert page.locator("#id_body").input_value() == typed
        # Saved: the kept copy is gone, and the next visit offers nothing.
        page.click("input[name=_continue]")
        page.wait_for_selector(".messagelist .success")
        post.refresh_from_db()
        assert post.body == typed.replace("\n", "\r\n") or post.body == typed
        page.goto(change)
        page.wait_for_selector("#editor-preview-body img")
        assert page.locator("#editor-restore").count() == 0

        # An anonymous visitor: nothing before the post is live, the image once it is.
        anonymous = browser.new_context()
        image_url = f"{live_server.url}{image.url}"
        assert anonymous.request.get(image_url).status == 404
        posts.publish_now(post=Post.objects.get(pk=post.pk), user=editor)
        assert anonymous.request.get(image_url).status == 200
        visitor = anonymous.new_page()
        visitor.goto(f"{live_server.url}{post.get_absolute_url()}")
        visitor.wait_for_function(
            "() => [...document.images].length >= 3"
            " && [...document.images].every((i) => i.complete && i.naturalWidth > 0)"
        )
        screenshot(visitor, "media-public-page")

        # The media library: searchable, and says where each image is used.
        page.goto(f"{live_server.url}{reverse('admin:media_image_changelist')}?q=harbour")
        assert page.locator("#result_list tbody tr").count() == 1
        assert "1 post" in page.inner_text("#result_list")
        screenshot(page, "media-library")
        page.goto(f"{live_server.url}{reverse('admin:media_image_change', args=[image.pk])}")
        used = page.inner_text(".field-where_used")
        assert "Harbour day (published, featured)" in used
        screenshot(page, "media-image-page")
    except BaseException:
        screenshot(page, request.node.name)
        raise


def test_an_editor_adds_images_to_a_new_post_that_stay_private_until_it_is_live(
    live_server, editor, browser, request
):
    page = sign_in(browser, live_server)
    try:
        page.goto(f"{live_server.url}{reverse('admin:publishing_post_add')}")
        page.wait_for_selector("#images-panel:has-text('seen only by editors')")
        page.fill("#id_title", "Opening day")
        body = page.locator("#id_body")
        body.fill("Doors open at nine.\n\nSee you there.")
        page.wait_for_function("() => document.getElementById('id_slug').value === 'opening-day'")

        # Upload through the file picker, at the cursor (after the first paragraph).
        page.evaluate(
            "() => { const b = document.getElementById('id_body');"
            " const at = b.value.indexOf('\\n\\nSee you'); b.setSelectionRange(at, at); }"
        )
        with page.expect_file_chooser() as chooser:
            page.click("#images-choose")
        chooser.value.set_files(
            {"name": "doors.jpg", "mimeType": "image/jpeg", "buffer": image_bytes()}
        )
        page.click("#images-upload")
        assert "Describe the image in a few words" in page.inner_text("#images-error")
        assert not Image.objects.exists()
        page.fill("#images-alt", "The new doors, open")
        page.click("#images-upload")
        page.wait_for_selector("#images-status:has-text('Inserted')")
        doors = Image.objects.get()
        assert body.input_value() == (
            f"Doors open at nine.\n\n![The new doors, open]({doors.url})\n\nSee you there."
        )
        page.wait_for_selector(f"#editor-preview-body img[src='{doors.url}']")

        # A second image, dropped on the body at its start, becomes the featured image.
        dropped = base64.b64encode(image_bytes("PNG", size=(640, 480), color=(20, 90, 200)))
        page.evaluate(
            """(data) => {
              const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
              const transfer = new DataTransfer();
              transfer.items.add(new File([bytes], "crowd.png", { type: "image/png" }));
              const b = document.getElementById("id_body");
              b.setSelectionRange(0, 0);
              const how = { dataTransfer: transfer, bubbles: true, cancelable: true };
              b.dispatchEvent(new DragEvent("dragover", how));
              b.dispatchEvent(new DragEvent("drop", how));
            }""",
            dropped.decode(),
        )
        page.fill("#images-alt", "The crowd at the doors")
        page.keyboard.press("Enter")
        page.wait_for_selector("#images-status:has-text('The crowd at the doors')")
        crowd = Image.objects.get(alt="The crowd at the doors")
        assert body.input_value().startswith(f"![The crowd at the doors]({crowd.url})\n\n")
        page.click("#images-list li:has-text('The crowd') >> text=Feature")
        page.wait_for_selector("#images-status:has-text('when you save the post')")
        assert page.locator("#images-featured-current img").get_attribute("alt") == (
            "The crowd at the doors"
        )
        page.wait_for_selector(f"#editor-preview-body img[src='{crowd.url}']")
        screenshot(page, "media-new-post-images")

        # Uploaded, in no saved post yet: nobody but the editors sees them.
        anonymous = browser.new_context()
        urls = {image: f"{live_server.url}{image.url}" for image in (doors, crowd)}
        assert [anonymous.request.get(url).status for url in urls.values()] == [404, 404]
        assert page.request.get(urls[doors]).status == 200, "the editor sees it"

        page.click("input[name=_continue]")
        page.wait_for_selector(".messagelist .success")
        post = Post.objects.get(title="Opening day")
        assert page.url.endswith(reverse("admin:publishing_post_change", args=[post.pk]))
        assert FeaturedImage.objects.get(post=post).image == crowd
        page.wait_for_selector("#images-featured-current img[alt='The crowd at the doors']")
        assert [anonymous.request.get(url).status for url in urls.values()] == [404, 404]

        # Put live by a release, with no other edit of the post: served from then on.
        release = releases.create_release(name="Opening", user=editor)
        releases.add_item(release=release, post=post, user=editor)
        assert [anonymous.request.get(url).status for url in urls.values()] == [404, 404]
        releases.release_now(release=release, user=editor)
        assert [anonymous.request.get(url).status for url in urls.values()] == [200, 200]
        visitor = anonymous.new_page()
        visitor.goto(f"{live_server.url}{post.get_absolute_url()}")
        visitor.wait_for_function(
            "() => [...document.images].length >= 3"
            " && [...document.images].every((i) => i.complete && i.naturalWidth > 0)"
        )
        screenshot(visitor, "media-new-post-public-page")
    except BaseException:
        screenshot(page, request.node.name)
        raise
