"""A real process holding a leader lock, driven line by line from a test.

Run as ``python -m tests.coordination.lockholder KEY [--node NAME] [--acquire] [--pool]
[--instance ID]`` with
``DJANGO_SETTINGS_MODULE`` and ``DATABASE_URL`` set (``tests.support.processes.process_env()``).
``KEY`` is an integer (``0xdeadbeef``, ``-5``) or a name. The process prints ``READY``, then
answers each command read from stdin with exactly one line on stdout:

``acquire [WAIT]``  ``ACQUIRED <session id>`` or ``NOT ACQUIRED``
``held``            ``HELD`` or ``NOT HELD`` (``still_held()``)
``release``         ``RELEASED`` or ``NOT RELEASED``
``recycle``         ``RECYCLED <pid>``: ``close_old_connections()`` and ``connection.close()``
                    after a query on Django's connection (whose backend pid is reported)
``probe N``         ``PROBE <json>``: N borrowers of Django's connection each try
                    ``pg_try_advisory_lock(KEY)`` and report ``[backend pid, result]``
``leak``            ``LEAKED <pid>``: take KEY on Django's connection and give it back (the bug
                    the dedicated lock connection exists to avoid; a control for ``probe``)
``follow KEY2 WAIT`` ``FOLLOWING``: wait up to WAIT seconds for lock KEY2 in a thread of its own
                    (a lock session of the same node), as a node's loop of another group does
``exit`` or EOF     close the lock and exit 0

``--pool`` turns on Django's psycopg connection pool for the ``default`` alias,
``--acquire`` takes the lock before ``READY`` (then printed as ``READY ACQUIRED <id>``), and
``--instance`` records the process's connections as node NAME's process ID
(``coordination.nodesessions``, MySQL), as a registered scheduler does, so the server's
sessions can tell whether it is gone.
:class:`LockHolderProcess` is the test side: it starts the process and talks to it.
"""

import argparse
import copy
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
POOL_OPTIONS = {"min_size": 2, "max_size": 2, "timeout": 10}


def parse_key(text: str) -> int | str:
    """Return ``text`` as an integer key when it is one (any base literal), else as a name."""
    try:
        return int(text, 0)
    except ValueError:
        return text


# --- the holder process -------------------------------------------------------------------
class Holder:
    def __init__(self, key: int | str, node: str):
        from coordination.keys import normalize_key
        from coordination.locks import make_lock

        self.key = normalize_key(key)
        self.node = node
        self.lock = make_lock(key, node_name=node, label="lockholder")
        self.followed = []

    def acquire(self, wait: str = "0") -> str:
        if self.lock.acquire(wait=float(wait)):
            return f"ACQUIRED {self.lock.session_id()}"
        return "NOT ACQUIRED"

    def held(self) -> str:
        return "HELD" if self.lock.still_held() else "NOT HELD"

    def follow(self, key: str, wait: str) -> str:
        from coordination.locks import make_lock

        lock = make_lock(parse_key(key), node_name=self.node, label="follower")
        self.followed.append(lock)
        threading.Thread(target=lock.acquire, kwargs={"wait": float(wait)}, daemon=True).start()
        return "FOLLOWING"

    def close(self) -> None:
        for lock in self.followed:
            lock.cancel_wait()
        self.lock.close()

    def release(self) -> str:
        return "RELEASED" if self.lock.release() else "NOT RELEASED"

    def recycle(self) -> str:
        from django.db import close_old_connections, connection

        pid = backend_pid(connection)
        close_old_connections()
        connection.close()
        return f"RECYCLED {pid}"

    def probe(self, count: str) -> str:
        from django.db import connection

        results = []
        for _ in range(int(count)):
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid(), pg_try_advisory_lock(%s)", [self.key])
                pid, got = cursor.fetchone()
                if got:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [self.key])
            connection.close()  # hand the connection back to the pool
            results.append([pid, got])
        return f"PROBE {json.dumps(results)}"

    def leak(self) -> str:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid(), pg_advisory_lock(%s)", [self.key])
            pid = cursor.fetchone()[0]
        connection.close()
        return f"LEAKED {pid}"


