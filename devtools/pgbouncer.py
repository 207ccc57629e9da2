"""A throwaway PgBouncer in transaction pooling mode in front of a throwaway PostgreSQL.

:meth:`PgBouncer.follow` points it at another upstream port (a promoted standby) by rewriting
its configuration and reloading it (``SIGHUP``, what ``RELOAD`` on its admin console does);
:meth:`PgBouncer.restart` stops it at once (``SIGTERM``: every client connection drops) and
starts it again on the same port, as an operator's restart of the pooler does.
"""

import shutil
import signal
import subprocess
from pathlib import Path

from devtools.servers import ServerProcess, free_port, pid_in, service_user, stop_pid, wait_for_port


def find_binary() -> str | None:
    return shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )


class PgBouncer(ServerProcess):
    """PgBouncer on 127.0.0.1, pooling ``dbname`` of the server at ``upstream_port``."""

    workdir_prefix = "instatic-pgbouncer-"
    pid_file_name = "pgbouncer.pid"

    def __init__(
        self,
        *,
        upstream_port: int,
        dbname: str,
        pool_mode: str = "transaction",
        extra_config: dict | None = None,
    ):
        binary = find_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.binary = binary
        self.upstream_port = upstream_port
        self.dbname = dbname
        self.pool_mode = pool_mode
        #: More ``[pgbouncer]`` settings (they win over the defaults), e.g.
        #: ``{"server_round_robin": 1, "default_pool_size": 4}``.
        self.extra_config = dict(extra_config or {})
        self.stop_timeout = 15.0
        self.port = free_port()
        self.user = service_user()  # PgBouncer refuses to run as root
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None

    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.dbname}"

    @property
    def ini_path(self) -> Path:
        return self.workdir / "pgbouncer.ini"

    def settings(self) -> dict:
        """The ``[pgbouncer]`` section: the defaults, then :attr:`extra_config`."""
        return {
            "listen_addr": "127.0.0.1",
            "listen_port": self.port,
            "unix_socket_dir": "",
            "auth_type": "trust",
            "auth_file": f"{self.workdir}/userlist.txt",
            "pool_mode": self.pool_mode,
            "max_client_conn": 500,
            "default_pool_size": 20,
            "logfile": f"{self.workdir}/pgbouncer.log",
            "pidfile": f"{self.workdir}/{self.pid_file_name}",
            "ignore_startup_parameters": "extra_float_digits",
            **self.extra_config,
        }

    def _write_ini(self) -> None:
        self.ini_path.write_text(
            f"[databases]\n{self.dbname} = host=127.0.0.1 port={self.upstream_port}"
            f" dbname={self.dbname}\n\n[pgbouncer]\n"
            + "".join(f"{name} = {value}\n" for name, value in self.settings().items())
        )

    def _create(self) -> None:
        (self.workdir / "userlist.txt").write_text('"postgres" ""\n')
        self._write_ini()
        self._launch()

    def _launch(self) -> None:
        self.process = subprocess.Popen(
            [self.binary, str(self.ini_path)],
            user=self.user,
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, timeout=30)

    def follow(self, upstream_port: int) -> None:
        """Pool the server at ``upstream_port`` from now on (new server connections go there)."""
        self.upstream_port = upstream_port
        self._write_ini()
        self.process.send_signal(signal.SIGHUP)

    def restart(self) -> None:
        """Stop at once (clients are disconnected) and start again on the same port."""
        pid = pid_in(self.workdir / self.pid_file_name)
        stop_pid(pid or self.process.pid, sig=signal.SIGTERM, timeout=self.stop_timeout)
        self.process.wait()
        (self.workdir / self.pid_file_name).unlink(missing_ok=True)
        self._launch()
