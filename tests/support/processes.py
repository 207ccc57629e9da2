"""Real ``runscheduler`` (and other manage.py) processes for multi-process tests.

Each process logs to its own file; tests read the log and the database, signal the process for
real (SIGKILL, SIGSTOP/SIGCONT, SIGTERM) and always clean up, even when the test fails.

Every process starts in a process group of its own (so a Ctrl-C meant for pytest reaches
pytest alone, which then stops them in order) and is tracked: :func:`stop_children` ends
whatever is still running, group and all, at the end of the session, at exit, and when pytest
is interrupted by SIGINT or SIGTERM (:func:`interrupt_on_sigterm`); an interrupt that comes
while it stops them waits until it is done. A process started from pytest's main thread is
also killed by the kernel should pytest die first (``PR_SET_PDEATHSIG``).
"""

import atexit
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from coordination.parent_death import die_with_parent
from devtools.freezing import freeze
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


_children: list[subprocess.Popen] = []


def track(process: subprocess.Popen) -> subprocess.Popen:
    """Have :func:`stop_children` end ``process`` (started with ``start_new_session=True``)."""
    _children.append(process)
    return process


#: The signals that end a test run by raising in its main thread (Ctrl-C's
#: ``KeyboardInterrupt``, SIGTERM and SIGHUP turned into exceptions by the suite's handlers).
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def start_tracked(args: list[str], **popen_kwargs) -> subprocess.Popen:
    """Start a process in a session of its own and track it, with no interrupt between the
    two: one that comes while the process starts is taken once it is tracked, so
    :func:`stop_children` ends it. (Raised inside ``Popen``, or between it and
    :func:`track`, it would leave a started process that nothing knows of.)"""
    main = threading.current_thread() is threading.main_thread()
    # Only from the main thread: the kernel signals the child when the thread that started
    # it ends, and pytest's main thread ends with pytest.
    preexec = die_with_parent() if main else None
    with interrupts_held():
        return track(
            subprocess.Popen(args, start_new_session=True, preexec_fn=preexec, **popen_kwargs)
        )


@contextlib.contextmanager
def interrupts_held():
    """Hold back the Python handlers of :data:`INTERRUPTS` until the block ends, then deliver
    what came meanwhile. Outside the main thread (where handlers never run) it does nothing.

    The handlers are swapped, not the signals blocked: a blocked signal mask is inherited by
    the processes started meanwhile, which could then not be stopped.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {}
    for sig in INTERRUPTS:
        if callable(signal.getsignal(sig)):
            previous[sig] = signal.signal(sig, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(came):
            signal.raise_signal(sig)


def kill_group(process: subprocess.Popen, *, timeout: float = 10.0) -> None:
    """SIGTERM ``process``'s group, SIGKILL it after ``timeout``, and reap ``process``."""
    for sig, wait in ((signal.SIGCONT, 0), (signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait)
        if sig != signal.SIGCONT and not _group_alive(process.pid):
            return


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@atexit.register
def stop_children() -> None:
    """End every tracked process (and its process group) that is still running.

    Interrupts wait until it is done (a Ctrl-C pressed again, the runner's SIGTERM after its
    grace), and a process is forgotten only once it is stopped: cut short, this would leave
    running a process that nothing stops any more.
    """
    with interrupts_held():
        while _children:
            process = _children[-1]
            if process.poll() is None or _group_alive(process.pid):
                kill_group(process)
            _children.remove(process)


def interrupt_on_sigterm() -> None:
    """Make SIGTERM interrupt pytest as Ctrl-C does, so its teardown stops what it started."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)


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


def logged_at(stamp: str) -> float:
    """Return the seconds of a log line's ``%(asctime)s`` (``2026-01-02 03:04:05,678``)."""
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


class ManagedProcess:
    """A ``manage.py`` subprocess with its output in a log file."""

    def __init__(self, args: list[str], *, name: str, env: dict | None = None, prefix=()):
        self.name = name
        self.log_path = Path(tempfile.mkstemp(prefix=f"instatic-{name}-", suffix=".log")[1])
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = start_tracked(
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

    def wait_for_log(self, pattern: str, *, timeout: float = 60.0, count: int = 1) -> str:
        regex = re.compile(pattern)
        return wait_until(
            lambda: len(regex.findall(self.log())) >= count,
            timeout=timeout,
            message=f"{self.name}: {pattern!r} not logged within {timeout}s:\n{self.log()[-3000:]}",
        )

    def logged_at(self, pattern: str) -> float:
        """Return when the first log line matching ``pattern`` was written (its ``asctime``,
        seconds since the epoch, as ``time.time()`` counts)."""
        for line in self.log().splitlines():
            if re.search(pattern, line):
                return logged_at(line[:23])
        raise AssertionError(f"{self.name}: {pattern!r} not logged:\n{self.log()[-3000:]}")

    def signal(self, sig: int) -> None:
        """Send ``sig``; SIGSTOP returns once every thread of the process has stopped
        (``devtools.freezing.freeze``: a signal queued is not a process stopped)."""
        if self.process.poll() is None:
            if sig == signal.SIGSTOP:
                freeze(self.pid)
            else:
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
        if _group_alive(self.pid):  # something it started outlived it
            kill_group(self.process)
        with contextlib.suppress(ValueError):
            _children.remove(self.process)
        self._log.close()
        return self.process.returncode


def start_scheduler(node: str, *groups: str, env: dict | None = None, extra_args=(), prefix=()):
    args = ["runscheduler", "--node-name", node, *extra_args]
    for group in groups:
        args += ["--group", group]
    return ManagedProcess(args, name=node, env=env, prefix=prefix)
