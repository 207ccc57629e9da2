"""Deleting posts: a superuser can delete any post; its publish history is kept, titled.

A post that was ever scheduled or published has a publish history. Only a superuser may
delete such a post; the history stays (``PublishEvent.post`` becomes empty, ``post_title``
names the post) and a "Post deleted" event records who deleted it.
"""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from coordination.clock import database_now
from publishing import posts
from publishing.models import Post, PublishEvent
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db

S = Post.Status
K = PublishEvent.Kind
LIST_URL = reverse("admin:publishing_post_changelist")


def delete_url(post: Post) -> str:
    return reverse("admin:publishing_post_delete", args=[post.pk])


def post_with_history(editor, title: str = "Old news") -> Post:
    post = make_post(title=title)
    posts.schedule_post(post=post, publish_at=database_now() + timedelta(hours=1), user=editor)
    posts.publish_now(post=post, user=editor)
    return post


def test_a_superuser_deletes_a_published_post_and_its_history_is_kept(client, admin_user, editor):
    post = post_with_history(editor)
    client.force_login(admin_user)
    confirm = client.get(delete_url(post))
    assert confirm.status_code == 200
    assert "publish history is kept" in confirm.content.decode()
    assert client.post(delete_url(post), {"post": "yes"}).status_code == 302
    assert not Post.objects.filter(pk=post.pk).exists()
    history = list(
        PublishEvent.objects.order_by("at", "id").values_list("post", "post_title", "kind")
    )
    assert history == [
        (None, "Old news", K.SCHEDULED),
        (None, "Old news", K.PUBLISHED),
        (None, "Old news", K.DELETED),
    ]
    deleted = PublishEvent.objects.get(kind=K.DELETED)
    assert deleted.user == admin_user
    events_page = client.get(reverse("admin:publishing_publishevent_changelist"))
    assert "Old news (deleted)" in events_page.content.decode()


def test_a_superuser_deletes_posts_with_history_from_the_list(client, admin_user, editor):
    posts = [post_with_history(editor, "One"), post_with_history(editor, "Two")]
    client.force_login(admin_user)
    data = {"action": "delete_selected", "_selected_action": [p.pk for p in posts]}
    confirm = client.post(LIST_URL, data)
    assert confirm.status_code == 200
    response = client.post(LIST_URL, {**data, "post": "yes"}, follow=True)
    assert "Successfully deleted 2 posts." in response.content.decode()
    assert not Post.objects.exists()
    assert sorted(
        PublishEvent.objects.filter(kind=K.DELETED).values_list("post_title", flat=True)
    ) == [
        "One",
        "Two",
    ]


def test_an_editor_cannot_delete_a_post_with_history(client, editor):
    post = post_with_history(editor)
    client.force_login(editor)
    assert client.post(delete_url(post), {"post": "yes"}).status_code == 403
    data = {"action": "delete_selected", "_selected_action": [post.pk]}
    page = client.post(LIST_URL, data).content.decode()
    assert "only superusers may delete them" in page
    assert client.post(LIST_URL, {**data, "post": "yes"}).status_code == 403
    assert Post.objects.filter(pk=post.pk).exists()
    with pytest.raises(PermissionDenied, match="only a superuser"):
        posts.delete_post(post=post, user=editor)


def test_a_draft_without_history_is_deleted_without_a_trace(client, editor):
    post = make_post()
    client.force_login(editor)
    assert client.post(delete_url(post), {"post": "yes"}).status_code == 302
    assert not Post.objects.filter(pk=post.pk).exists()
    assert not PublishEvent.objects.exists()
