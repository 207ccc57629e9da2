"""``manage.py exportsite DIR``: the static export once, from the command line."""

import os
import signal
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections
from django.db.models import F

from plugins.builtin import static_export
from plugins.builtin.static_export import CURRENT
from publishing.models import Post
from tests.publishing.conftest import make_post

pytestmark = pytest.mark.django_db


def exportsite(*args) -> str:
    out = StringIO()
    call_command("exportsite", *args, stdout=out)
    return out.getvalue()


def live(root: Path) -> Path:
    return (root / CURRENT).resolve(strict=True)


def one_line_error(*args) -> str:
    with pytest.raises(CommandError) as caught:
        exportsite(*args)
    message = str(caught.value)
    assert "\n" not in message.strip(), message
    return message


def test_exportsite_writes_the_live_site_with_the_jobs_code_and_swap(tmp_path, monkeypatch):
    make_post(status=Post.Status.PUBLISHED, title="Hello static")
    make_post(status=Post.Status.DRAFT, title="Not yet", slug="not-yet")
    calls = []
    real = static_export.export_site
    monkeypatch.setattr(
        static_export, "export_site", lambda *a, **kw: calls.append(kw) or real(*a, **kw)
    )
    root = tmp_path / "site"

    output = exportsite(str(root))
    assert calls, "the command exports through static_export.export_site, like the job"
    assert (root / CURRENT).is_symlink(), "the live build is switched in by the atomic symlink"
    first = live(root)
    assert "Hello static" in (first / "index.html").read_text()
    assert not (first / "posts/not-yet").exists()
    assert str(first) in output

    # Run again: nothing changed, nothing is rendered; --full renders every page, but an
    # identical site is not swapped.
    output = exportsite(str(root))
    assert live(root) == first and "unchanged (the live posts did not change)" in output
    output = exportsite(str(root), "--full")
    assert live(root) == first and "unchanged (the rendered site is the same)" in output
    second = make_post(status=Post.Status.PUBLISHED, title="Second post")
    output = exportsite(str(root))
    assert live(root) != first and "Second post" in (live(root) / "index.html").read_text()
    # The new post, the index page, the feed and the sitemap (index, pages, posts); the first
    # post's page is linked.
    assert "(6 rendered, 1 reused)" in output
    assert (live(root) / f"posts/{second.slug}/index.html").exists()


def edit(post: Post, **values) -> None:
    Post.objects.filter(pk=post.pk).update(version=F("version") + 1, **values)


@pytest.mark.django_db(transaction=True)
def test_an_export_killed_half_way_leaves_the_previous_build_serving(tmp_path):
    """A real SIGKILL in the middle of writing: ``current`` still shows the whole old site."""
    posts = [make_post(status=Post.Status.PUBLISHED, title=f"Post {i}") for i in range(6)]
    root = tmp_path / "site"
    exportsite(str(root))
    first = live(root)
    before = {p: p.read_bytes() for p in first.rglob("*") if p.is_file()}
    for post in posts:
        edit(post, title=f"{post.title} v2")
    connections.close_all()  # the child opens its own
    pid = os.fork()
    if pid == 0:  # the child: exportsite, killed outright after writing three post pages
        try:
            real_write = static_export.folder.Build.write
            written = []

            def write_then_die(self, relative, content, **kwargs):
                sha = real_write(self, relative, content, **kwargs)
                if relative.startswith("posts/"):
                    written.append(relative)
                    if len(written) == 3:
                        os.kill(os.getpid(), signal.SIGKILL)
                return sha

            static_export.folder.Build.write = write_then_die
            call_command("exportsite", str(root), stdout=StringIO())
        finally:
            os._exit(1)
    _pid, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert live(root) == first, "current still points at the old build"
    assert {p: p.read_bytes() for p in first.rglob("*") if p.is_file()} == before
    # It was rewriting the spare copy of the first build (the first export's, see
    # static_export.spare.prepare_spare) in place when it died.
    (leftover,) = (root / "builds").glob(".tmp-*")
    pages = [page.read_text() for page in leftover.glob("posts/*/index.html")]
    assert sum("v2" in page for page in pages) == 3, "it died half-way"

    output = exportsite(str(root))
    assert "v2" in (live(root) / "index.html").read_text() and "(11 rendered" in output
    assert leftover.exists(), "another node may still be writing it: kept for an hour"
    stale = time.time() - static_export.STALE_TEMP_AGE.total_seconds() - 60
    os.utime(leftover, (stale, stale))
    static_export.clean_up(root, keep=2)
    assert not leftover.exists()


