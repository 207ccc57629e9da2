"""``manage.py migrate`` against a database it cannot reach says so in one line."""

import subprocess
import sys

import pytest

from devtools.servers import free_port
from tests.support.processes import BASE_DIR, process_env

# Once per `make test`: the database it cannot reach is its own, whatever the run's vendor.
pytestmark = pytest.mark.sqlite


def test_migrate_without_a_database_is_one_clear_error():
    port = free_port()
    result = subprocess.run(
        [sys.executable, str(BASE_DIR / "manage.py"), "migrate", "--noinput"],
        cwd=BASE_DIR,
        env=process_env(DATABASE_URL=f"postgres://instatic@127.0.0.1:{port}/instatic"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    [last] = result.stderr.strip().splitlines()[-1:]
    assert last.startswith(
        f"CommandError: cannot connect to the database at postgresql://127.0.0.1:{port}/instatic"
    ), result.stderr
    assert "Traceback" not in result.stderr
