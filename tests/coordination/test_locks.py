"""The leader lock on every vendor: keys, vendor dispatch, and real processes contending.

The multi-process tests run on whichever database the suite runs on (SQLite, MariaDB,
PostgreSQL); vendor-specific behaviour lives in ``test_locks_<vendor>.py`` and the tests that
need a database session to end in ``test_locks_server.py``. The holders are real processes
(``tests/coordination/lockholder.py``) talking to the test database.
"""

import hashlib
import os
import subprocess
import sys
import threading
import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections

from coordination.conf import settings as coordination_settings
from coordination.keys import derive_key, format_key, join_key, normalize_key, split_key
from coordination.locks import (
    backend_class,
    leader_lock,
    list_holders,
    make_lock,
    terminate_holder,
)
from coordination.locks.mysql import MAX_NAME_LENGTH, lock_name
from tests.coordination.lockholder import BASE_DIR, is_waiting
from tests.support.polling import wait_until

# Computed once with coordination.keys.derive_key and written down: these must never change,
# or replicas of different versions would stop excluding each other.
FIXED_KEYS = {
    "publishing": -7498550706144600815,
    "plugins": 118956394850451780,
    "group:publishing": 824797698856918563,
    "group:plugins": -3561168775689755669,
    "job:publishing.publish_due": 8793728134891233782,
    "x": 3216798331499216796,
    "ünïcode": 6052049707300481311,
}
ROUND_TRIP_KEYS = [
    0,
    1,
    -1,
    -5,
    0xDEADBEEF,
    0xCAFEBABE,
    2**31,
    2**32,
    2**63 - 1,
    -(2**63),
    *FIXED_KEYS.values(),
]


# --- keys -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "expected"), FIXED_KEYS.items())
def test_derived_keys_are_fixed(name, expected):
    assert derive_key(name) == expected
    assert normalize_key(name) == expected


@pytest.mark.parametrize("name", FIXED_KEYS)
def test_derived_key_is_the_first_8_bytes_of_sha256_signed(name):
    digest = hashlib.sha256(("instatic:" + name).encode("utf-8")).digest()
    assert derive_key(name) == int.from_bytes(digest[:8], "big", signed=True)


def test_derived_keys_do_not_depend_on_the_process_hash_seed():
    script = "from coordination.keys import derive_key as d; print(d('x'), d('ünïcode'))"
    seen = set()
    for seed in ("1", "2", "random"):
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=BASE_DIR,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONIOENCODING": "utf-8"},
            capture_output=True,
            text=True,
            check=True,
        )
        seen.add(result.stdout.strip())
    assert seen == {f"{FIXED_KEYS['x']} {FIXED_KEYS['ünïcode']}"}


def test_explicit_group_keys_stay_as_they_are():
    assert normalize_key(0xDEADBEEF) == 0xDEADBEEF == 3735928559
    assert normalize_key(0xCAFEBABE) == 0xCAFEBABE == 3405691582
    assert normalize_key(coordination_settings.group_key("publishing")) == 0xDEADBEEF
    assert normalize_key(coordination_settings.group_key("plugins")) == 0xCAFEBABE


@pytest.mark.parametrize(
    ("explicit", "signed"),
    [
        (2**63 - 1, 2**63 - 1),
        (2**63, -(2**63)),
        (2**64 - 1, -1),
        (0xFFFFFFFFFFFFFFFE, -2),
        (0x8000000000000001, -(2**63) + 1),
        (-(2**63), -(2**63)),
        (-5, -5),
        (0, 0),
    ],
)
def test_explicit_keys_fold_to_signed_64_bits(explicit, signed):
    assert normalize_key(explicit) == signed


@pytest.mark.parametrize("bad", [2**64, 2**70, -(2**63) - 1, ""])
def test_out_of_range_keys_are_rejected(bad):
    with pytest.raises(ValueError):
        normalize_key(bad)


@pytest.mark.parametrize("bad", [True, False, 1.0, None, b"x", ["x"]])
def test_non_int_non_str_keys_are_rejected(bad):
    with pytest.raises(TypeError):
        normalize_key(bad)


@pytest.mark.parametrize("key", ROUND_TRIP_KEYS)
def test_split_and_join_round_trip(key):
    key = normalize_key(key)
    classid, objid = split_key(key)
    assert 0 <= classid < 2**32 and 0 <= objid < 2**32
    assert join_key(classid, objid) == key


def test_split_key_matches_pg_locks_layout():
    assert split_key(0xDEADBEEF) == (0, 0xDEADBEEF)
    assert split_key(-1) == (0xFFFFFFFF, 0xFFFFFFFF)
    assert split_key(-(2**63)) == (0x80000000, 0)
    assert join_key(0xFFFFFFFF, 0xFFFFFFFE) == -2


def test_key_text_in_log_lines_shows_signed_and_hex():
    assert format_key(-1) == "-1 (0xffffffffffffffff)"
    assert format_key(0xDEADBEEF) == "3735928559 (0xdeadbeef)"


# --- MySQL lock names (pure; the server test is in test_locks_mysql.py) ------------------------
def test_mysql_lock_name_is_the_database_then_the_key():
    assert lock_name("instatic", 0xDEADBEEF) == "instatic:lock:00000000deadbeef"
    assert lock_name("instatic", -1) == "instatic:lock:ffffffffffffffff"


