"""A throwaway PostgreSQL cluster: ``initdb`` + ``pg_ctl`` in a temporary folder on a free port.

Used as a context manager by the test runner, benchmarks and ``make ha-demo``; the folder is
removed on exit even when the body raised. Run ``python -m devtools.pgcluster`` to keep one up
until Ctrl-C (it prints its ``DATABASE_URL``).
"""

import glob
import os
import shutil
import signal
from pathlib import Path

from devtools.servers import (
    HandedDown,
    ServerProcess,
    disown,
    free_port,
    remove_server_folder,
    run_as,
    serve_until_stopped,
    service_user,
)


def find_bindir() -> Path | None:
    """Return the folder holding ``initdb`` and ``pg_ctl``, or ``None`` when not installed."""
    env = os.environ.get("INSTATIC_PG_BINDIR")
    candidates = [env] if env else []
    on_path = shutil.which("pg_ctl")
    if on_path:
        # Resolve symlinks (/usr/local/bin/pg_ctl -> /usr/lib/postgresql/15/bin/pg_ctl): the
        # other server tools (pg_basebackup, postgres) live beside the real binary only.
        candidates.append(str(Path(on_path).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for folder in candidates:
        if folder and (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


class PostgresCluster(HandedDown, ServerProcess):
    """One PostgreSQL server listening on 127.0.0.1, owned by this process.

    ``pg_ctl`` finds the server through ``postmaster.pid`` in the data folder, so ``stop()``
    stops a server that a test restarted through a handle (:meth:`from_env`) as well.
    """

    ENV_VAR = "INSTATIC_TEST_PG_CLUSTER"
    BINARY = "bindir"
    workdir_prefix = "instatic-pg-"

    def __init__(
        self,
        *,
        port: int | None = None,
        extra_conf: dict | None = None,
        extra_hba: list[str] | None = None,
    ):
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        self.bindir = bindir
        self.port = port or free_port()
        self.user = service_user()
        self.extra_conf = extra_conf or {}
        self.extra_hba = extra_hba or []
        self.workdir: Path | None = None

    @property
    def datadir(self) -> Path:
        return self.workdir / "data"

    def url(self, dbname: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def _pg_ctl(self, *args: str, timeout: float = 60) -> None:
        run_as(
            [self.bindir / "pg_ctl", "-D", self.datadir, "-w", "-t", "60", *args],
            self.user,
            timeout=timeout,
        )

    def _create(self) -> None:
        run_as(
            [
                self.bindir / "initdb",
                "-D",
                self.datadir,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            self.user,
            timeout=120,
        )
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.workdir}'",
            "max_connections": "300",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "log_min_messages": "warning",
            **{k: str(v) for k, v in self.extra_conf.items()},
        }
        with open(self.datadir / "postgresql.conf", "a") as f:
            for key, value in conf.items():
                f.write(f"{key} = {value}\n")
        if self.extra_hba:
            with open(self.datadir / "pg_hba.conf", "a") as f:
                f.write("\n".join(self.extra_hba) + "\n")
        self._pg_ctl("-l", str(self.workdir / "server.log"), "start")

    def restart(self, mode: str = "fast") -> None:
        """Restart the server (``pg_ctl restart -m fast`` kills every session)."""
        self._pg_ctl("-l", str(self.workdir / "server.log"), "-m", mode, "restart")

    def halt(self, mode: str = "fast") -> None:
        """Stop the server but keep its data, to :meth:`resume` it later (a database outage)."""
        self._pg_ctl("-m", mode, "stop")

    def resume(self) -> None:
        self._pg_ctl("-l", str(self.workdir / "server.log"), "start")

    def stop(self, mode: str = "fast") -> None:
        if self.workdir is None:
            return
        try:
            if (self.datadir / "postmaster.pid").exists():
                self._pg_ctl("-m", mode, "stop")
        except Exception:
            try:
                self._pg_ctl("-m", "immediate", "stop")
            except Exception:
                pass  # the pid file says what is left to stop, below
        finally:
            # SIGQUIT: PostgreSQL's immediate shutdown, for a server pg_ctl could not stop.
            remove_server_folder(self.workdir, self.datadir / "postmaster.pid", sig=signal.SIGQUIT)
            self.workdir = None
            disown(self)

    def _adopt(self, binary: str) -> None:
        self.bindir, self.extra_conf, self.extra_hba = Path(binary), {}, []


def main() -> None:
    """Start a cluster, print its URL, and keep it until SIGINT/SIGTERM."""
    with PostgresCluster() as cluster:
        import psycopg

        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE instatic")
        serve_until_stopped(f"DATABASE_URL={cluster.url('instatic')}")


if __name__ == "__main__":
    main()
