"""The static export: complete, incremental, atomic switches, a failure leaves the old build."""

import errno
import json
import logging
import os
import re
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db.models import F
from django.test import override_settings

import publishing
from coordination.clock import database_now as now
from coordination.models import JobRun
from plugins.builtin import static_export
from plugins.builtin.static_export import CURRENT, ExportError, export_site
from plugins.testing import context_for
from publishing.models import Post
from publishing.sitemaps import PostSitemap
from tests.publishing.conftest import make_post
from tests.publishing.test_index_paging import id_base
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db

POST_LINK = re.compile(r'href="/posts/([\w-]+)/"')
ROUND = re.compile(r"round (\d+)")


class Keyed:
    """Make live posts with ids ``base + n``: break posts (``publishing.paging``) where n is a
    multiple of the page size (``base`` is a multiple of every size these tests use)."""

    def __init__(self):
        self.base = id_base(10)

    def pk(self, n: int) -> int:
        return self.base + n

    def __call__(self, n: int, **values) -> Post:
        """Make post n (slug ``p<n>``), published after post n - 1."""
        values.setdefault("title", f"Post {n}")
        values.setdefault("published_at", now() - timedelta(hours=1) + timedelta(seconds=n))
        return make_post(id=self.pk(n), slug=f"p{n}", status=Post.Status.PUBLISHED, **values)


@pytest.fixture
def keyed(db) -> Keyed:
    return Keyed()


def builds(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "builds").iterdir() if not p.name.startswith("."))


def live(root: Path) -> Path:
    return (root / CURRENT).resolve(strict=True)


@override_settings(INSTATIC_POSTS_PER_PAGE=2)
def test_the_export_has_every_page_of_the_live_site(tmp_path, keyed):
    posts = [keyed(i, title=f"Live {i}") for i in range(3)]  # pages: 2 1, then 0
    make_post(status=Post.Status.DRAFT, title="Draft", slug="a-draft")
    result = export_site(tmp_path)
    assert result.changed
    site = live(tmp_path)
    assert (tmp_path / CURRENT).is_symlink() and site.parent == tmp_path / "builds"
    index = (site / "index.html").read_text()
    assert "Live 2" in index and "Live 1" in index
    # The next page of the index is a static file, and the index links to it, not to ?from=.
    assert 'href="/page/p0/"' in index and "?from=" not in index
    assert "Live 0" in (site / "page/p0/index.html").read_text()
    for post in posts:
        assert post.title in (site / f"posts/{post.slug}/index.html").read_text()
    assert not (site / "posts/a-draft").exists()
    feed = (site / "feed/index.xml").read_text()
    assert "<feed" in feed and "Live 2" in feed
    assert "/sitemap-posts.xml</loc>" in (site / "sitemap.xml").read_text()
    listed = (site / "sitemap-posts.xml").read_text()
    assert all(f"/posts/{post.slug}/" in listed for post in posts) and "a-draft" not in listed


#: Rendered on every export: the feed, the sitemap index and the sitemap's section of pages.
ALWAYS_RENDERED = ("feed/index.xml", "sitemap.xml", "sitemap-pages.xml")


def edit(post: Post, **values) -> None:
    """Change a post as the services do: a new version (``updated_at`` may stay the same)."""
    Post.objects.filter(pk=post.pk).update(version=F("version") + 1, **values)


def inode(path: Path) -> int:
    return path.stat().st_ino


