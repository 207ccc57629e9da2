"""The test settings clean up after themselves: no temporary folders are left behind."""

import os
import subprocess
import sys
from pathlib import Path

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
