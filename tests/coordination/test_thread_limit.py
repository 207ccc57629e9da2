"""A group's job threads are bounded: a thousand jobs due at once must not open a thousand
database connections; the runs beyond the bound wait for a free thread and all of them run."""

import threading

from coordination.threads import JobThreads
from tests.support.polling import wait_until


def test_runs_beyond_the_bound_wait_for_a_thread_and_all_of_them_run():
    threads = JobThreads("limit", max_threads=3)
    release = threading.Event()
    lock = threading.Lock()
    running, most, finished = [0], [0], []

    def job(n):
        def run():
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            release.wait(10)
            with lock:
                running[0] -= 1
                finished.append(n)

        return run

    try:
        done = [threads.submit(job(n)) for n in range(10)]
        wait_until(lambda: running[0] == 3, timeout=10)
        assert (
            threading.active_count()
            and sum(t.name.startswith("limit-") for t in threading.enumerate()) == 3
        )
        release.set()
        for event in done:
            assert event.wait(10)
        assert most[0] == 3
        assert sorted(finished) == list(range(10))
    finally:
        threads.shutdown()


def test_an_idle_thread_is_reused_rather_than_a_new_one_started():
    threads = JobThreads("reuse", max_threads=3)
    try:
        for _ in range(5):
            assert threads.submit(lambda: None).wait(10)
        assert sum(t.name.startswith("reuse-") for t in threading.enumerate()) == 1
    finally:
        threads.shutdown()
