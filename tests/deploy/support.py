"""Helpers for deployment tests: run the very entry scripts the container runs, as processes.

The scripts call ``python`` and ``gunicorn`` from ``PATH``, as they do in the image (whose
virtualenv is first on ``PATH``); here the test virtualenv's ``bin`` is put first instead.
"""

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from devtools.servers import RUN_MARKER
from tests.support.polling import wait_until
from tests.support.processes import BASE_DIR, process_env, start_tracked

DEPLOY = BASE_DIR / "deploy"
VENV_BIN = Path(sys.executable).parent


def script_env(**extra: str) -> dict:
    """Return the test processes' environment with the virtualenv's ``bin`` first on PATH."""
    env = process_env(**extra)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def production_env(**extra: str) -> dict:
    """Return an environment with no Django/Instatic variable from the test process."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "INSTATIC_")) and k != "DATABASE_URL"
    }
    if RUN_MARKER in os.environ:  # not a setting: it marks what this test run started
        env[RUN_MARKER] = os.environ[RUN_MARKER]
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


class ScriptProcess:
    """One entry script started directly (no shell in between), output in a log file."""

    def __init__(self, script: str, *args: str, env: dict, name: str | None = None):
        self.name = name or script
        self.log_path = Path(tempfile.mkstemp(prefix=f"instatic-{self.name}-", suffix=".log")[1])
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        # Its own process group, so stop() also ends whatever a broken script left behind.
        self.process = start_tracked(
            [str(DEPLOY / script), *args],
            cwd="/",  # the scripts must find the project on their own
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def cmdline(self) -> list[str]:
        """Return the command line of the process we started (``/proc/<pid>/cmdline``)."""
        raw = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        return [part.decode() for part in raw.split(b"\0") if part]

    def terminate(self, timeout: float = 30.0) -> int:
        """Send SIGTERM and return the exit code (SIGKILL and fail if it hangs)."""
        if self.alive():
            os.kill(self.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.name} ignored SIGTERM for {timeout}s:\n{self.log()}")

    def stop(self) -> None:
        """Kill the process and its whole group (gunicorn workers, a non-exec'd child)."""
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()
        self._log.close()


def http_get(url: str, *, headers: dict | None = None, timeout: float = 5.0) -> tuple[int, str]:
    """Return (status, body) of a GET; connection errors give status 0."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


def wait_for_status(url: str, status: int = 200, *, timeout: float = 30.0, proc=None, **kw):
    """Poll ``url`` until it answers ``status``; return the body."""
    seen = {}

    def answered():
        if proc is not None and not proc.alive():
            raise AssertionError(f"{proc.name} exited ({proc.process.returncode}):\n{proc.log()}")
        seen["last"] = http_get(url, **kw)
        return seen["last"][0] == status

    try:
        wait_until(answered, timeout=timeout, interval=0.1)
    except AssertionError as exc:
        log = proc.log()[-3000:] if proc is not None else ""
        raise AssertionError(
            f"{url} never answered {status} (last {seen.get('last')}): {exc}\n{log}"
        )
    return seen["last"][1]


def load_healthcheck():
    """Import ``deploy/healthcheck.py`` (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("instatic_healthcheck", DEPLOY / "healthcheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_healthcheck(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(DEPLOY / "healthcheck.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
