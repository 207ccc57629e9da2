"""Which vendors a test runs on (tests/conftest.py): every vendor when what it checks can
differ between them, once (on SQLite) when it cannot, markers first."""

from pathlib import Path

import pytest

from tests import conftest
from tests.conftest import vendors_of

EVERY = None


class Item:
    """What ``vendors_of`` reads of a collected test."""

    def __init__(self, nodeid="tests/app/test_x.py::test_x", *, markers=(), fixtures=()):
        self.nodeid = nodeid
        self.fixturenames = list(fixtures)
        self._markers = [getattr(pytest.mark, name) for name in markers]

    def iter_markers(self):
        return iter(self._markers)

    def get_closest_marker(self, name):
        return next((m for m in self._markers if m.name == name), None)


@pytest.mark.parametrize(
    ("item", "vendors"),
    [
        (Item(), {"sqlite"}),  # no database: the same everywhere
        (Item(markers=["django_db"]), EVERY),
        (Item(fixtures=["transactional_db"]), EVERY),
        (Item(fixtures=["schedulers"]), EVERY),  # processes on the test database
        (Item(fixtures=["holders"]), EVERY),
        (Item(fixtures=["locks"]), EVERY),
        (Item(markers=["django_db"], fixtures=["browser"]), {"sqlite"}),
        (Item(markers=["every_vendor"]), EVERY),
        (Item(markers=["postgresql", "django_db"]), {"postgresql"}),
        (Item(markers=["server"]), {"mysql", "postgresql"}),
        (Item(markers=["sqlite"], fixtures=["schedulers"]), {"sqlite"}),
    ],
)
def test_where_a_test_runs(item, vendors):
    assert vendors_of(item)[0] == vendors


def test_a_module_listed_as_the_same_on_every_vendor_runs_once(monkeypatch):
    listed = "tests/app/test_words.py"
    monkeypatch.setitem(conftest.SAME_ON_EVERY_VENDOR, listed, "wording")
    assert vendors_of(Item(f"{listed}::test_x", markers=["django_db"])) == ({"sqlite"}, False)
    assert vendors_of(Item(markers=["django_db"]))[0] is EVERY


def test_only_a_marker_makes_a_skip_elsewhere_the_rest_is_deselected():
    assert vendors_of(Item(markers=["mysql"]))[1] is True
    assert vendors_of(Item())[1] is False


def test_every_module_listed_exists_and_says_why():
    root = Path(conftest.__file__).resolve().parent.parent
    for path, why in conftest.SAME_ON_EVERY_VENDOR.items():
        assert (root / path).is_file(), path
        assert why.strip(), path
