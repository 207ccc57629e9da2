"""The test settings clean up after themselves: no temporary folders are left behind."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from devtools import mariadb, pgcluster
from devtools.mariadb import MariaDBServer
from devtools.pgcluster import PostgresCluster

# Once per `make test`: these start servers and processes of their own, on no vendor's database.
pytestmark = pytest.mark.sqlite

BASE_DIR = Path(__file__).resolve().parents[2]


def test_a_process_that_loads_the_test_settings_leaves_its_temporary_folder_empty(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"INSTATIC_TEST_TMP", "INSTATIC_VAR_DIR", "DATABASE_URL"}
    }
    env.update(TMPDIR=str(tmp_path), DJANGO_SETTINGS_MODULE="tests.settings")
    code = (
        "import django; django.setup(); import tempfile, pathlib; "
        "pathlib.Path(tempfile.mkstemp()[1]).write_text('a log')"
    )
    subprocess.run([sys.executable, "-c", code], cwd=BASE_DIR, env=env, check=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("server_class", [MariaDBServer, PostgresCluster], ids=["mariadb", "pg"])
def test_a_throwaway_server_starts_under_the_test_runs_temporary_folder(server_class, monkeypatch):
    """A test run's TMPDIR is root's, readable but not writable by the server's own user.

    The short chaos soak starts its own server from inside a test run, so each server writes
    its temporary files to a folder of its own (MariaDB's bootstrap writes to $TMPDIR), not
    to the run's.
    """
    if server_class is MariaDBServer and not mariadb.find_server():
        pytest.skip("mariadbd is not installed")
    if server_class is PostgresCluster and not pgcluster.find_bindir():
        pytest.skip("the PostgreSQL server is not installed")
    # Beside the run's own (pytest's tmp_path sits below a folder only root may enter).
    shared = Path(tempfile.mkdtemp(dir=os.environ["INSTATIC_TEST_TMP"]))
    shared.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    with server_class() as server:
        assert server.url("instatic")
