"""A throwaway PgBouncer in transaction pooling mode in front of a throwaway PostgreSQL."""

import shutil
import subprocess
from pathlib import Path

from devtools.servers import ServerProcess, free_port, service_user, wait_for_port


def find_binary() -> str | None:
    return shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if Path("/usr/sbin/pgbouncer").exists() else None
    )


class PgBouncer(ServerProcess):
    """PgBouncer on 127.0.0.1, pooling ``dbname`` of the server at ``upstream_port``."""

    workdir_prefix = "instatic-pgbouncer-"

    def __init__(self, *, upstream_port: int, dbname: str, pool_mode: str = "transaction"):
        binary = find_binary()
        if binary is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install pgbouncer)")
        self.binary = binary
        self.upstream_port = upstream_port
        self.dbname = dbname
        self.pool_mode = pool_mode
        self.stop_timeout = 15.0
        self.port = free_port()
        self.user = service_user()  # PgBouncer refuses to run as root
        self.workdir: Path | None = None
        self.process: subprocess.Popen | None = None

    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.dbname}"

    def _create(self) -> None:
        (self.workdir / "userlist.txt").write_text('"postgres" ""\n')
        (self.workdir / "pgbouncer.ini").write_text(
            f"""[databases]
{self.dbname} = host=127.0.0.1 port={self.upstream_port} dbname={self.dbname}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.workdir}/userlist.txt
pool_mode = {self.pool_mode}
max_client_conn = 500
default_pool_size = 20
logfile = {self.workdir}/pgbouncer.log
pidfile = {self.workdir}/pgbouncer.pid
ignore_startup_parameters = extra_float_digits
"""
        )
        self.process = subprocess.Popen(
            [self.binary, str(self.workdir / "pgbouncer.ini")],
            user=self.user,
            cwd="/",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, timeout=30)
