"""Run the whole pytest suite once per database vendor: SQLite, MariaDB, PostgreSQL; and the
engine's tests once more, on SQLite under the newest Django (6.1, devtools/newest_django.py).

``make test`` calls this. Each server run gets a throwaway server that is removed afterwards,
even when tests fail. Missing server binaries skip that run with a loud notice, and so does a
missing Django 6.1 venv (no Python 3.12 to make it with), except that with ``CI=true`` a
skipped run is a failure. ``INSTATIC_TEST_VENDORS`` picks runs (``sqlite,mysql,postgresql,
django61``, all of them unless set).

The three vendors' runs go on at once, each beside its own server: SQLite and MariaDB in the
background, their output kept in a file each (``var/test-logs/<vendor>-<run id>.log``) and
printed whole once the foreground run, PostgreSQL's (the longest), has ended and printed as it
went. Most of a run is waiting (for a lease to pass, a process to start, a page to load), so
three at once take much less than one after the other; and every test must hold on a busy
machine anyway. At most three runs go on at once (:func:`start_plan`): the Django 6.1 run, the
shortest, starts in the background when the first of the others ends, so the machine is never
busier than with the three. Each run's output ends with its slowest tests (pytest's
``--durations``; a ``--durations`` of the caller's wins), so where a run's time goes shows in
CI's log. A summary of the runs, each with its own wall time, and the whole suite's ends the
output.

Nothing a run starts outlives it. Every process of a vendor's run carries a marker of that run
in its environment (``INSTATIC_TEST_RUN=<run id>``, inherited by pytest and everything the
tests start; the servers carry the suite's own); after each vendor's run :func:`leftovers`
lists the marked processes still running (with the ports they listen on, and the data folder
a server lost), and the test database's sessions that the tests left open are reported by
pytest before it drops the database (tests/support/databases.py). Either fails the run,
naming them; the processes are then stopped. Processes of other runs on the same machine
carry other run ids and are never counted. SIGINT and SIGTERM stop pytest, then the server,
before the runner exits.

The first SIGINT, SIGTERM or SIGHUP stops the run; any that follows (a Ctrl-C pressed again, a
terminal closed) is ignored, so the stopping always finishes: pytest is waited for, then every
process of the run still running is stopped, looking again until none is left (one may start
while another stops). Should the runner die all the same (SIGKILL), the kernel sends its pytest
SIGTERM (``PR_SET_PDEATHSIG``), which stops the test's processes as Ctrl-C does.
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from coordination.parent_death import die_with_parent
from devtools import coverage_report, mariadb, newest_django, pgcluster
from devtools.servers import RUN_MARKER, exited, stop_pid

BANNER = "=" * 78
LEAK_REPORT = "INSTATIC_TEST_LEAK_REPORT"
#: How long processes of a finished run get to exit on their own before they count as left.
SETTLE_SECONDS = 5.0
#: How many of its slowest tests each vendor's run lists at its end.
SLOWEST_SHOWN = 30
#: How long the runner's last look for processes of its runs goes on while it finds some.
SWEEP_SECONDS = 60.0
#: How often the runner, waiting for a run to end, looks whether a waiting run can start.
POLL_SECONDS = 0.5


def notice(message: str) -> None:
    print(f"\n{BANNER}\n{message}\n{BANNER}", flush=True)


@dataclass
class VendorRun:
    """One pytest run (a vendor's, or the engine's on Django 6.1): its marker, its leak report,
    its process and where it prints."""

    label: str
    python: str = sys.executable  # the interpreter of the run's venv
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    log: Path | None = None
    process: subprocess.Popen | None = None
    started: float = 0.0  # time.monotonic() when pytest was started
    ended: float | None = None  # time.monotonic() when pytest ended, noted as it ends

    @property
    def report(self) -> Path:
        """The file where pytest lists the database sessions the tests left open."""
        return Path(tempfile.gettempdir()) / f"instatic-test-leaks-{self.run_id}.txt"

    def start(self, database_url: str | None, args: list[str], cluster=None) -> None:
        env = dict(os.environ)
        if cluster is not None:
            cluster.export_env(env)
        env.pop("DATABASE_URL", None)
        if database_url:
            env["DATABASE_URL"] = database_url
        env["INSTATIC_TEST_VENDOR_LABEL"] = self.label
        env[RUN_MARKER] = self.run_id
        env[LEAK_REPORT] = str(self.report)
        if self.log is None:
            notice(f"Instatic test suite on {self.label}")
            out = None
        else:
            notice(f"Instatic test suite on {self.label}: in the background, printed when it ends")
            self.log.parent.mkdir(parents=True, exist_ok=True)
            out = self.log.open("wb")
        # Under coverage; the processes the tests start are measured too ([tool.coverage.run]).
        # The caller's arguments come after ours: pytest keeps the last --durations given.
        command = [self.python, "-m", "coverage", "run", "-m", "pytest"]
        command += [f"--durations={SLOWEST_SHOWN}", *args]
        self.started = time.monotonic()
        try:
            # Should the runner die without stopping it, pytest stops as on Ctrl-C.
            self.process = subprocess.Popen(
                command,
                env=env,
                stdout=out,
                stderr=out,
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
        finally:
            if out is not None:
                out.close()
        # A background run may end long before it is collected: its wall time is its own.
        threading.Thread(target=self._note_end, daemon=True).start()

    def _note_end(self) -> None:
        self.process.wait()
        self.ended = time.monotonic()

    @property
    def took(self) -> float:
        """Seconds from pytest's start to its end (or to now, while it runs)."""
        return (self.ended or time.monotonic()) - self.started

    def wait(self, meanwhile: Callable[[], None] | None = None) -> int:
        """Wait for pytest to end, calling ``meanwhile`` every ``POLL_SECONDS`` until it does;
        on Ctrl-C or any other exception stop it first."""
        try:
            while True:
                try:
                    return self.process.wait(None if meanwhile is None else POLL_SECONDS)
                except subprocess.TimeoutExpired:
                    meanwhile()
        except KeyboardInterrupt:  # Ctrl-C in a terminal reaches pytest too: let it finish first
            _interrupt(self.process, grace=10)
            raise
        except BaseException:
            _interrupt(self.process, grace=0)
            raise

    def stop(self) -> None:
        """Stop pytest if it is still running (the suite was interrupted)."""
        if self.process is not None and self.process.poll() is None:
            _interrupt(self.process, grace=0)

    def print_log(self) -> None:
        """Print the output kept in the log file (a background run's), then remove the file."""
        if self.log is not None:
            notice(f"Instatic test suite on {self.label} (ran in the background)")
            sys.stdout.flush()
            with self.log.open("rb") as log:
                sys.stdout.buffer.write(log.read())
            sys.stdout.flush()
            self.log.unlink()


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


