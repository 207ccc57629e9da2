"""A throwaway MariaDB server: its own data folder and socket, on a free loopback port."""

import shutil
import subprocess
import time
from pathlib import Path

from devtools.servers import (
    ServerProcess,
    free_port,
    make_workdir,
    run_as,
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


class MariaDBServer(ServerProcess):
    """One MariaDB server on 127.0.0.1 with a root user that needs no password over TCP."""

    def __init__(self, *, port: int | None = None):
        self.server = find_server()
        if self.server is None:
            raise RuntimeError("MariaDB server binaries (mariadbd) are not installed")
        self.port = port or free_port()
        self.user = service_user()
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None

    def url(self, dbname: str = "instatic") -> str:
        return f"mysql://root@127.0.0.1:{self.port}/{dbname}"

    def start(self) -> "MariaDBServer":
        self.workdir = make_workdir("instatic-mariadb-", self.user)
        install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
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
        )
        self.process = subprocess.Popen(
            [
                self.server,
                "--no-defaults",
                f"--datadir={self.workdir}/data",
                f"--socket={self.workdir}/mysqld.sock",
                f"--pid-file={self.workdir}/mysqld.pid",
                "--bind-address=127.0.0.1",
                f"--port={self.port}",
                "--skip-name-resolve",
                "--innodb-flush-log-at-trx-commit=0",
                "--innodb-doublewrite=0",
                "--max-connections=300",
                "--character-set-server=utf8mb4",
                "--collation-server=utf8mb4_unicode_ci",
                f"--log-error={self.workdir}/error.log",
            ],
            user=self.user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
        )
        try:
            wait_for_port(self.port, timeout=60)
            self._sql(
                "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';"
                " GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
                " CREATE DATABASE IF NOT EXISTS instatic;"
            )
            self._load_time_zones()
        except Exception:
            self.stop()
            raise
        return self

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
            [client, "--no-defaults", f"--socket={self.workdir}/mysqld.sock", "-uroot", "mysql"],
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
                    f"--socket={self.workdir}/mysqld.sock",
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