def files_of(site: Path) -> dict[str, int]:
    """Return the build's pages (manifest files aside) with their inode numbers."""
    return {
        str(p.relative_to(site)): inode(p)
        for p in site.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


@override_settings(INSTATIC_POSTS_PER_PAGE=2, ALLOWED_HOSTS=["testserver"])
def test_every_exported_page_is_byte_for_byte_what_a_visitor_gets(tmp_path, client, keyed):
    """Post and index pages are rendered from streamed rows, not by the views: same bytes."""
    posts = [keyed(i, title=f"Same {i} <&>") for i in range(5)]  # pages: 4 3, 2 1, 0
    site = export_site(tmp_path).build

    def visit(url: str) -> bytes:
        response = client.get(url, secure=True, HTTP_HOST="testserver")
        assert response.status_code == 200, url
        # The static index pages live at /page/<slug>/ instead of /?from=<slug>.
        return re.sub(rb'href="/\?from=([\w-]+)"', rb'href="/page/\1/"', response.content)

    assert (site / "index.html").read_bytes() == visit("/")
    for key in ("p2", "p0"):
        assert (site / f"page/{key}/index.html").read_bytes() == visit(f"/?from={key}")
    assert sorted(p.name for p in (site / "page").iterdir()) == ["p0", "p2"]
    for post in posts:
        assert (site / f"posts/{post.slug}/index.html").read_bytes() == visit(
            f"/posts/{post.slug}/"
        )
    assert (site / "feed/index.xml").read_bytes() == visit("/feed/")
    assert (site / "sitemap.xml").read_bytes() == visit("/sitemap.xml")
    assert (site / "sitemap-posts.xml").read_bytes() == visit("/sitemap-posts.xml")
    assert (site / "sitemap-pages.xml").read_bytes() == visit("/sitemap-pages.xml")


@override_settings(INSTATIC_POSTS_PER_PAGE=2)
def test_only_the_changed_post_and_its_index_page_are_rendered_the_rest_is_hard_linked(
    tmp_path, keyed
):
    posts = [keyed(i) for i in range(6)]  # pages: 5 4 3, then 2 1 and 0
    first = export_site(tmp_path)
    assert first.rendered == first.files == 6 + 3 + 4 and first.reused == 0
    before = files_of(first.build)

    edit(posts[0], title="Edited")  # the oldest post: the last index page
    second = export_site(tmp_path)
    assert second.changed and second.build != first.build
    after = files_of(second.build)
    assert after.keys() == before.keys()
    rendered = {name for name in after if after[name] != before[name]}
    assert rendered == {
        f"posts/{posts[0].slug}/index.html",
        "page/p0/index.html",
        *ALWAYS_RENDERED,
        "sitemap-posts.xml",
    }, "unchanged posts and index pages are the same files (hard links), not rendered again"
    assert (second.rendered, second.reused) == (6, 7)
    assert "Edited" in (second.build / f"posts/{posts[0].slug}/index.html").read_text()
    assert "Edited" in (second.build / "page/p0/index.html").read_text()

    # A change of updated_at alone (an edit through another path) is seen too.
    Post.objects.filter(pk=posts[5].pk).update(
        title="Touched", updated_at=posts[5].updated_at + timedelta(seconds=1)
    )
    third = export_site(tmp_path)
    assert "Touched" in (third.build / f"posts/{posts[5].slug}/index.html").read_text()
    assert third.rendered == 6  # the post, index page 1, its sitemap page, feed, sitemap


SITEMAP_LOC = re.compile(r"<loc>https?://[^/]+(/[^<]*)</loc>")


def sitemap_files(site: Path) -> dict[str, list[str]]:
    """Return each page file the exported sitemap index links to, with the paths it lists."""
    pages = SITEMAP_LOC.findall((site / "sitemap.xml").read_text())
    return {page: SITEMAP_LOC.findall((site / page.lstrip("/")).read_text()) for page in pages}


@override_settings(ALLOWED_HOSTS=["testserver"])
def test_the_sitemap_is_exported_page_by_page_and_only_changed_pages_are_rendered(
    tmp_path, client, monkeypatch
):
    """A sitemap page is a range of post ids: 2 a page here, ids 1..7 with hidden ones."""
    monkeypatch.setattr(PostSitemap, "limit", 2)
    posts = {pk: make_post(id=pk, status=Post.Status.PUBLISHED) for pk in (1, 2, 4, 5, 7)}
    make_post(id=3, slug="a-draft")
    make_post(id=6, status=Post.Status.UNPUBLISHED, slug="taken-down", published_at=now())
    first = export_site(tmp_path)
    pages = sitemap_files(first.build)
    assert list(pages) == [
        "/sitemap-pages.xml",
        "/sitemap-posts.xml",
        "/sitemap-posts-2.xml",
        "/sitemap-posts-3.xml",
        "/sitemap-posts-4.xml",
    ], "the static index links to static files, not to ?p=N"
    listed = [path for paths in pages.values() for path in paths if path.startswith("/posts/")]
    assert sorted(listed) == sorted(post.get_absolute_url() for post in posts.values())
    for number, page in enumerate(list(pages)[1:], start=1):
        visited = client.get(f"/sitemap-posts.xml?p={number}", secure=True, HTTP_HOST="testserver")
        assert (first.build / page.lstrip("/")).read_bytes() == visited.content

    edit(posts[4], title="Edited")  # page 2 (ids 3 and 4)
    second = export_site(tmp_path)
    before, after = files_of(first.build), files_of(second.build)
    rendered = {name for name in after if after[name] != before.get(name)}
    assert {name for name in rendered if name.startswith("sitemap-posts")} == {
        "sitemap-posts-2.xml"
    }

    Post.objects.filter(pk=7).update(status=Post.Status.UNPUBLISHED)
    posts[1].delete()
    third = export_site(tmp_path)
    pages = sitemap_files(third.build)
    assert list(pages)[1:] == ["/sitemap-posts.xml", "/sitemap-posts-2.xml", "/sitemap-posts-3.xml"]
    assert not (third.build / "sitemap-posts-4.xml").exists(), "past the last page"
    listed = [path for paths in pages.values() for path in paths if path.startswith("/posts/")]
    assert sorted(listed) == sorted(posts[pk].get_absolute_url() for pk in (2, 4, 5))


@override_settings(INSTATIC_POSTS_PER_PAGE=2)
def test_unpublished_and_deleted_posts_are_removed_and_the_index_follows(tmp_path, keyed):
    posts = [keyed(i) for i in range(5)]  # pages: 4 3, 2 1, 0
    export_site(tmp_path)
    Post.objects.filter(pk=posts[4].pk).update(status=Post.Status.UNPUBLISHED)
    posts[2].delete()
    site = export_site(tmp_path).build
    assert not (site / f"posts/{posts[4].slug}").exists()
    assert not (site / f"posts/{posts[2].slug}").exists()
    # 3 1 0 left: the front page holds 3 and 1, break 0 starts the next page; p2's is gone.
    assert sorted(p.name for p in (site / "page").iterdir()) == ["p0"]
    listed = POST_LINK.findall((site / "index.html").read_text())
    listed += POST_LINK.findall((site / "page/p0/index.html").read_text())
    assert listed == [posts[3].slug, posts[1].slug, posts[0].slug]
    for gone in (posts[4], posts[2]):
        assert gone.slug not in (site / "feed/index.xml").read_text()
        assert gone.slug not in (site / "sitemap.xml").read_text()
    manifest = (site / static_export.POSTS_MANIFEST).read_text().splitlines()
    assert [json.loads(line)[0] for line in manifest] == [posts[0].pk, posts[1].pk, posts[3].pk]


def test_a_changed_template_or_output_setting_renders_every_page(tmp_path, settings):
    posts = [make_post(status=Post.Status.PUBLISHED) for _ in range(3)]
    first = export_site(tmp_path)
    assert not export_site(tmp_path).changed, "nothing changed: nothing rendered"

    # A project template overriding the post page (found through the loaders, like Django).
    folder = tmp_path / "templates" / "publishing"
    folder.mkdir(parents=True)
    (folder / "base.html").write_text(
        (Path(publishing.__file__).parent / "templates/publishing/base.html")
        .read_text()
        .replace("<main>", '<main class="redesigned">')
    )
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [str(tmp_path / "templates")]}]
    redesigned = export_site(tmp_path)
    assert redesigned.changed and redesigned.reused == 0 and redesigned.rendered == 3 + 1 + 4
    for post in posts:
        assert (
            'class="redesigned"' in (redesigned.build / f"posts/{post.slug}/index.html").read_text()
        )
    assert first.build.exists()


