"""The compare page's line diff: a correct unified diff, bounded for the largest bodies.

Two revisions of the largest body the editor accepts, with every other line changed, took
difflib alone tens of seconds; the diff now costs about what it costs for two bodies that
differ by one line (measured in the same test, as a ratio), and says when it is too large to
show in full.
"""

import time
from datetime import timedelta

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from coordination.clock import database_now
from publishing import diffs
from publishing.conf import settings
from publishing.diffs import Row, revision_diff
from publishing.models import PostRevision
from tests.publishing.conftest import live_post

# Once per `make test`: diffs are the same whatever the vendor.
pytestmark = pytest.mark.sqlite


def patched(old: list[str], rows: list[Row]) -> tuple[list[str], list[str]]:
    """Apply ``rows`` (checked against ``old``); return (old as read, new as made)."""
    read, made, at = [], [], 0
    for row in rows:
        if row.kind == "gap":
            read += old[at : at + row.skipped]
            made += old[at : at + row.skipped]
            at += row.skipped
        elif row.kind == "same":
            assert old[at] == row.text
            read.append(row.text)
            made.append(row.text)
            at += 1
        elif row.kind == "changed":
            was = "".join(s.text for s in row.segments if s.kind != "added")
            assert old[at] == was
            read.append(was)
            made.append("".join(s.text for s in row.segments if s.kind != "removed"))
            at += 1
        elif row.kind == "removed":
            assert old[at] == row.text
            read.append(row.text)
            at += 1
        elif row.kind == "added":
            made.append(row.text)
    return read + old[at:], made + old[at:]


def sides(old_body: str, new_body: str):
    return diffs._lines("T", old_body), diffs._lines("T", new_body)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("same", "same", []),
        (
            "a\nb\nc",
            "a\nB\nc",
            [
                ("same", "Title: T"),
                ("same", ""),
                ("same", "a"),
                ("removed", "b"),
                ("added", "B"),
                ("same", "c"),
            ],
        ),
        ("a", "a\nb", [*[("same", x) for x in ("Title: T", "", "a")], ("added", "b")]),
        ("a\nb", "b", [("same", "Title: T"), ("same", ""), ("removed", "a"), ("same", "b")]),
    ],
)
def test_small_diffs_show_each_line_once(old, new, expected):
    rows = revision_diff(old_title="T", old_body=old, new_title="T", new_body=new)
    assert [(row.kind, row.text) for row in rows] == expected


def test_distant_changes_keep_three_lines_of_context_and_count_the_rest():
    old = "\n".join(f"line {n}" for n in range(30))
    new = old.replace("line 2\n", "line two\n").replace("line 25", "line twenty-five")
    rows = revision_diff(old_title="T", old_body=old, new_title="T", new_body=new)
    assert [row.skipped for row in rows if row.kind == "gap"] == [1, 16, 1]
    assert sum(row.kind == "same" for row in rows) == 12


@hypothesis_settings(max_examples=300)
@given(
    old=st.lists(st.sampled_from(["a", "b", "c", "", "# head", "<b>x</b>"]), max_size=40),
    edits=st.lists(
        st.tuples(st.sampled_from(["insert", "delete", "change"]), st.integers(0, 40)),
        max_size=8,
    ),
)
def test_every_diff_turns_the_old_text_into_the_new(old, edits):
    new = list(old)
    for edit, at in edits:
        if edit == "insert":
            new.insert(at % (len(new) + 1), f"new {at}")
        elif new and edit == "delete":
            del new[at % len(new)]
        elif new:
            new[at % len(new)] = "changed"
    old_lines, new_lines = sides("\n".join(old), "\n".join(new))
    lines = revision_diff(
        old_title="T", old_body="\n".join(old), new_title="T", new_body="\n".join(new)
    )
    assert patched(old_lines, lines) == (old_lines, new_lines)
    assert not lines or any(line.kind in ("added", "removed", "changed") for line in lines)


