"""MySQL / MariaDB: ``GET_LOCK`` / ``RELEASE_LOCK`` on a dedicated connection.

User-level lock names are global to the server, so the name carries the database name; MySQL
caps them at 64 characters.
"""

from django.db import connections

from coordination.keys import normalize_key
from coordination.locks.base import LeaderLock, LockHolder

MAX_NAME_LENGTH = 64


def lock_name(database: str, key: int) -> str:
    """Return ``<database>:lock:<16 hex digits>``, at most 64 characters."""
    suffix = f":lock:{key & 0xFFFFFFFFFFFFFFFF:016x}"
    return f"{database[: MAX_NAME_LENGTH - len(suffix)]}{suffix}"


class MySQLLeaderLock(LeaderLock):
    vendor = "mysql"

    @property
    def lock_name(self) -> str:
        return lock_name(connections[self.using].settings_dict["NAME"], self.key)

    def _cursor(self):
        if self._conn is None:
            conn = self._new_raw_connection()
            conn.autocommit(True)
            self._conn = conn
        return self._conn.cursor()

    def _scalar(self, sql: str, params=()):
        with self._cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()[0]

    def session_id(self) -> int | None:
        return self._conn.thread_id() if self._conn is not None else None

    def _acquire(self, wait: float) -> bool:
        return self._scalar("SELECT GET_LOCK(%s, %s)", (self.lock_name, wait)) == 1

    def _still_held(self) -> bool:
        return self._scalar("SELECT IS_USED_LOCK(%s) = CONNECTION_ID()", (self.lock_name,)) == 1

    def _release(self) -> bool:
        return self._scalar("SELECT RELEASE_LOCK(%s)", (self.lock_name,)) == 1

    @classmethod
    def list_holders(cls, *, using: str, keys=()) -> list[LockHolder]:
        """Report the holders of ``keys`` (MySQL has no catalogue of user locks by default)."""
        database = connections[using].settings_dict["NAME"]
        holders = []
        with connections[using].cursor() as cursor:
            for key in keys:
                key = normalize_key(key)
                cursor.execute(
                    "SELECT p.ID, p.HOST, NOW(6) - INTERVAL p.TIME SECOND"
                    " FROM information_schema.PROCESSLIST p WHERE p.ID = IS_USED_LOCK(%s)",
                    (lock_name(database, key),),
                )
                row = cursor.fetchone()
                if row:
                    holders.append(
                        LockHolder(
                            key=key,
                            pid=row[0],
                            application_name=None,
                            client_addr=(row[1] or "").rsplit(":", 1)[0] or None,
                            since=None,
                        )
                    )
        return holders

    @classmethod
    def terminate_holder(cls, key_or_name, *, pid: int | None, using: str) -> int | None:
        name = lock_name(connections[using].settings_dict["NAME"], normalize_key(key_or_name))
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT IS_USED_LOCK(%s)", (name,))
            holder = cursor.fetchone()[0]
            if holder is None or (pid is not None and pid != holder):
                return None
            cursor.execute(f"KILL CONNECTION {int(holder)}")
        return holder