@pytest.mark.parametrize("database", ["d", "test_instatic", "d" * 42, "d" * 43, "x" * 64])
@pytest.mark.parametrize("key", [0, -1, 0xDEADBEEF, FIXED_KEYS["group:plugins"]])
def test_mysql_lock_names_fit_in_64_characters(database, key):
    name = lock_name(database, key)
    assert len(name) <= MAX_NAME_LENGTH
    assert name.endswith(f":lock:{key & 0xFFFFFFFFFFFFFFFF:016x}")
    assert name.startswith(database[:32])


def test_mysql_lock_names_of_long_databases_stay_distinct():
    first, second = "a" * 63 + "1", "a" * 63 + "2"
    assert lock_name(first, 7) != lock_name(second, 7)
    assert lock_name(first, 7) != lock_name(first, 8)
    assert len(lock_name(first, 7)) == MAX_NAME_LENGTH


# --- vendor dispatch ------------------------------------------------------------------------
@pytest.mark.every_vendor  # reads the vendor, not the database
def test_the_backend_matches_the_database_vendor():
    assert backend_class().vendor == connection.vendor


def test_unknown_vendor_is_improperly_configured(monkeypatch):
    monkeypatch.setattr(connections["default"], "vendor", "oracle")
    calls = [
        lambda: make_lock("x"),
        lambda: leader_lock("x").__enter__(),
        lambda: list_holders(),
        lambda: terminate_holder("x"),
    ]
    for call in calls:
        with pytest.raises(ImproperlyConfigured) as info:
            call()
        assert "'oracle'" in str(info.value)
        assert "Supported vendors: mysql, postgresql, sqlite" in str(info.value)


# --- real processes contending, on every vendor ---------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_two_processes_contend_for_one_key_and_exactly_one_wins(holders, key):
    first, second = holders.start(key, key)
    for _ in range(3):
        first.send("acquire 0")  # both ask before either answer is read
        second.send("acquire 0")
        answers = {first: first.read(), second: second.read()}
        winners = [h for h, answer in answers.items() if answer.startswith("ACQUIRED")]
        losers = [h for h, answer in answers.items() if answer == "NOT ACQUIRED"]
        assert len(winners) == 1 and len(losers) == 1, answers
        assert winners[0].held() and not losers[0].held()
        with leader_lock(key) as third:
            assert not third.acquired
        assert winners[0].release()


@pytest.mark.django_db(transaction=True)
def test_different_keys_do_not_exclude_each_other(holders, key):
    first, second = holders.start(f"{key}:a", f"{key}:b", acquire=True)
    assert first.wait_ready().startswith("ACQUIRED")
    assert second.wait_ready().startswith("ACQUIRED")
    assert first.held() and second.held()


@pytest.mark.django_db(transaction=True)
def test_release_lets_the_other_process_win(holders, key):
    first, second = holders.start(key, key)
    assert first.acquire() is not None
    assert second.acquire() is None
    assert first.release()
    assert not first.held()
    assert second.acquire() is not None
    assert first.acquire() is None
    assert not first.release()  # it does not hold it: nothing to release


@pytest.mark.django_db(transaction=True)
def test_sigkill_of_the_holder_frees_the_lock_within_a_second(holders, key):
    (holder,) = holders.start(key, acquire=True)
    assert holder.wait_ready().startswith("ACQUIRED")
    lock = make_lock(key, node_name="survivor")
    try:
        assert not lock.acquire()
        killed_at = time.monotonic()
        holder.kill()
        wait_until(lock.acquire, timeout=1.0, interval=0.01, message="lock not freed in 1s")
        assert time.monotonic() - killed_at < 1.0
        assert lock.still_held()
    finally:
        lock.close()


@pytest.mark.django_db(transaction=True)
def test_acquire_with_wait_gives_up_after_the_wait(holders, key):
    holders.start(key, acquire=True)
    lock = make_lock(key)
    try:
        started = time.monotonic()
        assert lock.acquire(wait=0.3) is False
        assert 0.25 <= time.monotonic() - started < 5
        assert not lock.still_held()
    finally:
        lock.close()


@pytest.mark.django_db(transaction=True)
def test_acquire_with_wait_takes_the_lock_when_the_holder_releases(holders, key):
    (holder,) = holders.start(key, acquire=True)
    lock = make_lock(key)
    assert not lock.acquire()  # opens the lock's connection, so its session is known
    result = {}

    def wait_for_it():
        started = time.monotonic()
        result["acquired"] = lock.acquire(wait=20)
        result["waited"] = time.monotonic() - started

    waiter = threading.Thread(target=wait_for_it)
    waiter.start()
    try:
        wait_until(lambda: is_waiting(lock), timeout=10, message="acquire(wait) is not waiting")
        assert holder.release()
        waiter.join(15)
        assert result.get("acquired") is True, result
        assert result["waited"] < 15
        assert lock.still_held()
    finally:
        waiter.join(30)
        lock.close()


@pytest.mark.django_db(transaction=True)
def test_leader_lock_releases_on_exit(key):
    with leader_lock(key, node_name="cm") as first:
        assert first.acquired
        assert first.still_held()
        with leader_lock(key) as second:
            assert not second.acquired
            assert not second.still_held()
    assert not first.acquired
    with leader_lock(key) as third:
        assert third.acquired
