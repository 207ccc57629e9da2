"""A wake-up flag that a thread can set and a loop can wait on, also through ``select()``.

The PostgreSQL leader sleeps in ``select()`` on its lock connection's socket (so a ``NOTIFY``
or the session's death wakes it at once); a worker that finishes must be able to wake that
same ``select()``, hence a pipe beside the event.
"""

import os
import select
import threading


class Waker:
    def __init__(self):
        self._event = threading.Event()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def fileno(self) -> int:
        return self._read

    def set(self) -> None:
        self._event.set()
        try:
            os.write(self._write, b"x")
        except BlockingIOError:
            pass  # the pipe is full, so the reader is awake anyway

    def is_set(self) -> bool:
        return self._event.is_set()

    def clear(self) -> None:
        self._event.clear()
        try:
            while os.read(self._read, 4096):
                pass
        except BlockingIOError:
            pass

    def wait(self, timeout: float | None = None) -> bool:
        return self._event.wait(timeout)

    def wait_with(self, fileno: int, timeout: float) -> bool:
        """Wait until set, or ``fileno`` is readable, or ``timeout``; return if ``fileno`` is."""
        if self._event.is_set():
            return False
        readable, _, _ = select.select([self._read, fileno], [], [], max(0.0, timeout))
        return fileno in readable

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
