"""What Django needs to reach PostgreSQL through a connection pooler (``INSTATIC_DB_POOLER``).

PgBouncer in transaction pooling mode hands each transaction to whichever server connection
is free, so nothing may outlive a transaction in a server session:

- server-side cursors: ``QuerySet.iterator()`` (the admin's choice lists, the static export)
  declares a cursor that, outside a transaction, the next ``FETCH`` may not find on the server
  connection it reaches (``InvalidCursorName``): Django is told to fetch on the client;
- prepared statements: Django binds parameters on the client (psycopg prepares nothing) unless
  ``server_side_binding`` is asked for, which Instatic never does;
- session advisory locks and ``LISTEN``: a scheduler uses the lease instead
  (``INSTATIC_LOCK_MODE=transaction``, which implies this pooler); ``runscheduler`` warns when
  the two settings disagree (``coordination.W003``).

Persistent connections (``CONN_MAX_AGE``) and their health checks stay on: they are client
connections to the pooler, which keeps the server connections.
"""

#: Every value ``INSTATIC_DB_POOLER`` takes (the last is the example in its error message).
POOLERS = ("none", "pgbouncer-transaction")
TRANSACTION_POOLER = "pgbouncer-transaction"


def default_pooler(lock_mode: str) -> str:
    """Return the pooler a process assumes when ``INSTATIC_DB_POOLER`` is unset."""
    return TRANSACTION_POOLER if lock_mode == "transaction" else "none"


def database_behind_pooler(database: dict, pooler: str) -> dict:
    """Return the ``DATABASES`` entry ``database`` with what ``pooler`` requires."""
    if pooler != TRANSACTION_POOLER:
        return database
    return {**database, "DISABLE_SERVER_SIDE_CURSORS": True}
