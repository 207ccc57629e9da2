"""System checks for scheduler misconfiguration (``manage.py check``, ``runscheduler``)."""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections

from coordination.conf import settings
from coordination.keys import format_key, normalize_key

NETWORK_FILESYSTEMS = {"nfs", "nfs4", "cifs", "smbfs", "smb3", "sshfs", "fuse.sshfs", "9p", "afs"}


def register() -> None:
    checks.register(check_job_declarations, "coordination")
    checks.register(check_lock_keys, "coordination")
    checks.register(check_database_vendor, "coordination", checks.Tags.database)
    checks.register(check_timing, "coordination")
    checks.register(check_lock_mode, "coordination")
    checks.register(check_db_pooler, "coordination")
    checks.register(check_lock_mode_behind_pooler, "coordination")
    checks.register(check_task_backend, "coordination")


#: Set while ``runscheduler`` runs its system checks (see :func:`scheduler_checks`).
_in_scheduler = ContextVar("in_scheduler", default=False)


def check_lock_mode_behind_pooler(app_configs=None, **kwargs):
    """Warn a scheduler that takes session locks through a transaction pooler (only inside
    :func:`scheduler_checks`: a web process behind the pooler takes no lock)."""
    if not _in_scheduler.get():
        return []
    if settings.DB_POOLER == "pgbouncer-transaction" and settings.LOCK_MODE == "session":
        return [
            checks.Warning(
                "INSTATIC_DB_POOLER=pgbouncer-transaction but INSTATIC_LOCK_MODE=session: "
                "a scheduler's session advisory lock and LISTEN are unsafe through a "
                "transaction pooler (the lock stays on a server connection others reuse).",
                hint="Set INSTATIC_LOCK_MODE=transaction for schedulers behind the pooler, or "
                "point them straight at PostgreSQL with INSTATIC_DB_POOLER=none (docs/ha.md).",
                id="coordination.W003",
            )
        ]
    return []


@contextmanager
def scheduler_checks() -> Iterator[None]:
    """Include the checks that concern only a process that runs the scheduler in the system
    checks run inside: ``runscheduler`` runs them with the others, ``manage.py check`` in a
    web process does not."""
    token = _in_scheduler.set(True)
    try:
        yield
    finally:
        _in_scheduler.reset(token)


#: Set while an operator command runs its system checks (see :class:`OperatorCommand`).
_declarations_reported = ContextVar("declarations_reported", default=False)


def check_job_declarations(app_configs=None, **kwargs):
    from coordination.registry import registry

    if _declarations_reported.get():
        return []
    # One line each: the message names the file and line and says what to change.
    return [checks.Error(message, id="coordination.E001") for message in registry.errors]


@contextmanager
def declaration_errors_reported() -> Iterator[None]:
    """Leave ``coordination.E001`` out of the system checks run inside (the caller has
    reported the declaration errors itself)."""
    token = _declarations_reported.set(True)
    try:
        yield
    finally:
        _declarations_reported.reset(token)


def declaration_errors_text() -> str:
    """Return the bad job declarations as a headline and one indented line each ('' if none)."""
    from coordination.registry import registry

    errors = registry.errors
    if not errors:
        return ""
    plural = "s" if len(errors) != 1 else ""
    lines = [
        f"{len(errors)} invalid job declaration{plural} (coordination.E001): these jobs are not "
        "scheduled, and runscheduler refuses to start until they are fixed:",
        *(f"  {error}" for error in errors),
    ]
    return "\n".join(lines)


class OperatorCommand:
    """A management command mixin for operators' tools (``jobs``, ``schedulerstatus``).

    A release whose ``jobs.py`` has a bad declaration must not lock operators out of pausing
    jobs while it is out. Such a command runs every system check but ``coordination.E001``
    (the others still stop it), and prints the declaration errors first, on stderr, whether
    or not checks run (``--skip-checks``). ``manage.py check`` and ``runscheduler`` still fail
    on them.
    """

    _declarations_printed = False

    def check(self, *args, **kwargs):
        self.print_declaration_errors()
        with declaration_errors_reported():
            return super().check(*args, **kwargs)

    def print_declaration_errors(self) -> None:
        """Write the declaration errors to stderr, once per command."""
        if self._declarations_printed:
            return
        self._declarations_printed = True
        text = declaration_errors_text()
        if text:
            self.stderr.write(self.style.ERROR(text))


def check_lock_keys(app_configs=None, **kwargs):
    from coordination.registry import registry

    errors = []
    users: dict[int, str] = {}
    for group_name in registry.groups():
        try:
            key = normalize_key(settings.group_key(group_name))
        except (TypeError, ValueError) as exc:
            errors.append(
                checks.Error(
                    f"lock key for group {group_name!r} is invalid: {exc}",
                    hint="INSTATIC_LOCK_KEYS maps group names to 64-bit integers or names.",
                    id="coordination.E002",
                )
            )
            continue
        if key in users:
            errors.append(
                checks.Error(
                    f"groups {users[key]!r} and {group_name!r} use the same lock key "
                    f"{format_key(key)}; one would block the other.",
                    hint="Give each group its own key in INSTATIC_LOCK_KEYS.",
                    id="coordination.E003",
                )
            )
        users[key] = group_name
    return errors


def _filesystem_type(path: Path) -> str | None:
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    best, fstype = "", None
    for line in mounts:
        parts = line.split()
        if len(parts) >= 3 and str(path).startswith(parts[1]) and len(parts[1]) > len(best):
            best, fstype = parts[1], parts[2]
    return fstype


