"""``python manage.py test`` runs the same pytest suite."""

import subprocess
import sys
from pathlib import Path

import pytest

# Once per `make test`: it checks the command, not the database.
pytestmark = pytest.mark.sqlite

BASE_DIR = Path(__file__).resolve().parents[2]


def test_manage_py_test_hands_over_to_pytest():
    target = (
        "tests/coordination/test_schedules.py"
        "::test_limit_search_over_a_huge_range_does_not_overflow"
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "test", target, "-v", "0"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
