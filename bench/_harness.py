"""Shared pieces of the benchmarks: a migrated throwaway site and real scheduler replicas."""

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import psycopg

from devtools.pgcluster import PostgresCluster

BASE_DIR = Path(__file__).resolve().parent.parent
#: Where this benchmark run's replicas log: a folder per run, so a run that failed keeps its
#: logs when the next one starts (``BENCH_LOG_DIR`` to choose it).
LOG_DIR = Path(
    os.environ.get("BENCH_LOG_DIR") or f"/tmp/instatic-bench-logs-{time.strftime('%Y%m%d-%H%M%S')}"
)

#: PostgreSQL settings that log every statement under its connection's ``application_name``
#: (``<node>/lock``, ``<node>/work``), so statements are counted without instrumenting the product.
STATEMENT_LOG = {"log_statement": "'all'", "log_line_prefix": "'%a|'", "log_min_messages": "info"}
#: One logged statement: the ``application_name``, and the statement's first 60 characters.
STATEMENT = re.compile(r"^([^|\n]*)\|LOG:  (?:statement|execute [^:]*): (.{0,60})", re.MULTILINE)


def env_for(url: str, **extra: str) -> dict:
    """Return production-like settings for processes of the benchmarked site."""
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "instatic.settings",
            "DJANGO_SECRET_KEY": "bench-" + "x" * 60,
            "DJANGO_DEBUG": "0",
            "INSTATIC_VAR_DIR": "/tmp/instatic-bench-var",
            "PYTHONUNBUFFERED": "1",
            # Schedulers without worker processes unless a benchmark asks (bench/workers.py
            # measures them, each beside its --workers 0 baseline).
            "INSTATIC_WORKERS": "0",
            **extra,
        }
    )
    return env


@contextmanager
def migrated_site(extra_conf: dict | None = None, **env_extra: str):
    """Yield (cluster, database URL, process env) for a migrated throwaway PostgreSQL site."""
    with PostgresCluster(extra_conf=extra_conf) as cluster:
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE instatic")
        url = cluster.url("instatic")
        env = env_for(url, **env_extra)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        yield cluster, url, env


class Replica:
    """One ``runscheduler`` process (or another ``command``, e.g. ``runworker``), logging to
    /tmp; ``extra_args`` go after the node name and groups (``--workers 2``).

    With ``name_sessions``, sessions the product leaves without an ``application_name`` are
    named ``<name>/unnamed``, so the statement counts by node include them.
    """

    def __init__(
        self,
        name: str,
        env: dict,
        *groups: str,
        command: str = "runscheduler",
        extra_args: tuple[str, ...] = (),
        name_sessions: bool = False,
    ):
        self.name = name
        if name_sessions:
            # libpq's default application_name, for the sessions the process (and its worker
            # children, which inherit the environment) opens before naming its own.
            env = {**env, "PGAPPNAME": f"{name}/unnamed"}
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log = open(LOG_DIR / f"instatic-bench-{name}.log", "wb")  # noqa: SIM115
        args = [sys.executable, "manage.py", command, "--node-name", name]
        for group in groups:
            args += ["--group", group]
        args += list(extra_args)
        self.process = subprocess.Popen(
            args, cwd=BASE_DIR, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def leader(conn, group: str = "publishing") -> str | None:
    row = conn.execute(
        'SELECT node FROM coordination_leadership WHERE "group" = %s', (group,)
    ).fetchone()
    return row[0] if row else None


def wait_for(predicate, timeout: float, interval: float = 0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("benchmark condition not met")


def statements_while_idle(
    cluster, conn, seconds: float, *, lease: float, timeout: float = 60
) -> list[re.Match]:
    """Return the statements ``cluster`` (started with ``STATEMENT_LOG``) logs in ``seconds``
    of its replicas idling.

    The window opens once both groups have a leader (within ``timeout``) and one lease and a
    margin later: start-up work (the first ticks, the maintenance pass one lease on) is not idle.
    """
    wait_for(lambda: leader(conn) and leader(conn, "plugins"), timeout)
    time.sleep(lease + 5)
    log_path = cluster.workdir / "server.log"
    offset = log_path.stat().st_size
    time.sleep(seconds)
    with open(log_path, errors="replace") as f:
        f.seek(offset)
        return list(STATEMENT.finditer(f.read()))


def statements_by_node(matches: list[re.Match]) -> Counter:
    """Count logged statements by node: the ``application_name`` before its ``/``."""
    return Counter(m.group(1).split("/")[0] for m in matches)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def print_table(title: str, rows: list[tuple[str, str, str, bool]]) -> None:
    from bench import _report

    _report.table(title, rows)  # every printed table is in var/bench/report.md too
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    for name, value, target, ok in rows:
        print(f"  {name.ljust(width)}  {value:>10}  target {target:<9} {'PASS' if ok else 'FAIL'}")


def migrated_django(database_url: str) -> None:
    """Set Django up on ``database_url`` (the tests' settings) and migrate it: once per
    benchmark process."""
    os.environ["DATABASE_URL"] = database_url
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def timed(function, rounds: int) -> list[float]:
    """Return ``rounds`` wall times of ``function()``, in milliseconds."""
    samples = []
    for _ in range(rounds):
        began = time.perf_counter()
        function()
        samples.append((time.perf_counter() - began) * 1000)
    return samples


def timed_beside(function, baseline, rounds: int) -> tuple[list[float], list[float]]:
    """Return ``rounds`` wall times of ``function()`` and of ``baseline()``, in milliseconds,
    taken in turns: whatever else the machine does meanwhile weighs on both alike, so their
    ratio holds on a shared, noisy machine."""
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        for measured, call in zip(samples, (function, baseline), strict=True):
            measured.extend(timed(call, 1))
    return samples
