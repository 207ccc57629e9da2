"""Run the whole pytest suite once per database vendor: SQLite, MariaDB, PostgreSQL.

``make test`` calls this. Each server run gets a throwaway server that is removed afterwards,
even when tests fail. Missing server binaries skip that run with a loud notice, except that
with ``CI=true`` a skipped PostgreSQL or MariaDB run is a failure. PostgreSQL runs last so
the output ends with its pytest summary line.

Nothing a run starts outlives it. Every process of the run carries a marker in its
environment (``INSTATIC_TEST_RUN=<run id>``, inherited by the servers, pytest and everything
the tests start); after each vendor's run :func:`leftovers` lists the marked processes still
running (with the ports they listen on, and the data folder a server lost), and the test
database's sessions that the tests left open are reported by pytest before it drops the
database (tests/support/databases.py). Either fails the run, naming them; the processes are
then stopped. Processes of other runs on the same machine carry other run ids and are never
counted. SIGINT and SIGTERM stop pytest, then the server, before the runner exits.
"""

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from devtools import coverage_report, mariadb, pgcluster
from devtools.servers import RUN_MARKER, exited, signals_exit, stop_pid

BANNER = "=" * 78
LEAK_REPORT = "INSTATIC_TEST_LEAK_REPORT"
#: How long processes of a finished run get to exit on their own before they count as left.
SETTLE_SECONDS = 5.0


def notice(message: str) -> None:
    print(f"\n{BANNER}\n{message}\n{BANNER}", flush=True)


def run_pytest(label: str, database_url: str | None, args: list[str], cluster=None) -> int:
    env = dict(os.environ)
    if cluster is not None:
        cluster.export_env(env)
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env["INSTATIC_TEST_VENDOR_LABEL"] = label
    notice(f"Instatic test suite on {label}")
    # Under coverage; the processes the tests start are measured too ([tool.coverage.run]).
    pytest = subprocess.Popen(
        [sys.executable, "-m", "coverage", "run", "-m", "pytest", *args], env=env
    )
    try:
        return pytest.wait()
    except KeyboardInterrupt:  # Ctrl-C in a terminal reaches pytest too: let it finish first
        _interrupt(pytest, grace=10)
        raise
    except BaseException:
        _interrupt(pytest, grace=0)
        raise