def backend_pid(connection) -> int | None:
    """Return the server session id of Django's ``connection`` (SQLite: this process)."""
    if connection.vendor == "sqlite":
        return os.getpid()
    sql = (
        "SELECT pg_backend_pid()" if connection.vendor == "postgresql" else "SELECT CONNECTION_ID()"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lockholder")
    parser.add_argument("key")
    parser.add_argument("--node", default="lockholder")
    parser.add_argument("--acquire", action="store_true")
    parser.add_argument("--pool", action="store_true")
    parser.add_argument("--instance")
    args = parser.parse_args(argv)

    from django.conf import settings

    if args.pool:
        # Before django.setup(): the connection handler reads DATABASES on first use.
        settings.DATABASES["default"].setdefault("OPTIONS", {})["pool"] = dict(POOL_OPTIONS)
        settings.DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool refuses any other

    import django

    django.setup()
    if args.instance:
        from coordination import nodesessions
        from coordination.liveness import NodeIdentity

        identity = NodeIdentity(args.node, args.instance, "localhost", os.getpid())
        nodesessions.record_connections(identity)
    holder = Holder(parse_key(args.key), args.node)
    ready = "READY"
    if args.acquire:
        ready += " " + holder.acquire()
    print(ready, flush=True)
    try:
        for line in sys.stdin:
            command, *params = line.split()
            if command == "exit":
                break
            print(getattr(holder, command)(*params), flush=True)
    finally:
        holder.close()
    return 0


# --- the test side ----------------------------------------------------------------------
class LockHolderProcess:
    """A running ``lockholder``: send it commands, read its answers, kill it for real."""

    def __init__(
        self, key, *, node: str = "lockholder", acquire=False, pool=False, instance=None, env=None
    ):
        from tests.support.processes import process_env

        args = [str(key), "--node", node]
        args += ["--acquire"] * acquire + ["--pool"] * pool
        args += ["--instance", instance] if instance else []
        self.node = node
        self.log_path = Path(tempfile.mkstemp(prefix=f"instatic-{node}-", suffix=".log")[1])
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.coordination.lockholder", *args],
            cwd=BASE_DIR,
            env=env or process_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.ready_line: str | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> str:
        """Wait for ``READY`` and return the rest of that line (the initial acquire's answer)."""
        if self.ready_line is None:
            line = self.read(timeout)
            assert line.startswith("READY"), f"{self.node}: expected READY, got {line!r}"
            self.ready_line = line[len("READY") :].strip()
        return self.ready_line

    def read(self, timeout: float = 10.0) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"{self.node}: no answer within {timeout}s; its log:\n{self.log()[-3000:]}"
            ) from None
        if line is None:
            self._lines.put(None)
            raise AssertionError(
                f"{self.node} exited ({self.process.poll()}); its log:\n{self.log()[-3000:]}"
            )
        return line

    def send(self, command: str) -> None:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def ask(self, command: str, timeout: float = 10.0) -> str:
        self.wait_ready()
        self.send(command)
        return self.read(timeout)

    def acquire(self, wait: float = 0.0) -> int | None:
        """Return the holder's session id if it took the lock, else ``None``."""
        return _session(self.ask(f"acquire {wait}", timeout=wait + 10))

    def held(self) -> bool:
        return {"HELD": True, "NOT HELD": False}[self.ask("held")]

    def release(self) -> bool:
        return {"RELEASED": True, "NOT RELEASED": False}[self.ask("release")]

    def kill(self) -> None:
        """SIGKILL: no ``finally``, no unlock, no goodbye to the server."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self, timeout: float = 10.0) -> int | None:
        """Close stdin (the holder closes its lock and exits); kill it if it hangs."""
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reader.join(5)
        self.process.stdout.close()
        self._log.close()
        return self.process.returncode

    def __enter__(self) -> "LockHolderProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class Holders:
    """Start several holders at once (in parallel) and always stop them all."""

    def __init__(self):
        self.started: list[LockHolderProcess] = []

    def start(self, *keys, nodes=(), **kwargs) -> list[LockHolderProcess]:
        """Start one holder per key, then wait until every one of them is ready."""
        names = list(nodes) or [f"holder{len(self.started) + i + 1}" for i in range(len(keys))]
        batch = [
            LockHolderProcess(key, node=name, **kwargs)
            for key, name in zip(keys, names, strict=True)
        ]
        self.started += batch
        for holder in batch:
            holder.wait_ready()
        return batch

    def __enter__(self) -> "Holders":
        return self

    def __exit__(self, *exc) -> None:
        for holder in self.started:
            holder.stop()


@contextmanager
def temporary_alias(alias: str, **overrides):
    """Add database ``alias``: a copy of ``default``'s settings with ``overrides``.

    For locks on a database other than the test database (a stopped server, a dead port, an
    in-memory SQLite): the lock reads its connection settings from ``connections[alias]``.
    """
    from django.db import connections

    settings_dict = copy.deepcopy(connections["default"].settings_dict)
    settings_dict.update(overrides)
    connections.settings[alias] = settings_dict
    try:
        yield connections[alias]
    finally:
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]


def is_waiting(lock) -> bool:
    """Return whether ``lock``'s session waits for a lock on the server (SQLite: it polls)."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT EXISTS (SELECT 1 FROM pg_locks"
                " WHERE pid = %s AND locktype = 'advisory' AND NOT granted)",
                [lock.session_id()],
            )
            return cursor.fetchone()[0]
        if connection.vendor == "mysql":
            cursor.execute(
                "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = %s",
                [lock.session_id()],
            )
            row = cursor.fetchone()
            return bool(row) and row[0] == "User lock"
    return True


def _session(answer: str) -> int | None:
    if answer == "NOT ACQUIRED":
        return None
    word, session = answer.split()
    assert word == "ACQUIRED", answer
    return int(session)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
