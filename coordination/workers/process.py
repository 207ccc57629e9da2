"""One worker process: take queued runs' tasks and execute them until told to stop."""

import threading


def serve(*, node_name: str, index: int, stop: threading.Event) -> None:
    """Run worker process ``index`` of node ``node_name`` until ``stop`` is set."""
    stop.wait()
