"""Wait for conditions with a deadline instead of sleeping a fixed time."""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str = "",
    fail: bool = True,
) -> T:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds
    (``fail=False``: return its last, falsy value instead, for a test that must undo a fault
    before it asserts)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            if not fail:
                return value
            raise AssertionError(message or f"condition not met within {timeout}s: {predicate}")
        time.sleep(interval)
