"""A wake-up flag that a thread can set and a loop can wait on, also through ``poll()``.

The PostgreSQL leader sleeps in ``poll()`` on its lock connection's socket (so a ``NOTIFY``
or the session's death wakes it at once); a worker that finishes must be able to wake that
same ``poll()``, hence a pipe beside the event.
"""

import os
import select
import threading


class Waker:
    def __init__(self):
        self._event = threading.Event()
        self._notified = False
        self._notified_mutex = threading.Lock()
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

    def notify(self) -> None:
        """Set, and remember that a ``NOTIFY`` did: work may be due that no tick has seen.

        A finished run sets the waker too; only this mark tells the loop that the wake-up
        needs a full tick (see ``GroupLoop.needs_tick``). ``clear()`` keeps
        it; the tick that reads the states takes it.
        """
        with self._notified_mutex:
            self._notified = True
        self.set()

    @property
    def notified(self) -> bool:
        return self._notified

    def take_notified(self) -> bool:
        """Return whether a ``NOTIFY`` woke the loop since the last call, and forget it."""
        with self._notified_mutex:
            notified, self._notified = self._notified, False
        return notified

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
        """Wait until set, or ``fileno`` is readable, or ``timeout``; return if ``fileno`` is.

        ``poll()``, not ``select()``: a busy process can have descriptors numbered above
        1024, which ``select()`` cannot watch. A descriptor closed under us counts as
        readable, so the caller reads, fails and notices.
        """
        if self._event.is_set():
            return False
        poller = select.poll()
        poller.register(self._read, select.POLLIN)
        poller.register(fileno, select.POLLIN)
        events = poller.poll(max(0.0, timeout) * 1000)
        return any(fd == fileno for fd, _ in events)

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