def largest_bodies(every: int) -> tuple[str, str]:
    """Two bodies of the editor's largest length, short lines, every ``every``-th one changed."""
    limit = int(settings.POST_BODY_MAX_CHARS)
    old = [f"line {n:05d}" for n in range(limit // 12)]
    new = [line + "!" if n % every == 0 else line for n, line in enumerate(old)]
    old_body, new_body = "\n".join(old), "\n".join(new)
    assert max(len(old_body), len(new_body)) <= limit
    return old_body, new_body


def timed(old: str, new: str) -> tuple[float, list[Row]]:
    start = time.perf_counter()
    lines = revision_diff(old_title="T", old_body=old, new_title="T", new_body=new)
    return time.perf_counter() - start, lines


def test_the_largest_bodies_compare_in_about_the_time_of_a_one_line_change():
    one_change = largest_bodies(every=10**9)
    many_changes = largest_bodies(every=2)
    baseline = min(timed(*one_change)[0] for _ in range(3))
    elapsed, lines = min((timed(*many_changes) for _ in range(3)), key=lambda run: run[0])
    assert elapsed < 30 * max(baseline, 0.005), (elapsed, baseline)
    assert len(lines) == diffs.MAX_SHOWN_LINES + 2
    assert lines[0] == Row(
        "note", "Too large to compare in full: only the first 2,000 lines of the diff are shown."
    )
    assert lines[-1] == Row("note", "… too large to compare in full: the rest is not shown.")
    read, _ = patched(sides(*many_changes)[0], [line for line in lines if line.kind != "note"])
    assert read == sides(*many_changes)[0], "what is shown is a correct start of the diff"


def test_a_long_changed_passage_is_shown_as_removed_then_added():
    old = "\n".join(f"old {n}" for n in range(300))
    new = "\n".join(f"new {n}" for n in range(300))
    lines = revision_diff(old_title="T", old_body=old, new_title="T", new_body=new)
    assert lines[0].text == (
        "Too large to compare in full: changed passages of more than 200 lines are shown as "
        "removed, then added."
    )
    kinds = [line.kind for line in lines[1:] if line.kind in ("added", "removed", "changed")]
    assert kinds == ["removed"] * 300 + ["added"] * 300


@pytest.mark.django_db
def test_the_compare_page_of_the_largest_bodies_says_it_is_too_large(as_editor):
    old, new = largest_bodies(every=2)
    post = live_post(body=old)
    for number, body in ((1, old), (2, new)):
        PostRevision.objects.create(
            post=post,
            number=number,
            title="T",
            body=body,
            status=PostRevision.Status.SCHEDULED if number == 2 else PostRevision.Status.PUBLISHED,
            publish_at=database_now() + timedelta(hours=1),
        )
    url = reverse("admin:publishing_post_revision_compare", args=[post.pk])
    page = as_editor.get(url, {"a": 1, "b": 2})
    assert page.status_code == 200
    text = page.content.decode()
    assert "Too large to compare in full" in text
    assert text.count('<div class="added">') <= diffs.MAX_SHOWN_LINES


def test_bodies_longer_than_any_the_editor_accepts_are_compared_in_part():
    old = "x\n" * (diffs.MAX_COMPARED_CHARS // 2 + 10)
    lines = revision_diff(old_title="T", old_body=old, new_title="T", new_body=old + "tail")
    assert lines == [
        Row(
            "note",
            "Too large to compare in full: only the first 250,000 characters of each body are "
            "compared.",
        )
    ], "the change past the compared part is not claimed to be none"


# --- a conflict's two versions, side by side ------------------------------------------------


def side_text(rows) -> list[str]:
    """Return each row of one side as text, its marked words in [brackets]."""
    out = []
    for row in rows:
        if row.kind == "changed":
            out.append("".join(s.text if s.kind == "same" else f"[{s.text}]" for s in row.segments))
        elif row.kind in ("removed", "added"):
            out.append(f"[{row.text}]")
        elif row.kind == "gap":
            out.append(f"({row.skipped} same)")
        else:
            out.append(row.text)
    return out


def test_two_sides_mark_on_each_side_the_words_the_other_lacks():
    theirs = "We open at 8.\n\nThe café is on the ground floor.\n\nDogs are welcome."
    mine = "We open at 10.\n\nThe café is on the first floor.\n\nDogs are welcome.\nCats too."
    left, right = diffs.two_sides(diffs.text_diff(theirs, mine))
    assert side_text(left) == [
        "We open at [8].",
        "",
        "The café is on the [ground] floor.",
        "",
        "Dogs are welcome.",
    ]
    assert side_text(right) == [
        "We open at [10].",
        "",
        "The café is on the [first] floor.",
        "",
        "Dogs are welcome.",
        "[Cats too.]",
    ]


def test_two_sides_of_long_texts_fold_the_lines_both_share():
    shared = [f"Line {n} of the programme." for n in range(40)]
    theirs = "\n".join(["Opening at 8.", *shared])
    mine = "\n".join(["Opening at 9.", *shared])
    left, right = diffs.two_sides(diffs.text_diff(theirs, mine))
    assert side_text(left)[0] == "Opening at [8]."
    assert side_text(left)[-1] == side_text(right)[-1] == f"({40 - diffs.CONTEXT_LINES} same)"
    assert diffs.text_diff("Same", "Same") == []