def _interrupt(pytest: subprocess.Popen, *, grace: float) -> None:
    """Stop ``pytest``: it stops what it started (SIGTERM, which works where SIGINT is ignored)."""
    for action, wait in ((None, grace), (signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        if action is not None:
            pytest.send_signal(action)
        try:
            pytest.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@dataclass(frozen=True)
class Leftover:
    """A process of this run that is still running."""

    pid: int
    command: list[str]
    ports: tuple[int, ...]
    lost_folders: tuple[str, ...]

    def __str__(self) -> str:
        text = f"pid {self.pid}: {' '.join(self.command)[:160]}"
        if self.ports:
            text += f" (listening on {', '.join(map(str, self.ports))})"
        if self.lost_folders:
            text += f" (its folder {', '.join(self.lost_folders)} is gone)"
        return text


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def listening_ports() -> dict[int, int]:
    """Return {socket inode: port} of every listening TCP socket on this machine."""
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in _read(table).decode().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":  # LISTEN
                ports[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return ports


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with_inode = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
            if with_inode:
                inodes.add(int(with_inode.group(1)))
    except OSError:
        pass
    return inodes


def lost_folders(command: list[str]) -> tuple[str, ...]:
    """Return the data folders ``command`` names (``--datadir=``, ``-D``) that do not exist."""
    named = [arg.partition("=")[2] for arg in command if arg.startswith("--datadir=")]
    named += [after for before, after in zip(command, command[1:], strict=False) if before == "-D"]
    return tuple(folder for folder in named if folder and not Path(folder).exists())


def ancestors() -> set[int]:
    """Return this process and its ancestors (they carry the marker and are not left over)."""
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        stat = _read(f"/proc/{pid}/stat").decode()
        pid = int(stat.rpartition(")")[2].split()[1]) if stat else 1
    return pids


def leftovers(run_id: str) -> list[Leftover]:
    """Return the processes still running whose environment carries this run's marker."""
    marker = f"{RUN_MARKER}={run_id}".encode()
    mine = ancestors()
    ports = listening_ports()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        pid = int(entry)
        if marker not in _read(f"/proc/{pid}/environ").split(b"\0") or exited(pid):
            continue
        command = [
            part.decode(errors="replace")
            for part in _read(f"/proc/{pid}/cmdline").split(b"\0")
            if part
        ]
        listening = tuple(sorted({ports[i] for i in _socket_inodes(pid) if i in ports}))
        found.append(Leftover(pid, command, listening, lost_folders(command)))
    return found


def check_left_behind(label: str, run_id: str, report: Path) -> list[str]:
    """Return what ``label``'s run left behind (after a moment to exit), stopping it."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while (left := leftovers(run_id)) and time.monotonic() < deadline:
        time.sleep(0.1)
    problems = [f"{label} run left a process running: {leftover}" for leftover in left]
    for leftover in left:
        stop_quietly(leftover.pid)
    if report.exists():
        problems += [f"{label} run: {line}" for line in report.read_text().splitlines() if line]
        report.unlink()
    return problems


def main(argv: list[str]) -> int:
    run_id = uuid.uuid4().hex
    os.environ[RUN_MARKER] = run_id  # inherited by the servers, pytest and their children
    report = Path(tempfile.gettempdir()) / f"instatic-test-leaks-{run_id}.txt"
    os.environ[LEAK_REPORT] = str(report)
    try:
        with signals_exit():
            return run_all(argv, run_id, report)
    finally:  # interrupted or not: nothing of this run outlives it
        for leftover in leftovers(run_id):
            stop_quietly(leftover.pid)
        report.unlink(missing_ok=True)


def stop_quietly(pid: int) -> None:
    try:
        stop_pid(pid, timeout=10)
    except (TimeoutError, PermissionError):
        pass


def run_all(argv: list[str], run_id: str, report: Path) -> int:
    in_ci = os.environ.get("CI", "").lower() == "true"
    only = os.environ.get("INSTATIC_TEST_VENDORS", "sqlite,mysql,postgresql").split(",")
    failures: list[str] = []
    left_behind: list[str] = []
    coverage_report.erase()

    if "sqlite" in only:
        if run_pytest("SQLite", None, argv) != 0:
            failures.append("SQLite")
        left_behind += check_left_behind("SQLite", run_id, report)

    if "mysql" in only:
        if mariadb.find_server() and mariadb.client_library_available():
            with mariadb.MariaDBServer() as server:
                if run_pytest("MariaDB", server.url("instatic"), argv, server) != 0:
                    failures.append("MariaDB")
            left_behind += check_left_behind("MariaDB", run_id, report)
        else:
            notice(
                "SKIPPED: MariaDB tests (mariadbd or the mysqlclient library is not installed).\n"
                "Install Debian's mariadb-server and libmariadb-dev, then `make test` again."
            )
            if in_ci:
                failures.append("MariaDB (skipped under CI=true)")

    if "postgresql" in only:
        if pgcluster.find_bindir():
            with pgcluster.PostgresCluster() as cluster:
                if run_pytest("PostgreSQL", cluster.url("instatic"), argv, cluster) != 0:
                    failures.append("PostgreSQL")
            left_behind += check_left_behind("PostgreSQL", run_id, report)
        else:
            notice(
                "SKIPPED: PostgreSQL tests (initdb/pg_ctl not found).\n"
                "Install Debian's postgresql package, then `make test` again."
            )
            if in_ci:
                failures.append("PostgreSQL (skipped under CI=true)")

    coverage_report.report()
    if left_behind:
        notice("LEFT BEHIND by the test run (now stopped):\n" + "\n".join(left_behind))
        failures.append("left processes or database sessions behind")
    if failures:
        print(f"\nFAILED runs: {', '.join(failures)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
