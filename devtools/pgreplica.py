"""A throwaway PostgreSQL primary with a streaming-replication hot standby, and failovers.

Tests and the chaos soak use it to fail a primary over the way Patroni or a managed
service does: the primary stops at once (``pg_ctl stop -m immediate``), the standby is
promoted, and the old primary is rebuilt as the new standby (``pg_basebackup -R``) so the
next failover can go the other way. Nodes reach whichever is primary through libpq's
multi-host URL (:meth:`ReplicatedPair.url`).

``synchronous=True`` makes the standby synchronous (``synchronous_standby_names`` on the
primary, ``synchronous_commit = on``): a commit returns only once the standby has it, so a
failover loses nothing. ``synchronous=False`` is plain asynchronous streaming, where the
last commits before a failover can be lost; tests measure that window.

Run ``python -m devtools.pgreplica [--async]`` to keep a pair up until Ctrl-C.
"""

import argparse
import contextlib
import os
import signal
import sys
import time

from devtools.freezing import freeze
from devtools.pgcluster import PostgresCluster
from devtools.servers import free_port, remove_tree, run_as, serve_until_stopped

STANDBY_NAME = "instatic_standby"


def _replication_conf(*, synchronous: bool) -> dict:
    """Settings both servers carry (either may be primary after a failover)."""
    return {
        "wal_level": "replica",
        "max_wal_senders": "10",
        "wal_keep_size": "'256MB'",
        "hot_standby": "on",
        # Durability is what a failover test is about: commits wait for the standby's flush
        # (synchronous) or only for the primary's own WAL (asynchronous). fsync stays off:
        # an immediate stop loses no page cache, only a machine crash would.
        "synchronous_commit": "on" if synchronous else "local",
        "wal_sender_timeout": "5s",
        "wal_receiver_status_interval": "1s",
        # A standby reconnects at once after its primary restarts: synchronous commits wait
        # for it meanwhile.
        "wal_retrieve_retry_interval": "'200ms'",
    }


