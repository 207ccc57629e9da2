"""The database a chaos soak runs on: PostgreSQL or MariaDB, behind one small interface.

The soak's checks are plain SQL that both vendors understand; what differs (the clock
function, intervals, quoting of reserved words, ending a node's sessions, restarting the
server) lives here, one class per vendor.
"""

import time
from datetime import timedelta

from devtools.mariadb import MariaDBServer
from devtools.pgcluster import PostgresCluster
from devtools.pgreplica import ReplicatedPair


class Unreachable(Exception):
    """The database did not answer (restarting, or gone)."""


class SoakDatabase:
    """A throwaway server for the soak, and how to talk to it."""

    #: Whether the failover fault applies (a standby to promote).
    can_fail_over = False
    #: Whether the lease-mode replicas run in lease mode behind a PgBouncer (PostgreSQL's).
    behind_pgbouncer = False
    vendor = ""
    label = ""
    now = ""  # the statement's time
    clock = ""  # the time right now, inside a transaction too

    def start(self, hosts: list[str], network: str) -> None:
        """Start the server listening on ``hosts``, trusting clients of ``network`` (the
        soak's namespaces, ``10.<octet>.0.0/16``)."""
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def restart(self) -> None:
        raise NotImplementedError

    def url(self, host: str = "127.0.0.1") -> str:
        raise NotImplementedError

    def primary_port(self) -> int:
        """The port of the server that accepts writes (what a PgBouncer in front points at)."""
        raise NotImplementedError

    def connect(self, *, autocommit: bool = True):
        raise NotImplementedError

    def ago(self, seconds: float) -> str:
        """Return SQL for the statement's time minus ``seconds``."""
        raise NotImplementedError

    def later(self, seconds: float) -> str:
        """Return SQL for the statement's time plus ``seconds``."""
        raise NotImplementedError

    def q(self, name: str) -> str:
        """Quote an identifier that is a reserved word (``group``, ``trigger``)."""
        raise NotImplementedError

    def end_sessions(
        self, node: str, *, role: str = "lock", connection_id: int | None = None
    ) -> int:
        """End ``node``'s sessions of ``role`` (``lock`` or ``work``; only ``connection_id``
        when given); return how many."""
        raise NotImplementedError

    def first_lock_waiter(self, key: int) -> str | None:
        """Return the node whose lock session has waited longest for lock ``key`` (the one the
        server grants it to next), or None."""
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------------------
    def query(self, sql: str, params=()):
        """Run one statement on a new connection, retrying while the server is unreachable."""
        for _ in range(50):
            try:
                conn = self.connect()
            except Unreachable:
                time.sleep(0.2)
                continue
            try:
                cursor = conn.cursor()
                cursor.execute(sql, params)
                return cursor.fetchall() if cursor.description else []
            except self.errors as exc:
                if not self.transient(exc):
                    raise
                time.sleep(0.2)
            finally:
                conn.close()
        raise RuntimeError(f"database unreachable for: {sql}")

    def scalar(self, sql: str, params=()):
        rows = self.query(sql, params)
        return rows[0][0] if rows else None

    errors: tuple = ()

    def transient(self, exc: BaseException) -> bool:
        return True


class PostgresDatabase(SoakDatabase):
    vendor = "postgresql"
    label = "PostgreSQL"
    behind_pgbouncer = True
    now = "now()"
    clock = "clock_timestamp()"

    def __init__(self):
        import psycopg

        self.psycopg = psycopg
        self.errors = (psycopg.OperationalError,)
        self.cluster: PostgresCluster | None = None

    def start(self, hosts: list[str], network: str) -> None:
        self.cluster = PostgresCluster(
            extra_conf={"listen_addresses": f"'{','.join(hosts)}'", "max_connections": "400"},
            extra_hba=[f"host all all {network} trust"],
        )
        self.cluster.start()
        with self.psycopg.connect(self.cluster.url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE instatic")

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()

    def restart(self) -> None:
        self.cluster.restart("fast")

    def url(self, host: str = "127.0.0.1") -> str:
        return f"postgres://postgres@{host}:{self.cluster.port}/instatic"

    def primary_port(self) -> int:
        return self.cluster.port

    def connect(self, *, autocommit: bool = True):
        try:
            return self.psycopg.connect(self.url(), autocommit=autocommit, connect_timeout=3)
        except self.psycopg.OperationalError as exc:
            raise Unreachable(str(exc)) from exc

    def ago(self, seconds: float) -> str:
        return f"(now() - interval '{seconds} seconds')"

    def later(self, seconds: float) -> str:
        return f"(now() + interval '{seconds} seconds')"

    def q(self, name: str) -> str:
        return f'"{name}"'

    def end_sessions(
        self, node: str, *, role: str = "lock", connection_id: int | None = None
    ) -> int:
        """Terminate the backends named ``<node>/<role>`` (how each process labels its
        sessions: ``coordination.node_setup.label_database_sessions``)."""
        rows = self.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s"
            " AND (%s::integer IS NULL OR pid = %s::integer)",
            (f"{node}/{role}"[:63], connection_id, connection_id),
        )
        return len(rows)

    def first_lock_waiter(self, key: int) -> str | None:
        name = self.scalar(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND NOT l.granted AND l.objsubid = 1"
            " AND ((l.classid::bigint << 32) | l.objid::bigint) = %s"
            " ORDER BY l.waitstart LIMIT 1",
            (key,),
        )
        return name.removesuffix("/lock") if name else None


