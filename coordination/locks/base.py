"""The lock handle every vendor backend implements, and its fail-closed error handling."""

import copy
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import load_backend

from coordination.keys import format_key, normalize_key

logger = logging.getLogger(__name__)

#: How long shutdown goes on interrupting a lock wait that has not ended (seconds), and how
#: often: an interrupt that reaches the server before the wait's statement does finds nothing
#: to end, and the wait that then starts would otherwise run its whole ``LOCK_WAIT``.
CANCEL_FOR = 5.0
CANCEL_EVERY = 0.05


@dataclass(frozen=True)
class LockHolder:
    """One held lock as the database (or lock file) reports it."""

    key: int
    pid: int | None
    application_name: str | None
    client_addr: str | None
    since: datetime | None
    #: The scheduler node whose lock session this is (``None``: not a scheduler's session).
    node: str | None = None
    #: The holding process's instance id, where the server's records tell it (MySQL).
    instance: str | None = None


class LeaderLock:
    """A lock on one key, held on a dedicated connection until released or closed.

    Subclasses implement ``_acquire``, ``_still_held``, ``_release`` and ``_close_connection``.
    Every database error while acquiring or checking means "not held": the handle never
    reports leadership it cannot prove.
    """

    vendor = ""
    #: Whether ``terminate_holder`` can end a holding session, so that a follower can remove
    #: a holder that stopped heartbeating (False for file locks and leases, which cannot be
    #: taken away: a lease runs out by itself).
    can_end_holders = False

    def __init__(
        self,
        key_or_name: int | str,
        *,
        node_name: str = "",
        using: str = DEFAULT_DB_ALIAS,
        label: str = "",
        raise_errors: bool = False,
    ):
        self.key = normalize_key(key_or_name)
        self.name = key_or_name if isinstance(key_or_name, str) else None
        self.node_name = node_name
        self.using = using
        self.label = label or "leader-lock"
        self.raise_errors = raise_errors
        self.acquired = False
        self._conn = None
        self._mutex = threading.RLock()
        # Set by cancel_wait() (shutdown): no lock wait starts or goes on after it.
        self._cancelled = threading.Event()
        # Clear while a blocking acquire is under way (from before it looks at _cancelled).
        self._not_waiting = threading.Event()
        self._not_waiting.set()

    def __repr__(self) -> str:
        state = "held" if self.acquired else "not held"
        return f"<{type(self).__name__} key={format_key(self.key)} {state}>"

    @property
    def key_text(self) -> str:
        return format_key(self.key)

    # --- public API -----------------------------------------------------------------------
    def acquire(self, wait: float = 0.0) -> bool:
        """Take the lock, waiting up to ``wait`` seconds; return whether it is held."""
        with self._mutex:
            if self.acquired:
                return True
            if wait > 0:
                # Marked before the look at _cancelled: a cancel either sees this wait or
                # is seen by it.
                self._not_waiting.clear()
                if self._cancelled.is_set():
                    self._not_waiting.set()
                    return False
            try:
                self.acquired = bool(self._acquire(max(0.0, wait)))
            except Exception as exc:
                if self._cancelled.is_set():
                    return False  # our own shutdown interrupted the wait

                logger.warning(
                    "[%s] could not take advisory lock key %s: %s; not leader",
                    self.label,
                    self.key_text,
                    _one_line(exc),
                )
                self._discard()
                if self.raise_errors:
                    raise
                return False
            finally:
                self._not_waiting.set()
            return self.acquired

    def still_held(self) -> bool:
        """Cheaply confirm the lock is still ours; on any doubt, report it lost.

        Safe to call from several threads (the scheduler's workers check while the group loop
        does): calls on the one lock connection are serialized.
        """
        if not self.acquired:
            return False
        with self._mutex:
            if not self.acquired:
                return False
            try:
                held = bool(self._still_held())
            except Exception as exc:
                logger.error(
                    "[%s] lost advisory lock key %s: %s",
                    self.label,
                    self.key_text,
                    _one_line(exc),
                )
                self._discard()
                if self.raise_errors:
                    raise
                return False
            if not held:
                logger.error("[%s] lost advisory lock key %s", self.label, self.key_text)
                self.acquired = False
            return held

    def release(self) -> bool:
        """Release the lock; return False (and log it as lost) if it was no longer held."""
        with self._mutex:
            if not self.acquired:
                return False
            self.acquired = False
            try:
                released = bool(self._release())
            except Exception as exc:
                logger.error(
                    "[%s] lost advisory lock key %s before release: %s",
                    self.label,
                    self.key_text,
                    _one_line(exc),
                )
                self._discard()
                if self.raise_errors:
                    raise
                return False
            if not released:
                logger.error(
                    "[%s] lost advisory lock key %s: unlock found it not held",
                    self.label,
                    self.key_text,
                )
            return released

    def close(self) -> None:
        """Release if held and close the dedicated connection."""
        with self._mutex:
            if self.acquired:
                self.release()
            self._discard()

    def keep_alive(self) -> bool:
        """Renew a lease-based lock when due (PgBouncer mode); session locks need nothing."""
        return self.acquired

    def fence_work_transaction(self, connection) -> bool:
        """Return whether the open work transaction on ``connection`` may commit as leader.

        Called as the last check before a transactional run commits. Where the lock is a
        server session (or a file lock), a frozen holder is fenced by ending its sessions, so
        confirming the lock on its own connection is enough here. A lease lock overrides this
        to make the check part of the work transaction itself.
        """
        return self.still_held()

    def session_id(self) -> int | None:
        """Return the id of the session holding the lock (PostgreSQL pid, MySQL thread id)."""
        return None

    def cancel_wait(self) -> None:
        """Interrupt a blocking ``acquire`` from another thread; no later wait starts.

        Only a wait in progress is interrupted: the same connection also serves the workers'
        ``still_held()`` checks, which must not be cancelled (a transactional run inside its
        shutdown grace period would roll back). The interrupt is sent again until the wait has
        ended (up to ``CANCEL_FOR``): one sent before the wait's statement reached the server
        ends nothing.
        """
        self._cancelled.set()
        deadline = time.monotonic() + CANCEL_FOR
        while not self._not_waiting.is_set() and time.monotonic() < deadline:
            try:
                self._interrupt_wait()
            except Exception:
                logger.debug("[%s] interrupting a lock wait failed", self.label)
            self._not_waiting.wait(CANCEL_EVERY)

    @property
    def _waiting(self) -> bool:
        """Whether a blocking acquire is under way."""
        return not self._not_waiting.is_set()

    def _interrupt_wait(self) -> None:
        """End a blocking wait on the lock connection (vendors that block in the server)."""

    def _pause(self, seconds: float) -> bool:
        """Sleep between polls of a lock; return True if the wait was cancelled meanwhile."""
        return self._cancelled.wait(seconds)

    def wait_for_wakeup(self, timeout: float, waker) -> None:
        """Sleep up to ``timeout`` seconds or until ``waker`` is set or a wake-up arrives."""
        waker.wait(timeout)

    @property
    def listening(self) -> bool:
        """Return True when wake-ups reach the leader without it polling.

        Then the loop sleeps until its next due instant, at most ``INSTATIC_NOTIFY_MAX_TICK``.
        PostgreSQL: ``LISTEN`` on the lock connection. MySQL: the node's heartbeat reads the
        groups' wake-up counters and wakes the loop. Elsewhere the loop polls every
        ``INSTATIC_MAX_TICK``.
        """
        return False

    def listen(self, channel: str) -> None:
        """Start receiving wake-ups for the group whose ``channel`` this is (leaders only)."""

    # --- helpers for subclasses -----------------------------------------------------------
    def _discard(self) -> None:
        self.acquired = False
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                self._close_connection(conn)
            except Exception:
                logger.debug("[%s] closing a broken lock connection failed", self.label)

    def _close_connection(self, conn) -> None:
        conn.close()

    def _new_raw_connection(self, extra_options: dict | None = None):
        """Open a fresh, unpooled DB-API connection with the settings of ``self.using``.

        Django's own connections can be closed, recycled or pooled by request handling or by
        job code; a session lock on one of those could be released or leaked behind our back.
        """
        return new_raw_connection(self.using, extra_options, purpose="lock")

    # --- vendor hooks -------------------------------------------------------------------
    def _acquire(self, wait: float) -> bool:
        raise NotImplementedError

    def _still_held(self) -> bool:
        raise NotImplementedError

    def _release(self) -> bool:
        raise NotImplementedError

    @classmethod
    def list_holders(cls, *, using: str, keys=()) -> list[LockHolder]:
        raise NotImplementedError

    @classmethod
    def terminate_holder(cls, key_or_name, *, pid: int | None, using: str) -> int | None:
        raise NotImplementedError


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def new_raw_connection(using: str, extra_options: dict | None = None, *, purpose: str = "raw"):
    """Open a fresh, unpooled DB-API connection with the settings of Django's ``using``
    connection (and ``extra_options``), for a session that Django's request handling, job
    code or a pool must never close, recycle or share."""
    settings_dict = copy.deepcopy(connections[using].settings_dict)
    options = settings_dict.setdefault("OPTIONS", {})
    options.pop("pool", None)
    options.update(extra_options or {})
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(
        settings_dict, alias=f"{using}:{purpose}"
    )
    return wrapper.get_new_connection(wrapper.get_connection_params())
