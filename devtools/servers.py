"""Shared plumbing for throwaway database servers started by tests, benchmarks and demos."""

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


class ServerProcess:
    """A server run from a temporary folder: ``stop()`` ends it and removes the folder."""

    process: subprocess.Popen | None = None
    workdir: Path | None = None
    stop_timeout = 30.0

    def stop(self) -> None:
        terminate(self.process, timeout=self.stop_timeout)
        self.process = None
        if self.workdir is not None:
            remove_tree(self.workdir)
            self.workdir = None

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
