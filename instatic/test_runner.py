"""``python manage.py test`` hands over to pytest, so both commands run the same suite."""

import os
import subprocess
import sys


class PytestRunner:
    """A Django test runner that runs pytest (in a child process) on the configured database."""

    def __init__(self, verbosity: int = 1, failfast: bool = False, keepdb: bool = False, **kwargs):
        self.verbosity = verbosity
        self.failfast = failfast
        self.keepdb = keepdb

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--keepdb", action="store_true", help="Reuse the test database.")

    def run_tests(self, test_labels, **kwargs) -> int:
        args = [sys.executable, "-m", "pytest", *test_labels]
        if self.failfast:
            args.append("-x")
        if self.keepdb:
            args.append("--reuse-db")
        if self.verbosity == 0:
            args.append("-q")
        elif self.verbosity > 1:
            args.append("-v")
        env = dict(os.environ)
        env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
        return subprocess.call(args, env=env)