def check_database_vendor(app_configs=None, databases=None, **kwargs):
    from coordination.locks import backend_class
    from coordination.locks.sqlite import database_path

    try:
        backend_class(DEFAULT_DB_ALIAS)
    except ImproperlyConfigured as exc:
        return [checks.Error(str(exc), id="coordination.E004")]
    if connections[DEFAULT_DB_ALIAS].vendor != "sqlite":
        return []
    path = database_path(DEFAULT_DB_ALIAS)
    if path is None:
        return [
            checks.Warning(
                "the SQLite database is in memory: scheduler replicas cannot be coordinated.",
                hint="Use a SQLite file (sqlite:///path) or PostgreSQL for more than one process.",
                id="coordination.W001",
            )
        ]
    fstype = _filesystem_type(path.parent)
    if fstype in NETWORK_FILESYSTEMS:
        return [
            checks.Warning(
                f"the SQLite database {path} is on a network filesystem ({fstype}); file locks "
                "there do not reliably exclude schedulers on other machines.",
                hint="Keep SQLite on a local disk and run schedulers on one machine, or use "
                "PostgreSQL for several machines.",
                id="coordination.W002",
            )
        ]
    return []


def check_lock_mode(app_configs=None, **kwargs):
    mode = settings.LOCK_MODE
    if mode not in ("session", "transaction"):
        return [
            checks.Error(
                f"INSTATIC_LOCK_MODE={mode!r} is not a lock mode.",
                hint="Use 'session' (default) or 'transaction' behind PgBouncer in transaction "
                "pooling mode.",
                id="coordination.E007",
            )
        ]
    if mode == "transaction" and connections[DEFAULT_DB_ALIAS].vendor != "postgresql":
        return [
            checks.Error(
                "INSTATIC_LOCK_MODE=transaction is for PostgreSQL behind PgBouncer only.",
                hint="Unset INSTATIC_LOCK_MODE for SQLite and MySQL.",
                id="coordination.E008",
            )
        ]
    max_tick, lease = float(settings.MAX_TICK), float(settings.LEASE)
    if mode == "transaction" and max_tick >= lease / 3:
        # The leader renews its lease on ticks once a third of it has passed; a longer tick
        # could let a healthy leader's lease run out and a second leader start.
        return [
            checks.Error(
                f"INSTATIC_MAX_TICK ({max_tick:g}s) must be under a third of INSTATIC_LEASE "
                f"({lease:g}s) in lease mode (INSTATIC_LOCK_MODE=transaction).",
                hint="Lower INSTATIC_MAX_TICK or raise INSTATIC_LEASE (defaults: 1s and 10s).",
                id="coordination.E009",
            )
        ]
    return []


def check_db_pooler(app_configs=None, **kwargs):
    """Refuse a transaction pooler named for a database that is not PostgreSQL."""
    vendor = connections[DEFAULT_DB_ALIAS].vendor
    if (
        settings.DB_POOLER == "pgbouncer-transaction"
        and settings.LOCK_MODE != "transaction"  # coordination.E008 says it then
        and vendor != "postgresql"
    ):
        return [
            checks.Error(
                f"INSTATIC_DB_POOLER=pgbouncer-transaction is for PostgreSQL behind PgBouncer, "
                f"but DATABASE_URL points at {vendor}.",
                hint="Unset INSTATIC_DB_POOLER for SQLite and MySQL.",
                id="coordination.E010",
            )
        ]
    return []


def check_timing(app_configs=None, **kwargs):
    errors = []
    heartbeat, lease = float(settings.HEARTBEAT_INTERVAL), float(settings.LEASE)
    if heartbeat <= 0 or lease <= 0 or float(settings.MAX_TICK) <= 0:
        errors.append(
            checks.Error(
                "INSTATIC_HEARTBEAT_INTERVAL, INSTATIC_LEASE and INSTATIC_MAX_TICK must be "
                "positive.",
                id="coordination.E005",
            )
        )
    elif lease < 2 * heartbeat:
        errors.append(
            checks.Error(
                f"INSTATIC_LEASE ({lease}s) must be at least twice INSTATIC_HEARTBEAT_INTERVAL "
                f"({heartbeat}s), or a healthy leader could be taken for dead.",
                hint="The defaults are a 2s heartbeat and a 10s lease.",
                id="coordination.E006",
            )
        )
    return errors


def check_task_backend(app_configs=None, **kwargs):
    """Warn that jobs on workers lose the claim-and-task transaction with a backend that does
    not store its tasks in Instatic's database (docs/architecture.md, "Runs on workers")."""
    from coordination.registry import registry
    from coordination.workers.queueing import uses_database_queue

    return task_backend_warnings(registry.all(), database_queue=uses_database_queue())


def task_backend_warnings(jobs, *, database_queue: bool) -> list:
    """Return ``coordination.W004`` if any of ``jobs`` runs on workers through a task
    backend outside Instatic's database (``database_queue`` False)."""
    on_workers = sorted(job.name for job in jobs if job.on_workers)
    if not on_workers or database_queue:
        return []
    return [
        checks.Warning(
            f"{len(on_workers)} job(s) run on workers ({', '.join(on_workers[:3])}"
            f"{', ...' if len(on_workers) > 3 else ''}) through a task backend that is not "
            "django-tasks-db: their tasks are enqueued after the claim commits, so a leader "
            "that dies in between leaves a queued run without a task, and the sweep cannot "
            "see that queue to enqueue it again.",
            hint="Use django_tasks_db.DatabaseBackend (the default TASKS), or watch "
            "instatic_run_queue_oldest_wait_seconds and run such a job again from the admin.",
            id="coordination.W004",
        )
    ]
