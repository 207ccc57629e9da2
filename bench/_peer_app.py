"""The procrastinate app ``bench/peers.py`` measures: one task that does nothing.

Its database is ``BENCH_PEER_DSN`` (the bench's throwaway PostgreSQL); its workers are
``python -m procrastinate --app=bench._peer_app.app worker``.
"""

import os

import procrastinate

app = procrastinate.App(
    connector=procrastinate.PsycopgConnector(conninfo=os.environ.get("BENCH_PEER_DSN", ""))
)


@app.task(name="noop")
def noop() -> None:
    """A trivial run, like the burst's jobs on Instatic."""
