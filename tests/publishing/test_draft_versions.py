"""A draft keeps its earlier texts: one version per save that changed the title or body, at
most draft_versions.KEPT a post, each compared with the draft now and restorable."""

from datetime import timedelta

import pytest
from django.urls import reverse

from coordination.clock import database_now
from publishing import draft_versions, posts
from publishing.models import DraftVersion, Post
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db

S = Post.Status


def save(post: Post, user=None, **values) -> Post:
    current = Post.objects.get(pk=post.pk)
    for name, value in values.items():
        setattr(current, name, value)
    return posts.save_post(post=current, user=user, expected_version=current.version)


def test_each_save_that_changes_the_text_keeps_the_text_it_replaced(editor):
    post = make_post(title="Opening hours", body="We open at 9.")
    save(post, editor, body="We open at 8.")
    save(post, editor, slug="hours", publish_at=database_now() + timedelta(days=1))
    save(post, editor, title="Summer hours")
    kept = draft_versions.versions_of(post)
    assert [(v.number, v.title, v.body) for v in kept] == [
        (2, "Opening hours", "We open at 8."),
        (1, "Opening hours", "We open at 9."),
    ], "no version for a save of the slug and times only"
    assert kept[0].saved_by == "editor"


def test_a_live_posts_saves_keep_no_draft_versions(editor):
    post = make_post(status=S.PUBLISHED, body="Live text.")
    save(post, editor, body="Edited live.")
    assert not DraftVersion.objects.filter(post=post).exists()


def test_the_oldest_versions_go_past_the_bound(editor, monkeypatch):
    monkeypatch.setattr(draft_versions, "KEPT", 3)
    post = make_post(body="v0")
    for n in range(1, 6):
        save(post, editor, body=f"v{n}")
    assert [v.body for v in draft_versions.versions_of(post)] == ["v4", "v3", "v2"]


def test_the_page_compares_a_version_with_now_and_restores_it(as_editor, editor):
    post = make_post(title="Opening hours", body="We open at 9.\n\nDogs are welcome.")
    save(post, editor, body="We open at 8.\n\nDogs are welcome.")
    change = reverse("admin:publishing_post_change", args=[post.pk])
    url = reverse("admin:publishing_post_draft_versions", args=[post.pk])
    assert f'href="{url}"' in as_editor.get(change).content.decode()

    page = as_editor.get(f"{url}?compare=1").content.decode()
    assert "<del>9</del>" in page and "<ins>8</ins>" in page
    restored = as_editor.post(
        url, {"restore": "1", "version": str(Post.objects.get(pk=post.pk).version)}
    )
    assert restored.status_code == 302 and restored.url == change
    post.refresh_from_db()
    assert post.body == "We open at 9.\n\nDogs are welcome."
    assert [v.body for v in draft_versions.versions_of(post)][0].startswith("We open at 8."), (
        "the text restoring replaced is kept too"
    )


def test_a_stale_restore_changes_nothing(as_editor, editor):
    post = make_post(body="First.")
    save(post, editor, body="Second.")
    url = reverse("admin:publishing_post_draft_versions", args=[post.pk])
    stale = str(Post.objects.get(pk=post.pk).version)
    save(post, editor, body="A colleague's third.")
    as_editor.post(url, {"restore": "1", "version": stale})
    assert Post.objects.get(pk=post.pk).body == "A colleague's third."


def test_restoring_no_such_version_is_not_found(as_editor):
    post = make_post(body="First.")
    url = reverse("admin:publishing_post_draft_versions", args=[post.pk])
    version = str(post.version)
    assert as_editor.post(url, {"restore": "x", "version": version}).status_code == 404
    assert as_editor.post(url, {"restore": "7", "version": version}).status_code == 404
