"""The three-way merge of a stale form, as a table: base, theirs, mine -> merged, conflict."""

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from publishing.merge import merge, same

BERLIN = ZoneInfo("Europe/Berlin")
T0 = datetime(2031, 6, 1, 9, 0, tzinfo=UTC)
T1 = datetime(2031, 6, 1, 10, 0, tzinfo=UTC)
T2 = datetime(2031, 6, 1, 11, 0, tzinfo=UTC)
# 00:30 UTC and 01:30 UTC on 2026-10-25 are both 02:30 on Berlin's wall clock.
FOLD_CEST = datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN, fold=0)
FOLD_CET = datetime(2026, 10, 25, 2, 30, tzinfo=BERLIN, fold=1)

VALUES = {
    "title": ("Opened", "Theirs", "Mine"),
    "body": ("Opened body", "Their body", "My body"),
    "slug": ("opened", "theirs", "mine"),
    "publish_at": (T0, T1, T2),
    "unpublish_at": (None, T1, T2),
}

# case -> (theirs changed?, mine changed?, expected source of the value, conflict?)
CASES = {
    "neither": (False, False, "base", False),
    "only-theirs": (True, False, "theirs", False),
    "only-mine": (False, True, "mine", False),
    "both-same": (True, "theirs", "theirs", False),
    "both-different": (True, True, "mine", True),
}


def _values(field: str, theirs_changed, mine_changed):
    base, their, my = VALUES[field]
    their_value = their if theirs_changed else base
    mine_values = {False: base, True: my, "theirs": their}
    my_value = mine_values[mine_changed]
    return base, their_value, my_value


@pytest.mark.parametrize("field", list(VALUES))
@pytest.mark.parametrize("case", list(CASES))
def test_one_field(field, case):
    theirs_changed, mine_changed, source, conflict = CASES[case]
    base, their, my = _values(field, theirs_changed, mine_changed)
    result = merge(base={field: base}, theirs={field: their}, mine={field: my}, fields=[field])
    expected = {"base": base, "theirs": their, "mine": my}[source]
    assert same(result.values[field], expected)
    assert result.conflicts == ((field,) if conflict else ())
    assert result.theirs == ((field,) if case == "only-theirs" else ())


def test_fields_merge_independently():
    """A colleague's title and the editor's body both survive; only the time conflicts."""
    base = {"title": "A", "body": "a", "publish_at": T0, "unpublish_at": None}
    theirs = {"title": "A2", "body": "a", "publish_at": T1, "unpublish_at": None}
    mine = {"title": "A", "body": "a2", "publish_at": T2, "unpublish_at": None}
    result = merge(base=base, theirs=theirs, mine=mine, fields=list(base))
    assert result.values == {"title": "A2", "body": "a2", "publish_at": T2, "unpublish_at": None}
    assert result.theirs == ("title",)
    assert result.conflicts == ("publish_at",)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # One instant in two zones is the same time.
        (T1, T1.astimezone(BERLIN), True),
        (T1.astimezone(ZoneInfo("Asia/Tokyo")), T1.astimezone(BERLIN), True),
        # The two readings of a folded wall time are an hour apart.
        (FOLD_CEST, FOLD_CET, False),
        (FOLD_CEST, datetime(2026, 10, 25, 0, 30, tzinfo=UTC), True),
        (FOLD_CET, datetime(2026, 10, 25, 1, 30, tzinfo=UTC), True),
        (T1, T1 + timedelta(microseconds=1), False),
        (None, None, True),
        (None, T1, False),
    ],
)
def test_times_are_compared_as_instants(a, b, expected):
    assert same(a, b) is expected


def test_a_fold_change_alone_is_a_change():
    """Moving 02:30 CEST to 02:30 CET (an hour later) is the colleague's change, not nothing."""
    result = merge(
        base={"publish_at": FOLD_CEST},
        theirs={"publish_at": FOLD_CET},
        mine={"publish_at": FOLD_CEST},
        fields=["publish_at"],
    )
    assert result.values["publish_at"] is FOLD_CET
    assert result.theirs == ("publish_at",)


values = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))


@settings(max_examples=300)
@given(base=values, theirs=values, mine=values)
def test_properties_of_one_field(base, theirs, mine):
    result = merge(base={"f": base}, theirs={"f": theirs}, mine={"f": mine}, fields=["f"])
    merged = result.values["f"]
    if mine == base:
        assert merged == theirs, "an untouched field follows the colleague"
    if theirs == base:
        assert merged == mine, "a field the colleague left alone keeps the editor's value"
    # A conflict is exactly: all three differ.
    assert bool(result.conflicts) == (len({base, theirs, mine}) == 3)
    # Nothing is invented: the merged value is one of the two sides.
    assert merged in (theirs, mine)
