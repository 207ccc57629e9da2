"""The static export: complete, atomic switches, skipped when nothing changed, old builds pruned."""

import logging
import os
import re
import threading
from pathlib import Path

import pytest
from django.test import override_settings

from coordination.models import JobRun
from plugins.builtin import static_export
from plugins.builtin.static_export import CURRENT, ExportError, export_site
from plugins.testing import context_for
from publishing.models import Post
from tests.publishing.conftest import make_post
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db

POST_LINK = re.compile(r'href="/posts/([\w-]+)/"')
ROUND = re.compile(r"round (\d+)")


def builds(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "builds").iterdir() if not p.name.startswith("."))


def live(root: Path) -> Path:
    return (root / CURRENT).resolve(strict=True)


@override_settings(INSTATIC_POSTS_PER_PAGE=2)
def test_the_export_has_every_page_of_the_live_site(tmp_path):
    posts = [make_post(status=Post.Status.PUBLISHED, title=f"Live {i}") for i in range(3)]
    make_post(status=Post.Status.DRAFT, title="Draft", slug="a-draft")
    result = export_site(tmp_path)
    assert result.changed
    site = live(tmp_path)
    assert (tmp_path / CURRENT).is_symlink() and site.parent == tmp_path / "builds"
    index = (site / "index.html").read_text()
    assert "Live 2" in index and "Live 1" in index
    # Page 2 of the index is a static file, and the index links to it, not to ?page=2.
    assert 'href="/page/2/"' in index and "?page=" not in index
    assert "Live 0" in (site / "page/2/index.html").read_text()
    for post in posts:
        assert post.title in (site / f"posts/{post.slug}/index.html").read_text()
    assert not (site / "posts/a-draft").exists()
    feed = (site / "feed/index.xml").read_text()
    assert "<feed" in feed and "Live 2" in feed
    assert "/posts/" in (site / "sitemap.xml").read_text()


def test_nothing_is_rendered_when_nothing_changed_and_a_forced_run_keeps_an_identical_build(
    tmp_path, monkeypatch
):
    post = make_post(status=Post.Status.PUBLISHED, title="First")
    first = export_site(tmp_path)
    renders = []
    real_render = static_export.render_site
    monkeypatch.setattr(
        static_export, "render_site", lambda **kw: renders.append(1) or real_render(**kw)
    )

    again = export_site(tmp_path)
    assert not again.changed and renders == [], "unchanged posts: not even rendered"
    forced = export_site(tmp_path, force=True)
    assert not forced.changed and renders == [1], "rendered, but the same output is not switched"
    assert builds(tmp_path) == [first.build.name]

    Post.objects.filter(pk=post.pk).update(title="Second", updated_at=post.updated_at)
    assert not export_site(tmp_path).changed, "the key says unchanged (same id and updated_at)"
    changed = export_site(tmp_path, force=True)
    assert changed.changed and "Second" in (live(tmp_path) / "index.html").read_text()


def test_old_builds_are_removed_keeping_the_live_one_and_the_one_before(tmp_path):
    post = make_post(status=Post.Status.PUBLISHED, title="v0")
    made = []
    for version in range(1, 5):
        made.append(export_site(tmp_path, keep=2).build.name)
        Post.objects.filter(pk=post.pk).update(title=f"v{version}")
        post.refresh_from_db()
        Post.objects.filter(pk=post.pk).update(
            updated_at=post.updated_at.replace(year=2031 + version)
        )
    assert builds(tmp_path) == made[-2:]
    assert live(tmp_path).name == made[-1]
    assert not list(tmp_path.glob(".current-*")) and not list((tmp_path / "builds").glob(".tmp-*"))


def test_a_real_folder_named_current_is_refused(tmp_path):
    (tmp_path / CURRENT).mkdir()
    with pytest.raises(ExportError, match="real folder"):
        export_site(tmp_path)


