"""A throwaway MariaDB server: its own data folder and socket, on a free loopback port.

Used as a context manager by the test runner, benchmarks and the chaos soak; the folder is
removed on exit. Run ``python -m devtools.mariadb`` to keep one up until Ctrl-C (it prints its
``DATABASE_URL``). ``restart()`` is ``mysqladmin shutdown`` and a start on the same data: every
session ends, as in an operator's restart.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

from devtools.servers import (
    HandedDown,
    ServerProcess,
    exited,
    free_port,
    pid_in,
    run_as,
    serve_until_stopped,
    service_user,
    wait_for_port,
)


def find_server() -> str | None:
    """Return the path of ``mariadbd``/``mysqld``, or ``None`` when MariaDB is not installed."""
    for name in ("mariadbd", "mysqld"):
        for folder in ("", "/usr/sbin/", "/usr/local/sbin/"):
            path = shutil.which(name) if not folder else (folder + name)
            if path and Path(path).exists():
                return path
    return None


def client_library_available() -> bool:
    try:
        import MySQLdb  # noqa: F401
    except ImportError:
        return False
    return True


class MariaDBServer(HandedDown, ServerProcess):
    """One MariaDB server on 127.0.0.1 with a root user that needs no password over TCP.

    ``stop()`` stops the server its pid file names, so a server a test restarted through a
    handle (:meth:`from_env`) is stopped by the server's owner too.
    """

    ENV_VAR = "INSTATIC_TEST_MARIADB"
    BINARY = "server"
    pid_file_name = "mysqld.pid"
    workdir_prefix = "instatic-mariadb-"

    def __init__(self, *, port: int | None = None, bind_address: str = "127.0.0.1", extra_args=()):
        self.server = find_server()
        if self.server is None:
            raise RuntimeError("MariaDB server binaries (mariadbd) are not installed")
        self.port = port or free_port()
        self.bind_address = bind_address
        self.extra_args = list(extra_args)
        self.user = service_user()
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None

    def url(self, dbname: str = "instatic") -> str:
        return f"mysql://root@127.0.0.1:{self.port}/{dbname}"

    @property
    def socket_path(self) -> str:
        return f"{self.workdir}/mysqld.sock"

    def _create(self) -> None:
        self._install(shutil.which("mariadb-install-db") or shutil.which("mysql_install_db"))
        self._launch()
        self._sql(
            "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';"
            " GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
            " CREATE DATABASE IF NOT EXISTS instatic;"
        )
        self._load_time_zones()

    def _install(self, install: str) -> None:
        run_as(
            [
                install,
                "--no-defaults",
                f"--datadir={self.workdir}/data",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *([f"--user={self.user}"] if self.user else []),
            ],
            self.user,
            timeout=180,
            # Its bootstrap server writes temporary files to $TMPDIR, which a test run points
            # at a folder the server's user cannot write: give it the server's own folder.
            env={**os.environ, "TMPDIR": str(self.workdir)},
        )

    def _launch(self) -> None:
        """Start ``mariadbd`` on the existing data folder and wait until it answers."""
        self.process = subprocess.Popen(
            [
                self.server,
                "--no-defaults",
                f"--datadir={self.workdir}/data",
                f"--socket={self.socket_path}",
                f"--pid-file={self.workdir}/mysqld.pid",
                # Not $TMPDIR: a test run points it at a folder the server user cannot write.
                f"--tmpdir={self.workdir}",
                f"--bind-address={self.bind_address}",
                f"--port={self.port}",
                "--skip-name-resolve",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0",
                "--max-connections=400",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
                f"--log-error={self.workdir}/error.log",
                *self.extra_args,
            ],
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,  # a Ctrl-C meant for a test run must not reach it
        )
        wait_for_port(self.port, timeout=60)
        self._sql("SELECT 1")

    def halt(self) -> None:
        """Stop the server with ``mysqladmin shutdown`` but keep its data (a database outage)."""
        pid = pid_in(self.workdir / self.pid_file_name)
        admin = shutil.which("mariadb-admin") or shutil.which("mysqladmin")
        subprocess.run(
            [admin, "--no-defaults", f"--socket={self.socket_path}", "-uroot", "shutdown"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        if self.process is not None:
            self.process.wait(60)
            self.process = None
        deadline = time.monotonic() + 60
        while pid is not None and not exited(pid) and time.monotonic() < deadline:
            time.sleep(0.05)

    def resume(self) -> None:
        self._launch()

    def restart(self) -> None:
        """``mysqladmin shutdown``, then start again on the same data and port."""
        self.halt()
        self.resume()

    def _adopt(self, binary: str) -> None:
        self.server, self.process = binary, None
        self.bind_address, self.extra_args = "127.0.0.1", []

    def _load_time_zones(self) -> None:
        """Load the zone tables, which Django needs for time-zone-aware date queries on MySQL."""
        to_sql = shutil.which("mariadb-tzinfo-to-sql") or shutil.which("mysql_tzinfo_to_sql")
        if to_sql is None or not Path("/usr/share/zoneinfo").is_dir():
            return
        statements = subprocess.run(
            [to_sql, "/usr/share/zoneinfo"], capture_output=True, text=True, check=True
        ).stdout
        client = shutil.which("mariadb") or shutil.which("mysql")
        subprocess.run(
            [client, "--no-defaults", f"--socket={self.socket_path}", "-uroot", "mysql"],
            input=statements,
            capture_output=True,
            text=True,
            check=True,
        )

    def _sql(self, sql: str) -> None:
        client = shutil.which("mariadb") or shutil.which("mysql")
        deadline = time.monotonic() + 30
        while True:
            result = subprocess.run(
                [
                    client,
                    "--no-defaults",
                    f"--socket={self.socket_path}",
                    "-uroot",
                    "-e",
                    sql,
                ],
                capture_output=True,
                text=True,
            )
            if result.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"MariaDB setup failed: {result.stderr}")
            time.sleep(0.1)


def main() -> None:
    """Start a server, print its URL, and keep it until SIGINT/SIGTERM."""
    with MariaDBServer() as server:
        serve_until_stopped(f"DATABASE_URL={server.url('instatic')}")


if __name__ == "__main__":
    main()
