"""The coordination app's settings, read lazily from Django settings with ``INSTATIC_`` names.

One object instead of ``getattr(settings, ...)`` scattered around: defaults and meanings live
here, and tests can override any of them with ``override_settings``.
"""

import os
import socket

from django.conf import settings as django_settings

DEFAULT_GROUP_KEYS = {"publishing": 0xDEADBEEF, "plugins": 0xCAFEBABE}

_DEFAULTS = {
    "NODE_NAME": "",
    "HEARTBEAT_INTERVAL": 2.0,
    "LEASE": 10.0,
    "MAX_TICK": 1.0,
    "NOTIFY_MAX_TICK": 30.0,
    "SHUTDOWN_GRACE": 25.0,
    "LOCK_WAIT": 30.0,
    "LOCK_KEYS": {},
    "LOCK_MODE": "session",
    "DB_POOLER": "none",
    "MISFIRE_GRACE": 30.0,
    "FAILURE_PAUSE_THRESHOLD": 5,
    "RUN_RETENTION": 200,
    "DB_RETRY_MAX": 5.0,
    "STARTUP_DB_WAIT": 60.0,
    "ALERT_INTERVAL": 3600.0,
    "ALERT_AFTER_FAILURES": 3,
    "WORKERS": 2,
    # The nice value worker processes lower their CPU priority by (0: as their node).
    "WORKER_NICE": 0,
    "PLUGIN_JOBS_RUN_ON": "leader",
    "WORKER_POLL": 1.0,
    # Runs one worker process executes at once, on threads (1 on SQLite): sized for I/O-bound
    # plugin jobs; CPU-bound jobs scale with processes (INSTATIC_WORKERS) instead.
    "WORKER_THREADS": 8,
    # Seconds a run on a worker may go on past its max_duration before its pool kills the
    # process (it was asked to stop at max_duration; this is for jobs that do not).
    "WORKER_KILL_GRACE": 10.0,
}


class AppSettings:
    """Attribute access to an app's ``INSTATIC_<NAME>`` Django settings, with its defaults:
    each app's ``conf`` module makes one of its own table, read lazily (so tests override any
    of them with ``override_settings``)."""

    def __init__(self, defaults: dict):
        self._defaults = defaults

    def __getattr__(self, name: str):
        defaults = self.__dict__.get("_defaults", {})
        if name not in defaults:
            raise AttributeError(name)
        return getattr(django_settings, f"INSTATIC_{name}", defaults[name])


class CoordinationSettings(AppSettings):
    """The engine's settings, with the defaults above, and the values derived from them."""

    def group_key(self, group: str) -> int | str:
        """Return the configured lock key for ``group`` (explicit or a name to hash)."""
        keys = {**DEFAULT_GROUP_KEYS, **self.LOCK_KEYS}
        return keys.get(group, f"group:{group}")

    def default_node_name(self) -> str:
        """Return ``INSTATIC_NODE_NAME`` or host:pid, unique per process on one host."""
        return self.NODE_NAME or f"{socket.gethostname()}:{os.getpid()}"


settings = CoordinationSettings(_DEFAULTS)
