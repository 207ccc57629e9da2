"""``manage.py exportsite DIR``: the static export once, from the command line (issue 14 item 3)."""

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

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

    # Run again: templates may have changed, so it renders, but an identical site is not swapped.
    output = exportsite(str(root))
    assert live(root) == first and "unchanged" in output
    make_post(status=Post.Status.PUBLISHED, title="Second post")
    exportsite(str(root))
    assert live(root) != first and "Second post" in (live(root) / "index.html").read_text()


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

    monkeypatch.setattr(static_export, "source_key", no_table)
    assert "no such table" in one_line_error(str(tmp_path))
