"""Shared plumbing for throwaway database servers started by tests, benchmarks and demos.

A server is stopped through the pid file in its data folder, not through the process object
of whoever started it: a test that restarts the suite's server starts a new process that its
owner never saw. Every server started in a process is also stopped when that process exits
(:func:`stop_owned_servers` at exit; :func:`signals_exit` makes SIGTERM an exit that unwinds).
"""

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: Set in the environment of everything one test-suite run starts (servers, pytest, the
#: processes tests start), so the run can find what it left behind and nothing of another run.
RUN_MARKER = "INSTATIC_TEST_RUN"


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def service_user() -> str | None:
    """Return the user that database servers run as, or ``None`` to run as ourselves.

    PostgreSQL refuses to run as root, and CI runs as root, so there we borrow the
    ``postgres`` account that Debian's package creates (or ``nobody``).
    """
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "mysql", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and no unprivileged account exists to run the server")


def make_workdir(prefix: str, user: str | None) -> Path:
    """Create a temporary folder owned by ``user`` (when given)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if user:
        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(0o755)
    return path


def run_as(args, user: str | None, **kwargs) -> subprocess.CompletedProcess:
    """Run ``args`` as ``user``, raising with the command's output when it fails."""
    result = subprocess.run(args, user=user, capture_output=True, text=True, cwd="/", **kwargs)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, args))} failed ({result.returncode}):\n"
            f"{result.stdout}\n{result.stderr}"
        )
    return result


def wait_for_port(port: int, *, timeout: float = 30.0) -> None:
    """Poll until something accepts TCP connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"nothing listens on 127.0.0.1:{port} after {timeout}s"
                ) from None
            time.sleep(0.05)


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def terminate(process: subprocess.Popen | None, *, timeout: float = 30.0) -> None:
    """SIGTERM ``process`` and wait; SIGKILL it if it does not exit within ``timeout``."""
    if process is None:
        return
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def exited(pid: int) -> bool:
    """Return whether ``pid`` has exited (reaping it when it is our child; a zombie counts)."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[0] in ("Z", "X")


