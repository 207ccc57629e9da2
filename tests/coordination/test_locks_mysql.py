"""The leader lock on MySQL/MariaDB: ``GET_LOCK`` names as the server sees them."""

import pytest
from django.db import connection

from coordination.locks import make_lock
from coordination.locks.mysql import MAX_NAME_LENGTH

pytestmark = [pytest.mark.mysql, pytest.mark.django_db(transaction=True)]


def scalar(sql: str, params=()):
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0]


def test_the_server_lock_name_is_the_database_and_the_key():
    lock = make_lock(0xDEADBEEF)
    try:
        assert lock.acquire()
        name = f"{connection.settings_dict['NAME']}:lock:00000000deadbeef"
        assert lock.lock_name == name
        assert len(name) <= MAX_NAME_LENGTH
        assert scalar("SELECT IS_USED_LOCK(%s)", [name]) == lock.session_id()
        assert scalar("SELECT IS_FREE_LOCK(%s)", [name]) == 0
    finally:
        lock.close()
    assert scalar("SELECT IS_FREE_LOCK(%s)", [name]) == 1
