"""The compare page's inline word diff: changed lines paired and marked word by word,
unchanged stretches summarised, bounded for the largest bodies."""

import time

import pytest
from django.urls import reverse

from coordination.clock import database_now
from publishing import diffs
from publishing.diffs import Row, Segment, revision_diff
from publishing.models import PostRevision
from tests.publishing.conftest import live_post
from tests.publishing.test_diffs import largest_bodies


def rows(old: str, new: str) -> list[Row]:
    return revision_diff(old_title="T", old_body=old, new_title="T", new_body=new)


def shown(row: Row) -> tuple:
    if row.kind == "changed":
        return ("changed", tuple((s.kind, s.text) for s in row.segments))
    if row.kind == "gap":
        return ("gap", row.skipped)
    return (row.kind, row.text)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param("same", "same", [], id="identical"),
        pytest.param(
            "The first version.",
            "The second version, with corrections.",
            [
                ("same", "Title: T"),
                ("same", ""),
                (
                    "changed",
                    (
                        ("same", "The "),
                        ("removed", "first"),
                        ("added", "second"),
                        ("same", " version"),
                        ("added", ", with corrections"),
                        ("same", "."),
                    ),
                ),
            ],
            id="words within a changed line",
        ),
        pytest.param(
            "a\n\nb",
            "a\n\nb\n\nA new paragraph.",
            [
                ("gap", 2),
                *[("same", x) for x in ("a", "", "b")],
                ("added", ""),
                ("added", "A new paragraph."),
            ],
            id="an added paragraph is whole",
        ),
        pytest.param(
            "Completely different words here.",
            "Nothing alike at all!",
            [
                ("same", "Title: T"),
                ("same", ""),
                ("removed", "Completely different words here."),
                ("added", "Nothing alike at all!"),
            ],
            id="a line rewritten throughout is removed, then added",
        ),
    ],
)
def test_inline_diff(old, new, expected):
    assert [shown(row) for row in rows(old, new)] == expected


def test_unchanged_stretches_between_changes_are_counted_not_shown():
    old = "\n".join(f"line {n}" for n in range(30))
    new = old.replace("line 2\n", "line two\n").replace("line 25", "line twenty-five")
    result = rows(old, new)
    assert [row.skipped for row in result if row.kind == "gap"] == [1, 16, 1]
    assert not any("@@" in row.text for row in result)


def test_every_row_reads_as_the_old_text_and_as_the_new():
    old = "Title: T\n\none two three\nfour\nfive six"
    new = "Title: T\n\none 2 three\nfive six seven\neight"
    result = rows(old.split("\n", 2)[2], new.split("\n", 2)[2])

    def side(keep: str) -> list[str]:
        out = []
        for row in result:
            if row.kind == "same" or row.kind == keep:
                out.append(row.text)
            elif row.kind == "changed":
                out.append("".join(s.text for s in row.segments if s.kind in ("same", keep)))
        return out

    assert side("removed") == old.split("\n")
    assert side("added") == new.split("\n")


def test_a_too_large_diff_starts_with_a_note():
    old = "\n".join(f"old {n}" for n in range(300))
    new = "\n".join(f"new {n}" for n in range(300))
    result = rows(old, new)
    assert result[0].kind == "note"
    assert result[0].text.startswith("Too large to compare in full: changed passages")


def test_words_are_marked_within_bounds_for_the_largest_bodies():
    old_body, new_body = largest_bodies(every=2)
    start = time.perf_counter()
    result = rows(old_body, new_body)
    elapsed = time.perf_counter() - start
    assert elapsed < 2.0, elapsed
    assert result[0].kind == "note"
    assert sum(row.kind == "changed" for row in result) > 0
    assert Segment("added", "!") in result[3].segments


def test_one_long_paragraph_changed_everywhere_is_shown_whole_not_word_by_word():
    old = " ".join(f"w{n}" for n in range(20_000))
    new = " ".join(f"w{n}" if n % 2 else f"x{n}" for n in range(20_000))
    start = time.perf_counter()
    result = rows(old, new)
    assert time.perf_counter() - start < 1.0
    assert [row.kind for row in result] == ["note", "same", "same", "removed", "added"]
    assert "words are marked" in result[0].text


@pytest.mark.django_db
def test_the_compare_page_marks_words_and_keeps_paragraphs(as_editor):
    post = live_post(title="T", body="One.\n\nThe first version.")
    for number, body in ((1, "One.\n\nThe first version."), (2, "One.\n\nThe second version.")):
        PostRevision.objects.create(
            post=post,
            number=number,
            title="T",
            body=body,
            status=PostRevision.Status.SCHEDULED if number == 2 else PostRevision.Status.PUBLISHED,
            publish_at=database_now(),
        )
    url = reverse("admin:publishing_post_revision_compare", args=[post.pk])
    html = as_editor.get(url, {"a": 1, "b": 2}).content.decode()
    assert '<div class="changed">The <del>first</del><ins>second</ins> version.</div>' in html
    assert '<div class="same">One.</div>' in html
    assert "@@" not in html
    assert diffs.TOO_LARGE not in html
