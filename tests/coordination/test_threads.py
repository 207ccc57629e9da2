"""Job threads keep their database connection between runs, and drop it once the server has."""

import threading

import pytest
from django.db import connection

from coordination.threads import JobThreads
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def session_id():
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            return cursor.fetchone()[0]
    connection.ensure_connection()
    return id(connection.connection)


def run(threads: JobThreads, func):
    results = []
    done = threads.submit(lambda: results.append(func()))
    assert done.wait(10)
    return results


def test_consecutive_runs_reuse_one_connection():
    threads = JobThreads("test")
    try:
        first = run(threads, session_id)
        second = run(threads, session_id)
        assert first and first == second
    finally:
        threads.shutdown()


@pytest.mark.postgresql
def test_a_connection_the_server_ended_is_replaced_before_the_next_run():
    threads = JobThreads("test")
    try:
        (first,) = run(threads, session_id)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [first])
        second = run(threads, session_id)
        assert second, "the run after a server-side disconnect must not fail"
        assert second[0] != first
    finally:
        threads.shutdown()


def test_a_run_submitted_after_shutdown_runs_then_its_thread_closes_its_connection_and_ends():
    threads = JobThreads("late")
    run(threads, session_id)
    threads.shutdown()
    seen = []

    def late_finish():
        session_id()
        seen.append(threading.current_thread())

    assert threads.submit(late_finish).wait(10)
    (thread,) = seen
    thread.join(10)
    assert not thread.is_alive(), "a thread started after shutdown must end after its run"
    wait_until(
        lambda: not any(t.name.startswith("late-") and t.is_alive() for t in threading.enumerate())
    )


def test_threads_started_all_at_once_open_their_connections_before_the_first_run():
    """A worker process starts its threads with their connections before work comes: the
    runs of a burst then find every thread connected, and no thread is started for them."""
    threads = JobThreads("warm", max_threads=3)
    opened = []
    lock = threading.Lock()

    def connect():
        connection.ensure_connection()
        with lock:
            opened.append((threading.current_thread().name, session_id()))

    try:
        threads.start_all(connect)
        wait_until(lambda: len(opened) == 3, timeout=10)
        assert len({name for name, _ in opened}) == 3
        ran = [threads.submit(lambda: None) for _ in range(9)]
        assert all(done.wait(10) for done in ran)
        names = {thread.name for thread in threading.enumerate() if thread.name.startswith("warm")}
        assert names == {name for name, _ in opened}, "the runs found the started threads"
        sessions = run(threads, session_id)
        assert sessions[0] in {session for _, session in opened}, "a run uses its thread's session"
    finally:
        threads.shutdown()


def test_a_batch_begins_every_run_before_anything_its_runs_submit():
    # One thread: each run of the batch submits its follow-up (a run's outcome write) as it
    # ends; the follow-ups wait behind the whole batch, not each behind its own run.
    threads = JobThreads("test", max_threads=1)
    order = []

    def step(n):
        def run():
            order.append(f"run {n}")
            threads.submit(lambda: order.append(f"outcome {n}"))

        return run

    try:
        threads.submit_batch([step(n) for n in range(3)])
        wait_until(lambda: len(order) == 6)
        assert order == ["run 0", "run 1", "run 2", "outcome 0", "outcome 1", "outcome 2"]
    finally:
        threads.shutdown()