def pid_in(pid_file: Path) -> int | None:
    """Return the pid on the first line of ``pid_file``, or ``None`` when there is none."""
    try:
        first = pid_file.read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def stop_pid(pid: int, *, timeout: float = 30.0, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to ``pid`` and wait until it exits; SIGKILL it after ``timeout``."""
    for current, wait in ((sig, timeout), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, current)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if exited(pid):
                return
            time.sleep(0.02)
    raise TimeoutError(f"process {pid} did not exit after SIGKILL")


def remove_server_folder(
    workdir: Path, pid_file: Path | None, *, sig: int = signal.SIGTERM, timeout: float = 30.0
) -> None:
    """Stop the process ``pid_file`` names (if any) and remove ``workdir``, until it stays gone.

    A server that was being started when its owner stopped it writes its pid file a moment
    later, and files it creates meanwhile survive a removal: both are looked for again.
    """
    deadline = time.monotonic() + 10.0
    while True:
        pid = pid_in(pid_file) if pid_file is not None else None
        if pid is not None:
            stop_pid(pid, sig=sig, timeout=timeout)
        remove_tree(workdir)
        if not workdir.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.1)


_owned: list = []


def own(server) -> None:
    """Stop ``server`` when this process exits, unless it was stopped before."""
    if server not in _owned:
        _owned.append(server)


def disown(server) -> None:
    with contextlib.suppress(ValueError):
        _owned.remove(server)


@atexit.register
def stop_owned_servers() -> None:
    """Stop every server this process started and has not stopped (newest first)."""
    while _owned:
        server = _owned.pop()
        try:
            server.stop()
        except Exception as exc:  # at exit: report, and go on stopping the others
            print(f"could not stop {server!r}: {exc}", file=sys.stderr)


@contextlib.contextmanager
def signals_exit(*signals: int):
    """Turn ``signals`` (default SIGTERM, SIGHUP) into ``SystemExit`` so ``with`` blocks unwind."""

    def exit_now(signum, frame):
        raise SystemExit(128 + signum)

    signals = signals or (signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, exit_now) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class HandedDown:
    """A server a child process can get a handle on: :meth:`export_env` and :meth:`from_env`.

    The handle carries the server's binary (or binary folder), data folder, port and user;
    :meth:`_adopt` makes the handle from them. A handle's ``stop()`` works too: servers are
    stopped through their data folder's pid file.
    """

    ENV_VAR: str
    BINARY: str  # the attribute holding the binary

    def export_env(self, env: dict) -> None:
        """Let child processes (tests) restart this server: see :meth:`from_env`."""
        hand_down(env, self.ENV_VAR, getattr(self, self.BINARY), self.workdir, self.port, self.user)

    @classmethod
    def from_env(cls, environ):
        """Return a handle on the server a parent process started, or ``None``."""
        fields = handed_down(environ, cls.ENV_VAR)
        if fields is None:
            return None
        binary, workdir, port, user = fields
        handle = cls.__new__(cls)
        handle.workdir, handle.port, handle.user = Path(workdir), int(port), user or None
        handle._adopt(binary)
        return handle

    def _adopt(self, binary: str) -> None:
        raise NotImplementedError


class ServerProcess:
    """A server run from a temporary folder: ``start()`` makes the folder and starts the server
    in it (:meth:`_create`), ``stop()`` ends it and removes the folder; both are the ``with``
    block's.

    A subclass with a pid file names it in :attr:`pid_file_name`; ``stop()`` then stops
    whichever process the file names (a restarted server's too), else the process it started.
    """

    process: subprocess.Popen | None = None
    workdir: Path | None = None
    user: str | None = None
    stop_timeout = 30.0
    pid_file_name: str | None = None
    #: How the names of this kind of server's temporary folders begin.
    workdir_prefix = "instatic-server-"

    def open_workdir(self, prefix: str | None = None) -> Path:
        """Make the server's temporary folder (owned by its user) and stop the server at exit."""
        self.workdir = make_workdir(prefix or self.workdir_prefix, self.user)
        own(self)
        return self.workdir

    def start(self):
        """Start the server in a new folder; if starting fails, stop it and remove the folder."""
        self.open_workdir()
        try:
            self._create()
        except BaseException:
            self.stop()
            raise
        return self

    def _create(self) -> None:
        """Set the server up in :attr:`workdir` and start it."""
        raise NotImplementedError

    def stop(self) -> None:
        pid_file = (
            self.workdir / self.pid_file_name if self.workdir and self.pid_file_name else None
        )
        pid = pid_in(pid_file) if pid_file is not None else None
        if pid is not None:
            stop_pid(pid, timeout=self.stop_timeout)
        terminate(self.process, timeout=self.stop_timeout)
        self.process = None
        if self.workdir is not None:
            remove_server_folder(self.workdir, pid_file, timeout=self.stop_timeout)
            self.workdir = None
        disown(self)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def serve_until_stopped(*lines: str) -> None:
    """Print ``lines`` (the server's DATABASE_URL...) and wait for Ctrl-C or SIGTERM.

    What ``python -m devtools.pgcluster`` (and the other throwaway servers) do when run by
    hand: the caller's ``with`` block then removes the server.
    """
    for line in lines:
        print(line, flush=True)
    try:
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        signal.pause()
    except (KeyboardInterrupt, SystemExit):
        pass


def hand_down(env: dict, variable: str, *fields) -> None:
    """Put a server's handle into ``env`` so child processes (tests) can restart it."""
    env[variable] = "|".join("" if field is None else str(field) for field in fields)


def handed_down(environ, variable: str) -> list[str] | None:
    """Return the fields :func:`hand_down` wrote, or ``None`` when no parent did."""
    value = environ.get(variable)
    return value.split("|") if value else None