def test_a_changed_time_zone_renders_every_page(tmp_path, settings):
    post = make_post(status=Post.Status.PUBLISHED)
    first = export_site(tmp_path)
    settings.TIME_ZONE = "Pacific/Chatham" if settings.TIME_ZONE != "Pacific/Chatham" else "UTC"
    again = export_site(tmp_path)
    assert again.changed and again.reused == 0, "dates are shown in the site's zone"
    page = f"posts/{post.slug}/index.html"
    assert (again.build / page).read_text() != (first.build / page).read_text()


def test_nothing_is_rendered_when_nothing_changed_and_a_full_run_keeps_an_identical_build(
    tmp_path, monkeypatch
):
    make_post(status=Post.Status.PUBLISHED, title="First")
    first = export_site(tmp_path)
    writes = []
    real_write = static_export.folder.Build.write
    monkeypatch.setattr(
        static_export.folder.Build,
        "write",
        lambda self, *a, **kw: writes.append(a[0]) or real_write(self, *a, **kw),
    )
    again = export_site(tmp_path)
    assert not again.changed and writes == [], "unchanged posts: not even rendered"
    full = export_site(tmp_path, full=True)
    assert not full.changed and full.rendered == len(writes) == 1 + 1 + 4
    assert builds(tmp_path) == [first.build.name], "the same output is not switched"
    assert not list((tmp_path / "builds").glob(".tmp-*"))


