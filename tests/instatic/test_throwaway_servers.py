"""Starting a throwaway server (``devtools.servers.ServerProcess.start``) leaves nothing behind.

MariaDB, PostgreSQL and PgBouncer start through it (tests/instatic/test_test_settings.py and
the server tests start the real ones); here a server that is only a folder shows what start
does around the server's own ``_create``.
"""

import pytest

from devtools import servers


class FolderServer(servers.ServerProcess):
    """A server that is a file in its folder; ``fail`` makes its set-up raise after writing it."""

    workdir_prefix = "instatic-folder-"

    def __init__(self, *, fail: bool = False):
        self.fail = fail

    def _create(self) -> None:
        (self.workdir / "data").write_text("set up")
        if self.fail:
            raise RuntimeError("set-up failed")


def test_a_started_server_has_its_folder_and_is_stopped_at_exit_until_it_is_stopped():
    server = FolderServer()
    with server:
        folder = server.workdir
        assert folder.name.startswith("instatic-folder-")
        assert (folder / "data").read_text() == "set up"
        assert server in servers._owned, "stop_owned_servers() stops it at exit"
    assert not folder.exists() and server.workdir is None
    assert server not in servers._owned


def test_a_server_whose_set_up_fails_is_stopped_and_its_folder_removed():
    server = FolderServer(fail=True)
    with pytest.raises(RuntimeError, match="set-up failed"):
        server.start()
    assert server.workdir is None
    assert server not in servers._owned


def test_a_failed_start_removes_the_folder_it_made(monkeypatch):
    made = []
    make_workdir = servers.make_workdir

    def recording(prefix, user):
        made.append(make_workdir(prefix, user))
        return made[-1]

    monkeypatch.setattr(servers, "make_workdir", recording)
    with pytest.raises(RuntimeError):
        FolderServer(fail=True).start()
    [folder] = made
    assert not folder.exists()
