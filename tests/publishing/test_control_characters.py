"""Text no page can carry is refused where it is saved; what is stored renders anyway.

A title with a control character (``"Control \\x01 ... \\x0b"``) once live made ``/feed/`` a
500 for every visitor and ``exportsite`` exit 1: XML 1.0 cannot carry it. The services refuse
such characters in titles, slugs and bodies (tabs and line breaks are fine in a body) with a
message naming the field; the feed and the sitemap leave out what XML cannot carry, for posts
stored before.
"""

from datetime import timedelta
from io import StringIO
from xml.dom import minidom

import pytest
from django.core.management import call_command
from django.urls import reverse
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from coordination.clock import database_now
from plugins.builtin.static_export import CURRENT
from publishing import batches, posts, revisions
from publishing.exceptions import InvalidContent, NotPublishable, PublishingError
from publishing.models import Post, PostRevision
from publishing.validation import xml_text
from tests.publishing.conftest import due_post, form_data, live_post, make_post

pytestmark = pytest.mark.django_db

S = Post.Status
REPORTED = "Control \x01 ... \x0b"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("title", REPORTED, "The title contains a control character (U+0001) at position 9"),
        ("title", "Two\nlines", "The title contains a control character (U+000A) at position 4"),
        ("title", "Bell\x07", "The title contains a control character (U+0007) at position 5"),
        ("title", "Not a character \uffff", "The title contains a character (U+FFFF) at"),
        ("slug", "slug\x00", "The slug contains a control character (U+0000) at position 5"),
        ("body", "ok\n\tok\nbad \x0c", "The body contains a control character (U+000C) at line 3"),
        ("body", "\x1b[31mred", "The body contains a control character (U+001B) at line 1"),
    ],
)
def test_saving_text_no_page_can_carry_is_refused_naming_the_field(editor, field, value, message):
    values = {"title": "Fine", "slug": "fine", "body": "Fine body.", field: value}
    with pytest.raises(InvalidContent) as refused:
        posts.save_post(post=Post(**values), user=editor)
    assert list(refused.value.errors) == [field]
    assert refused.value.errors[field].startswith(message)
    assert refused.value.errors[field].endswith("remove it.")
    assert not Post.objects.exists(), "nothing saved"


def test_editing_a_post_to_such_text_keeps_what_it_had(editor):
    post = posts.save_post(post=Post(title="Fine", slug="fine", body="Body."), user=editor)
    post.title = REPORTED
    with pytest.raises(InvalidContent, match="title"):
        posts.save_post(post=post, user=editor, expected_version=post.version)
    assert Post.objects.get(pk=post.pk).title == "Fine"


def test_tabs_line_breaks_and_other_characters_are_fine_in_a_body(editor):
    body = "Columns:\ta\tb\r\nNext line\nC1 \x85 and DEL \x7f, emoji 🙂, RTL \u202e."
    post = posts.save_post(post=Post(title="Fine 🙂", slug="fine", body=body), user=editor)
    assert Post.objects.get(pk=post.pk).body == body


def test_publishing_a_post_stored_with_such_text_is_refused(editor):
    post = make_post(title=REPORTED)
    with pytest.raises(NotPublishable, match=r"the title contains a control character \(U\+0001\)"):
        posts.publish_now(post=post, user=editor)
    stored_body = make_post(body="Bad \x01 body")
    with pytest.raises(NotPublishable, match=r"the body contains a control character"):
        posts.schedule_post(
            post=stored_body, publish_at=database_now() + timedelta(hours=1), user=editor
        )


def test_the_publish_job_marks_such_a_post_failed_instead_of_publishing_it():
    post = due_post(title=REPORTED)
    result = batches.publish_due()
    assert result.failed == [post.pk]
    post.refresh_from_db()
    assert post.status == S.SCHEDULED and "U+0001" in post.last_error


def test_a_revision_with_such_text_is_refused(editor):
    post = live_post()
    for title, body, field in ((REPORTED, "Fine.", "title"), ("Fine", "Bad \x02", "body")):
        with pytest.raises(NotPublishable, match=f"the {field} contains a control character"):
            revisions.schedule_revision(
                post=post,
                title=title,
                body=body,
                publish_at=database_now() + timedelta(hours=1),
                user=editor,
            )
    assert not PostRevision.objects.filter(status=PostRevision.Status.SCHEDULED).exists()


def test_the_admin_form_shows_the_problem_beside_the_field(as_editor):
    add = reverse("admin:publishing_post_add")
    data = form_data(as_editor.get(add))
    data.update(title=REPORTED, slug="control", body="Body.")
    page = as_editor.post(add, data)
    assert page.status_code == 200, "shown again, not saved"
    assert "The title contains a control character (U+0001) at position 9" in page.content.decode()
    assert not Post.objects.exists()


def parsed(response) -> minidom.Document:
    assert response.status_code == 200
    return minidom.parseString(response.content)


def test_a_live_post_stored_with_such_text_leaves_the_feed_and_sitemap_working(client):
    post = live_post(title=REPORTED, slug="control-post")
    Post.objects.filter(pk=post.pk).update(body_html="<p>Body \x01 with \x0b controls</p>")

    feed = parsed(client.get(reverse("publishing:feed")))
    titles = [node.firstChild.data for node in feed.getElementsByTagName("title")]
    assert "Control  ... " in titles
    assert "<p>Body  with  controls</p>" in client.get(reverse("publishing:feed")).content.decode(
        "utf-8"
    ).replace("&lt;", "<").replace("&gt;", ">")

    parsed(client.get(reverse("publishing:sitemap")))
    section = reverse("publishing:sitemap_section", kwargs={"section": "posts"})
    locations = [
        node.firstChild.data for node in parsed(client.get(section)).getElementsByTagName("loc")
    ]
    assert "http://testserver/posts/control-post/" in locations


def test_exportsite_writes_a_site_with_such_a_post(tmp_path):
    live_post(title=REPORTED, slug="control-post")
    call_command("exportsite", str(tmp_path), stdout=StringIO())
    feed = (tmp_path / CURRENT).resolve(strict=True) / "feed" / "index.xml"
    assert "Control  ... " in minidom.parse(str(feed)).getElementsByTagName("entry")[0].toxml()


@pytest.mark.parametrize(
    ("text", "carried"),
    [("a\x01b\x0bc", "abc"), ("tab\tnew\nline\r", "tab\tnew\nline\r"), ("\ufffe\uffffx", "x")],
)
def test_xml_text_leaves_out_exactly_what_xml_cannot_carry(text, carried):
    assert xml_text(text) == carried


# Any text at all, weighted towards the characters that break XML and HTML.
texts = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(["\x00", "\x01", "\x0b", "\t", "\n", "\r", "<", "&", "]", "\uffff"]),
    ),
    max_size=60,
)


@hypothesis_settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=texts, body=texts)
def test_whatever_the_services_accept_every_public_page_renders(client, title, body):
    Post.objects.all().delete()
    try:
        post = posts.save_post(post=Post(title=title, slug="any", body=body), user=None)
        posts.publish_now(post=post, user=None)
    except PublishingError:
        return  # refused, with a reason: nothing of it is live
    for url in (
        post.get_absolute_url(),
        reverse("publishing:index"),
        reverse("publishing:sitemap"),
        reverse("publishing:sitemap_section", kwargs={"section": "posts"}),
    ):
        assert client.get(url).status_code == 200, url
    parsed(client.get(reverse("publishing:feed")))