def test_posts_changed_during_an_export_are_redone_on_top_of_the_new_build(tmp_path, monkeypatch):
    posts = [make_post(status=Post.Status.PUBLISHED, title=f"Post {i}") for i in range(4)]
    real = static_export.export.export_index
    calls = []

    def editor_saves_meanwhile(*args, **kwargs):
        if not calls:
            edit(posts[1], title="Saved meanwhile")
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(static_export.export, "export_index", editor_saves_meanwhile)
    result = export_site(tmp_path)
    assert len(calls) == 2, "the key moved during the first pass: a second pass"
    # The first pass listed the new version on the index but rendered the old post page.
    assert result.rendered == 5, "the second pass redid only the post, its sitemap page, the feed"
    assert "Saved meanwhile" in (result.build / f"posts/{posts[1].slug}/index.html").read_text()
    assert "Saved meanwhile" in (result.build / "index.html").read_text()
    assert builds(tmp_path) == [result.build.name]
    assert not list((tmp_path / "builds").glob(".tmp-*")), "the first pass's folder is gone"


def test_a_failure_mid_export_leaves_the_previous_build_serving(tmp_path, monkeypatch):
    posts = [make_post(status=Post.Status.PUBLISHED, title=f"Post {i}") for i in range(5)]
    first = export_site(tmp_path)
    for post in posts:
        edit(post, title=f"{post.title} v2")
    real_post = static_export.render.Renderer.post
    rendered = []

    def fail_on_the_third(self, post):
        rendered.append(post.pk)
        if len(rendered) == 3:
            raise OSError(28, "No space left on device")
        return real_post(self, post)

    monkeypatch.setattr(static_export.render.Renderer, "post", fail_on_the_third)
    with pytest.raises(OSError, match="No space"):
        export_site(tmp_path)
    assert live(tmp_path) == first.build
    assert "v2" not in (first.build / "index.html").read_text()
    assert not list((tmp_path / "builds").glob(".tmp-*")), "the half-written build is removed"
    monkeypatch.undo()
    assert "v2" in (export_site(tmp_path).build / "index.html").read_text()


def test_pages_are_copied_where_hard_links_are_impossible(tmp_path, monkeypatch):
    posts = [make_post(status=Post.Status.PUBLISHED) for _ in range(2)]

    def cross_device(source, target):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    first = export_site(tmp_path)
    assert first.spare is None, "a spare build is made of hard links only"
    assert not list((tmp_path / "builds").glob(".*")), "nothing is left of it"
    edit(posts[0], title="Changed")
    second = export_site(tmp_path)
    assert second.reused == 1
    kept = f"posts/{posts[1].slug}/index.html"
    assert inode(second.build / kept) != inode(first.build / kept)
    assert (second.build / kept).read_bytes() == (first.build / kept).read_bytes()


def contents(build: Path) -> dict[str, tuple[int, bytes]]:
    """Each file of a build with its inode and bytes: the live build must keep both."""
    return {name: (inode(build / name), (build / name).read_bytes()) for name in files_of(build)}


