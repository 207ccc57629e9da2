"""Shared pieces of the benchmarks: a migrated throwaway site and real scheduler replicas."""

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import psycopg

from devtools.pgcluster import PostgresCluster

BASE_DIR = Path(__file__).resolve().parent.parent


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
    """One ``runscheduler`` process, logging to /tmp."""

    def __init__(self, name: str, env: dict, *groups: str):
        self.name = name
        self.log = open(f"/tmp/instatic-bench-{name}.log", "wb")  # noqa: SIM115
        args = [sys.executable, "manage.py", "runscheduler", "--node-name", name]
        for group in groups:
            args += ["--group", group]
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