def check_left_behind(run: VendorRun) -> list[str]:
    """Return what ``run`` left behind (after a moment to exit), stopping it."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while (left := leftovers(run.run_id)) and time.monotonic() < deadline:
        time.sleep(0.1)
    problems = [f"{run.label} run left a process running: {leftover}" for leftover in left]
    for leftover in left:
        stop_quietly(leftover.pid)
    if run.report.exists():
        lines = run.report.read_text().splitlines()
        problems += [f"{run.label} run: {line}" for line in lines if line]
        run.report.unlink()
    return problems


class StopOnce:
    """The runner's SIGINT, SIGTERM and SIGHUP, while it runs: the first one stops the run
    (``KeyboardInterrupt`` for SIGINT, ``SystemExit`` for the others); any that comes after
    it, or while the run is being stopped (``stopping``), is said and ignored, so the stopping
    of what the run started is never cut short."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.stopping = False
        self._previous: dict = {}

    def __enter__(self) -> "StopOnce":
        self._previous = {sig: signal.signal(sig, self._received) for sig in self.SIGNALS}
        return self

    def __exit__(self, *exc_info) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _received(self, signum, frame) -> None:
        if self.stopping:
            print(
                f"\n{signal.Signals(signum).name}: still stopping what the test run started",
                file=sys.stderr,
                flush=True,
            )
            return
        self.stopping = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    run_id = uuid.uuid4().hex
    os.environ[RUN_MARKER] = run_id  # inherited by the servers; each vendor's run has its own
    runs: list[VendorRun] = []
    with StopOnce() as signals:
        try:
            return run_all(argv, runs)
        finally:  # interrupted or not: nothing of this run outlives it
            signals.stopping = True
            for run in runs:
                run.stop()
            stop_leftovers([run_id, *(run.run_id for run in runs)])
            for run in runs:
                run.report.unlink(missing_ok=True)


