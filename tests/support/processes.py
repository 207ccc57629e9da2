"""Real ``runscheduler`` (and other manage.py) processes for multi-process tests.

Each process logs to its own file; tests read the log and the database, signal the process for
real (SIGKILL, SIGSTOP/SIGCONT, SIGTERM) and always clean up, even when the test fails.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from tests.support.polling import wait_until

BASE_DIR = Path(__file__).resolve().parents[2]


def database_url() -> str:
    """Return a DATABASE_URL for the database the tests use right now (the test database)."""
    s = connection.settings_dict
    vendor = connection.vendor
    if vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    scheme = {"postgresql": "postgres", "mysql": "mysql"}[vendor]
    auth = quote(s.get("USER") or "")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"])
    host = s.get("HOST") or "127.0.0.1"
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"{scheme}://{auth}@{host}{port}/{s['NAME']}"


def process_env(**extra: str) -> dict:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


class ManagedProcess:
    """A ``manage.py`` subprocess with its output in a log file."""

    def __init__(self, args: list[str], *, name: str, env: dict | None = None, prefix=()):
        self.name = name
        self.log_path = Path(tempfile.mkstemp(prefix=f"instatic-{name}-", suffix=".log")[1])
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [*prefix, sys.executable, str(BASE_DIR / "manage.py"), *args],
            cwd=BASE_DIR,
            env=env or process_env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.paused = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, pattern: str, *, timeout: float = 15.0, count: int = 1) -> str:
        regex = re.compile(pattern)
        return wait_until(
            lambda: len(regex.findall(self.log())) >= count,
            timeout=timeout,
            message=f"{self.name}: {pattern!r} not logged within {timeout}s:\n{self.log()[-3000:]}",
        )

    def signal(self, sig: int) -> None:
        if self.process.poll() is None:
            os.kill(self.pid, sig)
        if sig == signal.SIGSTOP:
            self.paused = True
        elif sig == signal.SIGCONT:
            self.paused = False

    def wait(self, timeout: float = 30.0) -> int:
        return self.process.wait(timeout)

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (continuing a paused process first) and wait; SIGKILL if it hangs."""
        if self.process.poll() is None:
            if self.paused:
                self.signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


def start_scheduler(node: str, *groups: str, env: dict | None = None, extra_args=(), prefix=()):
    args = ["runscheduler", "--node-name", node, *extra_args]
    for group in groups:
        args += ["--group", group]
    return ManagedProcess(args, name=node, env=env, prefix=prefix)
