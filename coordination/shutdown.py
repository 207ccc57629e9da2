"""SIGTERM/SIGINT handling for long-running commands, as a context manager.

The first signal asks for a graceful stop; a second one exits at once. The previous handlers
are restored on exit, so tests and embedding code are left as they were.
"""

import logging
import os
import signal
from collections.abc import Callable
from contextlib import contextmanager

logger = logging.getLogger(__name__)

SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def graceful_signals(on_first: Callable[[], None]):
    received = []

    def handler(signum, frame):
        received.append(signum)
        if len(received) == 1:
            logger.info("received %s: stopping gracefully", signal.Signals(signum).name)
            on_first()
        # Run by tests/coordination/test_second_signal.py, but os._exit ends that process
        # before coverage can save what it measured there.
        else:  # pragma: no cover
            logger.warning("received %s again: exiting at once", signal.Signals(signum).name)
            os._exit(128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield received
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