def stop_leftovers(markers: list[str], *, within: float = SWEEP_SECONDS) -> None:
    """Stop every process that carries one of ``markers``, looking again until none is left
    (or ``within`` seconds have passed): a process may start while another is stopped."""
    deadline = time.monotonic() + within
    while left := [leftover for marker in markers for leftover in leftovers(marker)]:
        for leftover in left:
            stop_quietly(leftover.pid)
        if time.monotonic() > deadline:
            return


def stop_quietly(pid: int) -> None:
    try:
        stop_pid(pid, timeout=10)
    except (TimeoutError, PermissionError):
        pass


#: Where the background SQLite run's output is kept until it is printed (one file per run,
#: so two suites in one checkout never write into each other's).
BACKGROUND_LOGS = Path(__file__).resolve().parent.parent / "var" / "test-logs"


def took_text(seconds: float) -> str:
    """Return a run's wall time as the summary shows it: ``22 min 27 s``."""
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def in_background(count: int) -> list[bool]:
    """Return, for each of ``count`` runs in the order they start, whether it goes on in the
    background, its output kept in a file: every run but the last, whose output is the
    terminal's as it goes (so a lone run, a developer's one vendor, prints as it goes)."""
    return [index < count - 1 for index in range(count)]


def collection_order(count: int) -> list[int]:
    """Return the order in which the runner waits for ``count`` runs: the foreground run (the
    last started) first, its output being in the terminal already, then the background runs in
    the order they started, each one's kept output printed whole when it is collected."""
    return [count - 1, *range(count - 1)] if count else []


#: The runs (``INSTATIC_TEST_VENDORS`` names), the longest first: the longest of those that
#: start at once prints in the foreground, and the shortest are the ones that wait.
RUNS = ("postgresql", "mysql", "sqlite", "django61")
#: At most this many runs go on at once (the vendors' three): a run beyond them starts when
#: one of them ends, so the machine is never busier than with the three.
AT_ONCE = 3
#: The summary's order of its lines.
SUMMARY_ORDER = ("SQLite", "MariaDB", "PostgreSQL", "Django 6.1", "cleanup")


def start_plan(names: list[str], *, at_once: int = AT_ONCE) -> tuple[list[str], list[str]]:
    """Return the runs of ``names`` that start at once, in the order they start (the longest
    last, in the foreground), and those that wait, in the order they start as others end."""
    longest_first = [name for name in RUNS if name in names]
    return longest_first[:at_once][::-1], longest_first[at_once:]


@dataclass(frozen=True)
class Kind:
    """What a run needs before it starts, and what it hands pytest."""

    label: str
    installed: bool
    missing: str = ""  # the notice when it is not installed: why, and what to do
    make_server: Callable | None = None
    python: str = sys.executable
    arguments: Callable[[list[str]], list[str]] = list  # pytest's, from the caller's

    @property
    def log_name(self) -> str:
        """The name its background log starts with: ``sqlite``, ``mariadb``, ``django61``."""
        return re.sub(r"[^a-z0-9]", "", self.label.lower())


