"""The admin's "View on site" of a post that is not live opens a preview for an editor who
may preview, instead of the public site's 404."""

from datetime import timedelta

import pytest

from coordination.clock import database_now
from publishing.models import Post
from tests.publishing.conftest import _staff, make_post
from tests.publishing.test_public_leaks import view_on_site_url

pytestmark = pytest.mark.django_db

S = Post.Status


@pytest.mark.parametrize(
    ("status", "label"),
    [(S.DRAFT, "not published: draft"), (S.SCHEDULED, "not published: scheduled")],
)
def test_view_on_site_of_a_post_not_live_opens_a_preview(client, editor, status, label):
    values = {"publish_at": database_now() + timedelta(days=1)} if status == S.SCHEDULED else {}
    post = make_post(title="Coming soon", slug="coming-soon", status=status, **values)
    client.force_login(editor)
    response = client.get(view_on_site_url(post.pk))
    assert response.status_code == 302
    assert response["Location"].startswith("/preview/")
    client.logout()
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert "Coming soon" in page.content.decode() and label in page.content.decode()


def test_view_on_site_of_a_draft_says_why_to_staff_who_may_not_preview(client):
    post = make_post(title="Viewer draft", slug="viewers-draft")
    client.force_login(_staff("viewer", ["view_post"]))
    response = client.get(view_on_site_url(post.pk), follow=True)
    assert response.redirect_chain[-1][0] == f"/admin/publishing/post/{post.pk}/change/"
    assert "“Viewer draft” is not on the site: its status is “Draft”." in response.content.decode()
