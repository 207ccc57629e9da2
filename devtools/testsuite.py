"""Run the whole pytest suite once per database vendor: SQLite, MariaDB, PostgreSQL.

``make test`` calls this. Each server run gets a throwaway server that is removed afterwards,
even when tests fail. Missing server binaries skip that run with a loud notice, except that
with ``CI=true`` a skipped PostgreSQL or MariaDB run is a failure. PostgreSQL runs last so
the output ends with its pytest summary line.
"""

import os
import subprocess
import sys

from devtools import coverage_report, mariadb, pgcluster

BANNER = "=" * 78


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
    return subprocess.call(
        [sys.executable, "-m", "coverage", "run", "-m", "pytest", *args], env=env
    )


def main(argv: list[str]) -> int:
    in_ci = os.environ.get("CI", "").lower() == "true"
    only = os.environ.get("INSTATIC_TEST_VENDORS", "sqlite,mysql,postgresql").split(",")
    failures: list[str] = []
    coverage_report.erase()

    if "sqlite" in only and run_pytest("SQLite", None, argv) != 0:
        failures.append("SQLite")

    if "mysql" in only:
        if mariadb.find_server() and mariadb.client_library_available():
            with mariadb.MariaDBServer() as server:
                if run_pytest("MariaDB", server.url("instatic"), argv, server) != 0:
                    failures.append("MariaDB")
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
        else:
            notice(
                "SKIPPED: PostgreSQL tests (initdb/pg_ctl not found).\n"
                "Install Debian's postgresql package, then `make test` again."
            )
            if in_ci:
                failures.append("PostgreSQL (skipped under CI=true)")

    coverage_report.report()
    if failures:
        print(f"\nFAILED runs: {', '.join(failures)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