class ReplicatedPair:
    """A primary and a hot standby on 127.0.0.1; :meth:`fail_over` swaps their roles."""

    def __init__(
        self,
        *,
        synchronous: bool = True,
        dbname: str = "instatic",
        extra_conf: dict | None = None,
        extra_hba: list[str] | None = None,
    ):
        self.synchronous = synchronous
        self.dbname = dbname
        conf = {**_replication_conf(synchronous=synchronous), **(extra_conf or {})}
        hba = ["host replication postgres 127.0.0.1/32 trust", *(extra_hba or [])]
        self.primary = PostgresCluster(extra_conf=conf, extra_hba=hba)
        self.standby: PostgresCluster | None = None
        self.failovers = 0
        self._frozen_receiver: int | None = None

    # --- the URL nodes use ------------------------------------------------------------------

    @property
    def servers(self) -> list[PostgresCluster]:
        """Both servers in a fixed order (ports do not move in a failover)."""
        return sorted(
            [s for s in (self.primary, self.standby) if s is not None], key=lambda s: s.port
        )

    def url(self, dbname: str | None = None, *, host: str = "127.0.0.1") -> str:
        """The libpq multi-host URL: whichever server accepts writes is the one used."""
        hosts = ",".join(f"{host}:{s.port}" for s in self.servers)
        return (
            f"postgres://postgres@{hosts}/{dbname or self.dbname}"
            "?target_session_attrs=read-write&connect_timeout=2"
        )

    # --- life cycle ------------------------------------------------------------------------

    def start(self) -> "ReplicatedPair":
        self.primary.start()
        import psycopg

        with psycopg.connect(self.primary.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.dbname}"')
        self.standby = self._new_standby(of=self.primary, port=None)
        return self

    def _new_standby(self, *, of: PostgresCluster, port: int | None) -> PostgresCluster:
        """Clone ``of`` with ``pg_basebackup -R`` into a new server that streams from it."""
        standby = PostgresCluster(port=port or free_port(), extra_conf=of.extra_conf)
        standby.extra_hba = of.extra_hba
        standby.open_workdir("instatic-pg-standby-")
        run_as(
            [
                of.bindir / "pg_basebackup",
                "-D",
                standby.datadir,
                "-h",
                "127.0.0.1",
                "-p",
                str(of.port),
                "-U",
                "postgres",
                "-X",
                "stream",
                "-R",
                "--no-sync",
                "-c",
                "fast",
            ],
            standby.user,
            timeout=300,
        )
        with open(standby.datadir / "postgresql.auto.conf", "a") as f:
            f.write(
                f"port = {standby.port}\n"
                f"unix_socket_directories = '{standby.workdir}'\n"
                # A standby never waits for a standby of its own: once promoted it must
                # accept writes at once (a rebuilt old primary re-enables it, below).
                "synchronous_standby_names = ''\n"
                f"primary_conninfo = 'host=127.0.0.1 port={of.port} user=postgres "
                f"application_name={STANDBY_NAME}'\n"
            )
        standby.resume()
        if self.synchronous:
            self._require_synchronous_standby(of)
        self.wait_streaming(of)
        return standby

    def _require_synchronous_standby(self, primary: PostgresCluster) -> None:
        import psycopg

        with psycopg.connect(primary.url(), autocommit=True) as conn:
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
            conn.execute("SELECT pg_reload_conf()")

    def wait_streaming(self, primary: PostgresCluster | None = None, timeout: float = 60) -> None:
        """Poll until the standby streams from ``primary`` (and is synchronous, if asked)."""
        import psycopg

        primary = primary or self.primary
        wanted = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while True:
            with psycopg.connect(primary.url(), autocommit=True) as conn:
                row = conn.execute(
                    "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s "
                    "AND state = 'streaming'",
                    [STANDBY_NAME],
                ).fetchone()
            if row and row[0] == wanted:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standby is not streaming ({wanted}) after {timeout}s")
            time.sleep(0.1)

    def hold_back_standby(self) -> None:
        """Freeze the standby's WAL receiver (SIGSTOP): commits from now on never reach it.

        What the receiver had read stays unwritten; :meth:`fail_over` then discards it (the
        receiver is killed, the standby recovers from its own WAL), so the commits made
        meanwhile are lost for certain: the asynchronous failover window, made deterministic.
        """
        import psycopg

        # A receiver that is not streaming (still connecting after a rebuild) may exit and be
        # replaced by another: freeze one that streams, and look again if it is already gone.
        deadline = time.monotonic() + 60
        while True:
            with psycopg.connect(self.standby.url(), autocommit=True) as conn:
                row = conn.execute(
                    "SELECT pid FROM pg_stat_wal_receiver WHERE status = 'streaming'"
                ).fetchone()
            if row is not None:
                try:
                    freeze(row[0])
                except ProcessLookupError:
                    pass
                else:
                    self._frozen_receiver = row[0]
                    return
            if time.monotonic() > deadline:
                raise TimeoutError("the standby's WAL receiver is not streaming after 60 s")
            time.sleep(0.1)

    def _discard_unreceived(self) -> None:
        pid, self._frozen_receiver = self._frozen_receiver, None
        # SIGKILL ends a stopped process too; the postmaster may reap it before a SIGCONT.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        # The standby's postmaster restarts its processes and recovers from its own WAL.
        deadline = time.monotonic() + 60
        while True:
            try:
                self.standby._pg_ctl("status")
                import psycopg

                with psycopg.connect(self.standby.url(), autocommit=True) as conn:
                    conn.execute("SELECT 1")
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def fail_over(self) -> float:
        """Kill the primary (``-m immediate``) and promote the standby; return the promotion time.

        Afterwards the old primary is gone and there is no standby until :meth:`rebuild`; the
        returned ``time.monotonic()`` is when the new primary accepted writes.
        """
        old, new = self.primary, self.standby
        old.halt(mode="immediate")
        if self._frozen_receiver is not None:
            self._discard_unreceived()
        new._pg_ctl("promote")
        promoted = time.monotonic()
        self.primary, self.standby = new, None
        self._retired = old
        self.failovers += 1
        return promoted

    def rebuild(self) -> None:
        """Make the server killed by :meth:`fail_over` a fresh standby of the new primary."""
        old = self._retired
        port = old.port
        remove_tree(old.workdir)
        old.workdir = None
        self.standby = self._new_standby(of=self.primary, port=port)

    def stop(self) -> None:
        for server in (self.primary, self.standby, getattr(self, "_retired", None)):
            if server is not None:
                server.stop(mode="immediate")

    def __enter__(self) -> "ReplicatedPair":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--async", dest="asynchronous", action="store_true")
    args = parser.parse_args(argv)
    with ReplicatedPair(synchronous=not args.asynchronous) as pair:
        serve_until_stopped(
            f"DATABASE_URL={pair.url()}",
            f"primary={pair.primary.port} standby={pair.standby.port}",
        )


if __name__ == "__main__":
    main(sys.argv[1:])