@override_settings(INSTATIC_EXPORT_KEEP=1000)
def test_a_concurrent_reader_only_ever_sees_a_complete_old_or_new_site(tmp_path):
    """A reader resolving ``current`` sees one whole build: every page from the same round."""
    posts = [make_post(status=Post.Status.PUBLISHED, title=f"P{i} round 0") for i in range(8)]
    export_site(tmp_path, keep=1000)
    stop = threading.Event()
    seen: list[int] = []
    torn: list[str] = []

    def read_site():
        while not stop.is_set():
            try:
                site = os.path.realpath(tmp_path / CURRENT)
                index = Path(site, "index.html").read_text()
                rounds = set(ROUND.findall(index))
                slugs = POST_LINK.findall(index)
                for slug in slugs:
                    rounds |= set(
                        ROUND.findall(Path(site, "posts", slug, "index.html").read_text())
                    )
                rounds |= set(ROUND.findall(Path(site, "feed", "index.xml").read_text()))
            except OSError as exc:
                torn.append(f"{type(exc).__name__}: {exc}")
                continue
            if len(slugs) != len(posts) or len(rounds) != 1:
                torn.append(f"{len(slugs)} posts, rounds {sorted(rounds)} in {site}")
            else:
                seen.append(int(rounds.pop()))

    reader = threading.Thread(target=read_site, daemon=True)
    reader.start()
    try:
        for round_ in range(1, 16):
            for post in posts:
                Post.objects.filter(pk=post.pk).update(
                    title=f"{post.title.split(' round')[0]} round {round_}",
                    updated_at=post.updated_at.replace(year=2030 + round_),
                )
            assert export_site(tmp_path, keep=1000).changed
            wait_until(lambda r=round_: seen and seen[-1] == r, timeout=10)
    finally:
        stop.set()
        reader.join(5)
    assert not torn, torn[:5]
    assert len(set(seen)) == 16, "the reader saw every round"


def test_the_job_does_nothing_without_an_export_root_and_says_so_once(caplog, settings):
    settings.INSTATIC_EXPORT_ROOT = ""
    static_export._unset_logged = False
    caplog.set_level(logging.DEBUG, logger="instatic.jobs")
    static_export.build(context_for(static_export.build))
    static_export.build(context_for(static_export.build))
    assert caplog.text.count("INSTATIC_EXPORT_ROOT is not set") == 1


def test_the_job_exports_and_a_manual_run_forces_a_render(tmp_path, settings, monkeypatch):
    settings.INSTATIC_EXPORT_ROOT = str(tmp_path)
    make_post(status=Post.Status.PUBLISHED, title="Hello")
    static_export.build(context_for(static_export.build))
    assert "Hello" in (live(tmp_path) / "index.html").read_text()
    renders = []
    monkeypatch.setattr(static_export, "render_site", lambda **kw: renders.append(1) or {})
    static_export.build(context_for(static_export.build))
    assert renders == []
    manual = context_for(static_export.build, trigger=JobRun.Trigger.MANUAL)
    static_export.build(manual)
    assert renders == [1]


def test_export_settings_are_checked(tmp_path, settings):
    from plugins.checks import check_export_settings

    settings.INSTATIC_EXPORT_ROOT = "relative/export"
    settings.INSTATIC_EXPORT_KEEP = 1
    assert [e.id for e in check_export_settings()] == ["plugins.E001", "plugins.E003"]
    (tmp_path / CURRENT).mkdir()
    settings.INSTATIC_EXPORT_ROOT = str(tmp_path)
    settings.INSTATIC_EXPORT_KEEP = 2
    assert [e.id for e in check_export_settings()] == ["plugins.E002"]
    (tmp_path / CURRENT).rmdir()
    settings.INSTATIC_EXPORT_BASE_URL = "blog.example.com"
    assert [e.id for e in check_export_settings()] == ["plugins.E004"]
    settings.INSTATIC_EXPORT_BASE_URL = "https://blog.example.com"
    assert check_export_settings() == []


def test_production_settings_render_over_https_as_an_allowed_host(tmp_path, settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = [".blog.example.com"]
    make_post(status=Post.Status.PUBLISHED, title="Secure")
    export_site(tmp_path)
    assert "https://blog.example.com/posts/" in (live(tmp_path) / "feed/index.xml").read_text()
    settings.INSTATIC_EXPORT_BASE_URL = "https://elsewhere.example.org"
    with pytest.raises(ExportError, match="answered 400"):
        export_site(tmp_path, force=True)