class MariaDBDatabase(SoakDatabase):
    """MariaDB: sessions are found through the connection ids each scheduler records."""

    vendor = "mysql"
    label = "MariaDB"
    now = "NOW(6)"
    clock = "SYSDATE(6)"

    def __init__(self):
        import MySQLdb

        self.mysqldb = MySQLdb
        self.errors = (MySQLdb.OperationalError,)
        self.server: MariaDBServer | None = None

    def start(self, hosts: list[str], network: str) -> None:
        self.server = MariaDBServer(bind_address=",".join(hosts))
        self.server.start()
        # The namespaced replicas connect from 10.<octet>.<n>.2.
        prefix = ".".join(network.split(".")[:2]) + ".%"
        self.server._sql(
            f"CREATE USER IF NOT EXISTS 'root'@'{prefix}';"
            f" GRANT ALL ON *.* TO 'root'@'{prefix}' WITH GRANT OPTION;"
        )

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def restart(self) -> None:
        self.server.restart()

    def url(self, host: str = "127.0.0.1") -> str:
        return f"mysql://root@{host}:{self.server.port}/instatic"

    def connect(self, *, autocommit: bool = True):
        try:
            return self.mysqldb.connect(
                host="127.0.0.1",
                port=self.server.port,
                user="root",
                database="instatic",
                autocommit=autocommit,
                connect_timeout=3,
            )
        except self.mysqldb.OperationalError as exc:
            raise Unreachable(str(exc)) from exc

    def ago(self, seconds: float) -> str:
        return f"(NOW(6) - INTERVAL {round(seconds * 1e6)} MICROSECOND)"

    def later(self, seconds: float) -> str:
        return f"(NOW(6) + INTERVAL {round(seconds * 1e6)} MICROSECOND)"

    def q(self, name: str) -> str:
        return f"`{name}`"

    def end_sessions(
        self, node: str, *, role: str = "lock", connection_id: int | None = None
    ) -> int:
        """``KILL`` the live connections of ``role`` that ``node`` recorded (matched by id and
        client)."""
        rows = self.query(
            "SELECT p.ID FROM coordination_nodesession s JOIN information_schema.PROCESSLIST p"
            " ON p.ID = s.connection_id AND p.HOST = s.client"
            " WHERE s.node = %s AND s.role = %s AND (%s IS NULL OR s.connection_id = %s)",
            (node, role, connection_id, connection_id),
        )
        ended = 0
        for (thread_id,) in rows:
            try:
                self.query(f"KILL CONNECTION {int(thread_id)}")
                ended += 1
            except self.mysqldb.OperationalError:
                pass  # it ended on its own meanwhile
        return ended

    def first_lock_waiter(self, key: int) -> str | None:
        """The recorded lock connection whose ``GET_LOCK`` of the key has run longest."""
        return self.scalar(
            "SELECT s.node FROM coordination_nodesession s JOIN information_schema.PROCESSLIST p"
            " ON p.ID = s.connection_id AND p.HOST = s.client"
            " WHERE s.role = 'lock' AND p.INFO LIKE %s ORDER BY p.TIME_MS DESC LIMIT 1",
            (f"%GET_LOCK('instatic:lock:{key & 0xFFFFFFFFFFFFFFFF:016x}'%",),
        )

    def transient(self, exc: BaseException) -> bool:
        # 1094: no such thread (a KILL that lost a race); not worth retrying.
        return not (exc.args and exc.args[0] == 1094)


class ReplicatedPostgresDatabase(PostgresDatabase):
    """PostgreSQL as a primary with a synchronous hot standby, which the failover fault
    promotes (the old primary is then rebuilt as the new standby). Nodes reach whichever
    server is primary through libpq's multi-host URL."""

    label = "PostgreSQL (primary + synchronous standby)"
    can_fail_over = True

    def __init__(self):
        super().__init__()
        self.pair: ReplicatedPair | None = None

    def start(self, hosts: list[str], network: str) -> None:
        self.pair = ReplicatedPair(
            synchronous=True,
            extra_conf={"listen_addresses": f"'{','.join(hosts)}'", "max_connections": "400"},
            extra_hba=[f"host all all {network} trust"],
        )
        self.pair.start()

    def stop(self) -> None:
        if self.pair is not None:
            self.pair.stop()

    def restart(self) -> None:
        self.pair.primary.restart("fast")
        self.pair.wait_streaming()

    def url(self, host: str = "127.0.0.1") -> str:
        return self.pair.url(host=host)

    def primary_port(self) -> int:
        return self.pair.primary.port

    def fail_over(self) -> None:
        """Stop the primary at once, promote the standby; :meth:`rebuild` restores the pair."""
        self.pair.fail_over()

    def rebuild(self) -> None:
        self.pair.rebuild()


DATABASES = {
    "postgresql": PostgresDatabase,
    "postgresql-replicated": ReplicatedPostgresDatabase,
    "mariadb": MariaDBDatabase,
}


def make(vendor: str) -> SoakDatabase:
    return DATABASES[vendor]()


def window_max(times: list, width: timedelta) -> int:
    """Return the most of ``times`` (sorted) that fall in any window [t, t + width]."""
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] < t - width:
            start += 1
        best = max(best, end - start + 1)
    return best
