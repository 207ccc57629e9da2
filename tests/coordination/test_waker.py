"""The loop's wake-up flag: a worker can always set it, and a sleeper in ``poll()`` sees it.

A loop that is busy for a long time may not read its wake-up pipe while workers keep finishing:
setting the flag must never block or raise then (the pipe being full means the reader will
wake anyway), and clearing it empties the pipe so the next ``poll()`` sleeps again.
"""

import os
import select

from coordination.waker import Waker


def readable(waker: Waker) -> bool:
    poller = select.poll()
    poller.register(waker.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def test_setting_a_waker_whose_pipe_is_full_neither_blocks_nor_raises():
    waker = Waker()
    try:
        for _ in range(100_000):  # more than a pipe holds (64 KiB on Linux)
            waker.set()
        assert waker.is_set() and readable(waker)
        waker.clear()
        assert not waker.is_set() and not readable(waker), "clear() empties the whole pipe"
    finally:
        waker.close()


def test_a_set_waker_ends_a_wait_with_another_descriptor_at_once():
    waker = Waker()
    read, write = os.pipe()
    try:
        assert waker.wait_with(read, 0.01) is False
        os.write(write, b"x")
        assert waker.wait_with(read, 5) is True, "the other descriptor is readable"
        waker.set()
        assert waker.wait_with(read, 5) is False, "set: no need to look at the descriptor"
        assert waker.wait(0)
    finally:
        for fd in (read, write):
            os.close(fd)
        waker.close()
    waker.close()  # closing twice is harmless