def identity(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_ino, status.st_ctime_ns


def tree(site: Path) -> dict[str, bytes]:
    """Return every page of a build with its bytes, and every folder (as None)."""
    return {
        str(p.relative_to(site)): p.read_bytes() if p.is_file() else None
        for p in site.rglob("*")
        if not p.name.startswith(".")
    }


def as_if_fresh(tmp_path: Path) -> dict[str, bytes]:
    """Return what an export into an empty folder writes for the site as it is now."""
    return tree(export_site(tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}").build)


@override_settings(INSTATIC_POSTS_PER_PAGE=2)
def test_the_build_before_the_live_one_is_rewritten_in_place_touching_only_what_changed(
    tmp_path, keyed
):
    """keep=2: the build the clean-up would delete is the next build, not a new folder."""
    root = tmp_path / "site"
    posts = [keyed(i) for i in range(6)]  # pages: 5 4 3, 2 1, 0
    first = export_site(root)
    edit(posts[0], title="First edit")
    second = export_site(root)
    assert builds(root) == sorted([first.build.name, second.build.name])
    live_before = contents(second.build)
    folder = inode(first.build)
    # A file's inode number alone can come back for a new file; with its change time it cannot.
    kept_before = {name: identity(first.build / name) for name in files_of(first.build)}

    edit(posts[5], title="Second edit")  # the newest post: index page 1
    third = export_site(root)
    assert third.changed and inode(third.build) == folder, "the older build, rewritten"
    assert builds(root) == sorted([second.build.name, third.build.name])
    assert contents(second.build) == live_before, (
        "the live build is never written to (its files are shared by links)"
    )
    after = {name: identity(third.build / name) for name in files_of(third.build)}
    touched = {name for name in after if after[name] != kept_before.get(name)}
    assert touched == {
        f"posts/{posts[5].slug}/index.html",
        "index.html",
        "sitemap-posts.xml",
        *ALWAYS_RENDERED,
        f"posts/{posts[0].slug}/index.html",  # changed in the second build: linked from it
        "page/p0/index.html",
    }
    assert third.rendered == 1 + 1 + 1 + len(ALWAYS_RENDERED)
    assert inode(third.build / f"posts/{posts[0].slug}/index.html") == inode(
        second.build / f"posts/{posts[0].slug}/index.html"
    )
    assert tree(third.build) == as_if_fresh(tmp_path)


@override_settings(INSTATIC_POSTS_PER_PAGE=2)
def test_the_first_export_leaves_a_spare_build_that_the_next_one_rewrites_in_place(tmp_path, keyed):
    """Without the spare, the next export would make a folder per post and link every page."""
    root = tmp_path / "site"
    posts = [keyed(i) for i in range(6)]  # pages: 5 4 3, 2 1, 0
    first = export_site(root)
    spare = first.spare
    assert spare is not None and spare.parent == root / "builds"
    assert spare.name.startswith(".spare-") and builds(root) == [first.build.name]
    assert files_of(spare) == files_of(first.build), "every page, hard-linked"
    manifest = static_export.MANIFEST
    assert (spare / manifest).read_bytes() == (first.build / manifest).read_bytes()
    folder, posts_folder = inode(spare), inode(spare / "posts")
    live_before = contents(first.build)
    kept_before = {name: identity(spare / name) for name in files_of(spare)}

    edit(posts[0], title="Edited")  # the oldest post: the last index page
    second = export_site(root)
    assert second.changed and inode(second.build) == folder, "the spare, rewritten in place"
    assert inode(second.build / "posts") == posts_folder
    assert second.spare is None and not list((root / "builds").glob(".*"))
    assert builds(root) == sorted([first.build.name, second.build.name])
    assert contents(first.build) == live_before, (
        "the live build is never written to (its files are shared by links)"
    )
    after = {name: identity(second.build / name) for name in files_of(second.build)}
    touched = {name for name in after if after[name] != kept_before.get(name)}
    assert touched == {
        f"posts/{posts[0].slug}/index.html",
        "page/p0/index.html",
        "sitemap-posts.xml",
        *ALWAYS_RENDERED,
    }
    assert (second.rendered, second.reused) == (len(touched), second.files - len(touched))
    assert tree(second.build) == as_if_fresh(tmp_path)


def test_a_spare_is_made_only_while_fewer_than_keep_builds_exist(tmp_path):
    """keep=3: the first two exports leave a spare; from the third on, the oldest is reused."""
    post = make_post(status=Post.Status.PUBLISHED, title="v0")
    made = []
    for version in range(1, 5):
        edit(post, title=f"v{version}")
        made.append(export_site(tmp_path, keep=3).spare is not None)
    assert made == [True, True, False, False]
    # One left beside ``keep`` builds (``keep`` lowered, two exports at once) is never used.
    builds_dir = tmp_path / "builds"
    spare = static_export.spare.prepare_spare(builds_dir, live(tmp_path), should_stop=lambda: False)
    assert spare is not None and spare.is_dir()
    assert spare in static_export.clean_up(tmp_path, keep=3) and not spare.exists()


def test_no_spare_is_made_of_a_build_taken_while_it_is_copied(tmp_path, monkeypatch, caplog):
    """A later export renames an older build away before rewriting it: the copy must stop."""
    for i in range(3):
        make_post(status=Post.Status.PUBLISHED, title=f"Post {i}")
    build = export_site(tmp_path, keep=3).build
    builds_dir = tmp_path / "builds"
    real_link, linked = os.link, []

    def link_then_take(source, target):
        real_link(source, target)
        linked.append(target)
        if len(linked) == 2:
            build.rename(builds_dir / ".tmp-taken")

    monkeypatch.setattr(os, "link", link_then_take)
    caplog.set_level(logging.WARNING, logger=static_export.__name__)
    assert static_export.spare.prepare_spare(builds_dir, build, should_stop=lambda: False) is None
    assert "no spare build" in caplog.text
    (first_spare,) = builds_dir.glob(".spare-*")  # the first export's, untouched
    assert sorted(p.name for p in builds_dir.iterdir()) == [first_spare.name, ".tmp-taken"]


@pytest.mark.parametrize("batch", [1, 100])
@override_settings(INSTATIC_POSTS_PER_PAGE=2)
def test_a_rewritten_build_follows_deleted_renamed_swapped_and_new_posts(
    tmp_path, monkeypatch, batch
):
    """Batches of one: a post's page is written before the post that had its slug comes."""
    for module in (static_export.post_pages, static_export.index_pages):
        monkeypatch.setattr(module, "RENDER_BATCH", batch)
    root = tmp_path / "site"
    a, b, c, d, e = (
        make_post(status=Post.Status.PUBLISHED, title=f"Post {n}", slug=f"slug-{n}")
        for n in "abcde"
    )
    export_site(root)
    edit(e, title="Touched")
    export_site(root)
    c.delete()
    Post.objects.filter(pk=d.pk).update(status=Post.Status.UNPUBLISHED)
    edit(a, slug="swapping")  # a and b trade slugs
    edit(b, slug="slug-a")
    edit(a, slug="slug-b")
    edit(e, slug="slug-e-renamed")
    make_post(status=Post.Status.PUBLISHED, title="New", slug="slug-c")  # c's old slug
    third = export_site(root)
    assert builds(root)[-1] == third.build.name and len(builds(root)) == 2
    assert tree(third.build) == as_if_fresh(tmp_path), "nothing stale, nothing missing"
    assert sorted(p.name for p in (third.build / "posts").iterdir()) == [
        "slug-a",
        "slug-b",
        "slug-c",
        "slug-e-renamed",
    ]
    assert "Post a" in (third.build / "posts/slug-b/index.html").read_text()


def test_only_a_build_the_clean_up_would_delete_is_rewritten(tmp_path):
    """keep=3: the live build and the two before it stay whole; the oldest of three is reused."""
    post = make_post(status=Post.Status.PUBLISHED, title="v0")
    made, folders = [], []
    for version in range(1, 5):
        edit(post, title=f"v{version}")
        made.append(export_site(tmp_path, keep=3).build)
        folders.append(inode(made[-1]))
    assert len(set(folders[:3])) == 3, "fewer than 3 builds on disk: new folders"
    assert folders[3] == folders[0], "the oldest of three became the fourth"
    assert builds(tmp_path) == [build.name for build in made[1:]]
    for version, build in zip((2, 3, 4), made[1:], strict=True):
        assert f"v{version}" in (build / "index.html").read_text()


def test_after_a_change_of_shape_the_older_build_is_rewritten_page_by_page(tmp_path, settings):
    """A new time zone: every page rendered again, into the older build's folders."""
    root = tmp_path / "site"
    posts = [make_post(status=Post.Status.PUBLISHED) for _ in range(3)]
    first = export_site(root)
    edit(posts[0], title="Edited")
    export_site(root)
    folder = inode(first.build)
    settings.TIME_ZONE = "Pacific/Chatham" if settings.TIME_ZONE != "Pacific/Chatham" else "UTC"
    slugs = [post.slug for post in posts]
    edit(posts[1], slug="swapping")  # the first two posts trade slugs, the third goes
    edit(posts[0], slug=slugs[1])
    edit(posts[1], slug=slugs[0])
    posts[2].delete()
    third = export_site(root)
    assert inode(third.build) == folder and third.reused == 0
    assert third.rendered == third.files
    assert tree(third.build) == as_if_fresh(tmp_path)
    assert sorted(p.name for p in (third.build / "posts").iterdir()) == sorted(slugs[:2])


def test_a_full_export_with_the_same_output_puts_the_older_build_back(tmp_path):
    post = make_post(status=Post.Status.PUBLISHED)
    make_post(status=Post.Status.PUBLISHED, title="Unchanged")
    export_site(tmp_path)
    edit(post, title="Edited")
    second = export_site(tmp_path)
    names = builds(tmp_path)
    full = export_site(tmp_path, full=True)
    assert not full.changed and full.rendered == full.files
    assert builds(tmp_path) == names and live(tmp_path) == second.build
    assert not list((tmp_path / "builds").glob(".tmp-*"))
    edit(post, title="Edited again")
    third = export_site(tmp_path)
    assert third.reused and tree(third.build) == as_if_fresh(tmp_path)


def test_slugs_traded_while_the_posts_are_read_lose_no_page(tmp_path, monkeypatch):
    """Two posts trade slugs after the first pass read them: its list names one file twice.

    The second pass keeps the post whose page is there and must not delete it as the other
    post's old page.
    """
    root = tmp_path / "site"
    x = make_post(status=Post.Status.PUBLISHED, slug="x")
    z = make_post(status=Post.Status.PUBLISHED, slug="z")
    export_site(root)
    edit(x, title="x, edited")
    export_site(root)
    edit(x, title="x, edited again")  # rendered at the end of the first pass; z is kept
    real_add, traded = static_export.post_pages.SitemapKeys.add, []

    def trade_once_z_was_read(self, pk, slug, key):
        real_add(self, pk, slug, key)
        if pk == z.pk and not traded:
            traded.append(pk)
            edit(z, slug="q")
            edit(x, slug="z")

    monkeypatch.setattr(static_export.post_pages.SitemapKeys, "add", trade_once_z_was_read)
    result = export_site(root)
    assert traded
    assert "x, edited again" in (result.build / "posts/z/index.html").read_text()
    assert tree(result.build) == as_if_fresh(tmp_path)


def test_an_old_build_with_a_damaged_list_is_not_rewritten_but_replaced(tmp_path, caplog):
    posts = [make_post(status=Post.Status.PUBLISHED) for _ in range(3)]
    first = export_site(tmp_path)
    edit(posts[0], title="One")
    export_site(tmp_path)
    listed = first.build / static_export.POSTS_MANIFEST
    listed.write_text(listed.read_text().splitlines(keepends=True)[0])  # two posts untracked
    edit(posts[1], title="Two")
    caplog.set_level(logging.WARNING, logger=static_export.__name__)
    third = export_site(tmp_path)
    assert "writing a new build instead" in caplog.text
    assert tree(third.build) == as_if_fresh(tmp_path)
    assert len(builds(tmp_path)) == 2


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


def test_the_job_exports_and_a_manual_run_renders_every_page(tmp_path, settings, monkeypatch):
    settings.INSTATIC_EXPORT_ROOT = str(tmp_path)
    make_post(status=Post.Status.PUBLISHED, title="Hello")
    static_export.build(context_for(static_export.build))
    assert "Hello" in (live(tmp_path) / "index.html").read_text()
    runs = []
    real = static_export.export_site
    monkeypatch.setattr(
        static_export, "export_site", lambda *a, **kw: runs.append(real(*a, **kw)) or runs[-1]
    )
    static_export.build(context_for(static_export.build))
    assert runs[-1].rendered == 0, "scheduled: nothing changed, nothing rendered"
    manual = context_for(static_export.build, trigger=JobRun.Trigger.MANUAL)
    static_export.build(manual)
    assert runs[-1].rendered == 1 + 1 + 4 and not runs[-1].changed


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
        export_site(tmp_path)