def test_exportsite_defaults_to_the_export_root_setting(tmp_path, settings):
    settings.INSTATIC_EXPORT_ROOT = str(tmp_path)
    make_post(status=Post.Status.PUBLISHED, title="From settings")
    exportsite()
    assert "From settings" in (live(tmp_path) / "index.html").read_text()


def test_exportsite_without_a_folder_says_how_to_give_one(settings):
    settings.INSTATIC_EXPORT_ROOT = ""
    assert "INSTATIC_EXPORT_ROOT" in one_line_error()


def test_exportsite_refuses_a_bad_folder_in_one_line(tmp_path, monkeypatch):
    a_file = tmp_path / "file.txt"
    a_file.write_text("not a folder")
    assert "is not a folder" in one_line_error(str(a_file))
    assert "cannot create" in one_line_error(str(a_file / "below"))

    real_current = tmp_path / "with-current"
    (real_current / CURRENT).mkdir(parents=True)
    assert "real folder" in one_line_error(str(real_current))

    read_only = tmp_path / "read-only"
    read_only.mkdir()
    # Root may write anywhere, so the permission answer is faked rather than the test skipped.
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: Path(path) != read_only and real_access(path, mode)
    )
    assert "not writable" in one_line_error(str(read_only))


def test_exportsite_reports_a_failed_render_in_one_line(tmp_path, settings):
    make_post(status=Post.Status.PUBLISHED, title="Secure")
    settings.INSTATIC_EXPORT_BASE_URL = "https://not-allowed.example.org"
    settings.ALLOWED_HOSTS = ["blog.example.com"]
    message = one_line_error(str(tmp_path))
    assert "answered 400" in message
    assert not (tmp_path / CURRENT).exists(), "nothing went live"


def test_exportsite_without_migrations_is_one_line(tmp_path, monkeypatch):
    from django.db import OperationalError

    def no_table(*args, **kwargs):
        raise OperationalError("no such table: publishing_post")

    monkeypatch.setattr(static_export.export, "source_key", no_table)
    assert "no such table" in one_line_error(str(tmp_path))


def test_exportsite_deletes_only_builds_it_named_itself(tmp_path):
    """An operator's own folders in builds/ (and hidden ones like its temporaries') stay."""
    root = tmp_path / "site"
    exportsite(str(root))
    notes = root / "builds/0-my-notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine")
    hidden = root / "builds/.tmp-mine"
    hidden.mkdir()
    long_ago = time.time() - 7 * 24 * 3600
    os.utime(hidden, (long_ago, long_ago))
    for n in range(4):  # each export makes a build and deletes the oldest beyond --keep 2
        make_post(status=Post.Status.PUBLISHED, title=f"More {n}")
        exportsite(str(root), "--keep", "2")
    assert (notes / "todo.txt").read_text() == "mine"
    assert hidden.is_dir()
    ours = [p for p in (root / "builds").iterdir() if static_export.BUILD_NAME.fullmatch(p.name)]
    assert len(ours) == 2 and live(root) in ours


@pytest.mark.parametrize("content", ["notes.txt", "builds/0-my-notes/todo.txt"])
def test_exportsite_refuses_a_folder_that_is_not_an_export_in_one_line(tmp_path, content):
    make_post(status=Post.Status.PUBLISHED)
    root = tmp_path / "site"
    (root / content).parent.mkdir(parents=True, exist_ok=True)
    (root / content).write_text("mine")
    message = one_line_error(str(root))
    assert f"{root} is not empty and is not an Instatic export" in message
    assert "new or empty folder" in message
    assert (root / content).read_text() == "mine"
    assert not (root / CURRENT).exists() and not (root / static_export.ROOT_MARKER).exists()


def test_an_export_made_before_the_marker_is_still_an_export(tmp_path):
    root = tmp_path / "site"
    exportsite(str(root))
    (root / static_export.ROOT_MARKER).unlink()  # as left by an export without the marker
    make_post(status=Post.Status.PUBLISHED, title="After the upgrade")
    exportsite(str(root))
    assert "After the upgrade" in (live(root) / "index.html").read_text()
    assert (root / static_export.ROOT_MARKER).is_file()
