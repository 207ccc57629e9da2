"""Bodies are rendered once, when saved; page views read the stored HTML."""

from unittest import mock

import pytest
from django.urls import reverse

from publishing import posts, rendering
from publishing.models import Post
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db

# Hostile for a backtracking or quadratic parser; linear for this one (timed in bench/).
HOSTILE = {
    "unclosed links": "[a](b " * 4000,
    "unclosed brackets": "[" * 24000,
    "nested emphasis": "*a **b " * 4000,
    "backtick runs": "".join("`" * i + "a" for i in range(1, 200)),
    "deep lists": "".join("  " * i + "- a\n" for i in range(60)),
}


def test_saving_a_body_stores_its_html_and_excerpt(editor):
    post = posts.save_post(
        post=Post(title="T", slug="t", body="Hello **world**, [link](https://example.com)."),
        user=editor,
    )
    assert "<strong>world</strong>" in post.body_html
    assert post.excerpt == "Hello world, link."
    post.body = "Changed *text*."
    post = posts.save_post(post=post, user=editor)
    assert post.body_html == "<p>Changed <em>text</em>.</p>\n"
    assert post.excerpt == "Changed text."


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_bodies_render(name, editor):
    post = posts.save_post(post=Post(title=name, slug="hostile", body=HOSTILE[name]), user=editor)
    assert post.body_html and post.excerpt is not None


def test_a_page_view_never_renders_markdown(client):
    post = make_post(status=Post.Status.PUBLISHED, slug="stored", body="Stored *body*.")
    refuse = mock.Mock(side_effect=AssertionError("a page view rendered Markdown"))
    with (
        mock.patch.object(rendering, "markdown_to_html", refuse),
        mock.patch.object(rendering.pyromark, "html", refuse),
        mock.patch.object(rendering.nh3, "clean", refuse),
    ):
        index = client.get(reverse("publishing:index"))
        detail = client.get(post.get_absolute_url())
        feed = client.get(reverse("publishing:feed"))
    assert index.status_code == detail.status_code == feed.status_code == 200
    assert "Stored body." in index.content.decode()
    assert "<em>body</em>" in detail.content.decode()
    assert "&lt;em&gt;body&lt;/em&gt;" in feed.content.decode()
    refuse.assert_not_called()
