"""A gate that stops a transactional run between its fence and its ``COMMIT``.

A trigger makes the write of one job's run with a given status take a shared advisory lock:
a run's "succeeded" update (the statement right after the fence before a run commits), or a
failed run's insert (``status="failed"``: right after the fence of the transaction that
records a failure). While the caller holds that lock exclusively the write waits, so the
caller sees the run's session waiting (``WAITING_SQL``), can stop the process, and then
release the lock: the write finishes on the server and the session sits idle in the open
transaction, after its fence and before its commit. When the caller does not hold the lock
the gate costs nothing. For the lease fence test and ``bench/lease_takeover.py`` (PostgreSQL).
"""

#: The ungranted advisory lock of a session waiting at the gate ``%s`` (a key under 2**32), on
#: this database (advisory locks are the database's own).
WAITING_SQL = (
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = 0 AND objid = %s AND objsubid = 1"
)

#: :data:`WAITING_SQL` for the sessions of one node only: named ``<node>/...`` (``%s``: the
#: ``LIKE`` pattern), as a scheduler names its sessions when it connects directly.
WAITING_OF_SQL = (
    "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND NOT l.granted"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND l.classid = 0 AND l.objid = %s AND l.objsubid = 1 AND a.application_name LIKE %s"
)

#: The state of session ``%s`` (none once it has ended).
STATE_SQL = "SELECT state FROM pg_stat_activity WHERE pid = %s"


def write_finished_uncommitted(state: str | None) -> bool:
    """Whether a frozen session whose gated write was let through has finished it, uncommitted.

    Its session then sits idle in the open transaction, until a bound of the transaction's own
    (the lease fence's ``idle_in_transaction_session_timeout``, what the lease had left) ends
    it: a caller that looks only later, as on a busy machine, finds the session gone (``state``
    is None). Either way the frozen client never sent ``COMMIT``."""
    return state is None or state.startswith("idle in transaction")


def install_sql(
    *, job: str, key: int, status: str = "succeeded", name: str = "instatic_commit_gate"
) -> list[str]:
    """Return the statements that install gate ``name`` (lock ``key``) on the writes of
    ``job``'s runs with ``status``."""
    if not 0 < key < 2**32 or not job.replace(".", "").replace("_", "").isalnum():
        raise ValueError(f"gate key {key} must be under 2**32, job {job!r} a job name")
    if not status.replace("_", "").isalpha():
        raise ValueError(f"gate status {status!r} must be a run status such as 'failed'")
    return [
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS"
        f" $$ BEGIN PERFORM pg_advisory_xact_lock_shared({key}); RETURN NEW; END $$",
        f"CREATE TRIGGER {name} BEFORE INSERT OR UPDATE ON coordination_jobrun"
        f" FOR EACH ROW WHEN (NEW.job = '{job}' AND NEW.status = '{status}')"
        f" EXECUTE FUNCTION {name}()",
    ]


def drop_sql(name: str = "instatic_commit_gate") -> list[str]:
    """Return the statements that remove gate ``name``."""
    return [
        f"DROP TRIGGER IF EXISTS {name} ON coordination_jobrun",
        f"DROP FUNCTION IF EXISTS {name}()",
    ]