def kind_of(name: str) -> Kind:
    """Return the run ``name`` (one of ``RUNS``)."""
    if name == "sqlite":
        return Kind("SQLite", True)
    if name == "mysql":
        return Kind(
            "MariaDB",
            bool(mariadb.find_server() and mariadb.client_library_available()),
            "SKIPPED: MariaDB tests (mariadbd or the mysqlclient library is not installed).\n"
            "Install Debian's mariadb-server and libmariadb-dev, then `make test` again.",
            mariadb.MariaDBServer,
        )
    if name == "postgresql":
        return Kind(
            "PostgreSQL",
            bool(pgcluster.find_bindir()),
            "SKIPPED: PostgreSQL tests (initdb/pg_ctl not found).\n"
            "Install Debian's postgresql package, then `make test` again.",
            pgcluster.PostgresCluster,
        )
    installed = newest_django.installed()
    return Kind(
        "Django 6.1",
        installed,
        "" if installed else newest_django.missing(),
        python=str(newest_django.PYTHON),
        arguments=newest_django.pytest_arguments,
    )


def run_all(argv: list[str], runs: list[VendorRun]) -> int:
    """Run each vendor's pytest, at most ``AT_ONCE`` at a time, each beside its own server;
    return the exit status."""
    in_ci = os.environ.get("CI", "").lower() == "true"
    only = os.environ.get("INSTATIC_TEST_VENDORS", ",".join(RUNS)).split(",")
    outcomes: dict[str, str] = {}
    left_behind: list[str] = []
    coverage_report.erase()
    suite_started = time.monotonic()

    kinds: dict[str, Kind] = {}
    for name in (name for name in RUNS if name in only):
        kind = kind_of(name)
        if kind.installed:
            kinds[name] = kind
        else:
            notice(kind.missing)
            if in_ci:
                outcomes[kind.label] = "FAILED (skipped under CI=true)"
    at_once, waiting = start_plan(list(kinds), at_once=AT_ONCE)

    with contextlib.ExitStack() as every_server:
        servers: list[contextlib.ExitStack] = []

        def start(name: str, background: bool) -> None:
            kind = kinds[name]
            run = VendorRun(kind.label, python=kind.python)
            if background:
                run.log = BACKGROUND_LOGS / f"{kind.log_name}-{run.run_id}.log"
            servers.append(every_server.enter_context(contextlib.ExitStack()))
            make_server = kind.make_server
            server = None if make_server is None else servers[-1].enter_context(make_server())
            runs.append(run)
            url = None if server is None else server.url("instatic")
            run.start(url, kind.arguments(argv), server)

        def start_waiting() -> None:
            """Start the waiting runs while fewer than ``AT_ONCE`` runs go on. Called by the
            runner's main thread only: a pytest's parent-death signal comes when the thread
            that started it ends, not the runner."""
            while waiting and sum(run.ended is None for run in runs) < AT_ONCE:
                start(waiting.pop(0), background=True)

        def collect(index: int) -> None:
            run = runs[index]
            status = run.wait(meanwhile=start_waiting)
            servers[index].close()  # each server goes as soon as its run is collected
            outcome = "passed" if status == 0 else f"FAILED (pytest exit {status})"
            outcomes[run.label] = f"{outcome} in {took_text(run.took)}"
            left_behind.extend(check_left_behind(run))
            run.print_log()

        try:
            for name, background in zip(at_once, in_background(len(at_once)), strict=True):
                start(name, background)
            for index in collection_order(len(at_once)):
                collect(index)
            # Then the runs that waited, in the order they started (every earlier run has
            # ended by now, so those still waiting start).
            index = len(at_once)
            while index < len(runs) or waiting:
                start_waiting()
                collect(index)
                index += 1
        except BaseException:  # stopped: every run's pytest goes before any server does
            for run in runs:
                run.stop()
            raise

    if runs:  # none when every run was skipped: no data to report
        coverage_report.report()
    if left_behind:
        notice("LEFT BEHIND by the test run (now stopped):\n" + "\n".join(left_behind))
        outcomes["cleanup"] = "FAILED (left processes or database sessions behind)"
    summary = sorted(outcomes.items(), key=lambda item: SUMMARY_ORDER.index(item[0]))
    summary.append(("all", f"{took_text(time.monotonic() - suite_started)} from start to end"))
    notice("\n".join(f"{label:<12}{outcome}" for label, outcome in summary))
    failures = [label for label, outcome in outcomes.items() if not outcome.startswith("passed")]
    if failures:
        print(f"\nFAILED runs: {', '.join(failures)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
