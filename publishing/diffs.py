"""What changed between two revisions' titles and bodies, for the admin's compare page, and
between two versions of one field, for the conflict page (:func:`text_diff`, :func:`two_sides`).

Plain text in, plain text out: the template escapes every piece (a body's raw HTML is shown
as text, never run). The diff reads like the text itself: unchanged lines as they are (three
around each change; longer stretches are counted in a ``gap`` row), and a changed line paired
with the line that replaced it, marked word by word (``changed`` rows of ``same``, ``removed``
and ``added`` segments). A line with no counterpart, or rewritten so thoroughly that marking
its words would mark nearly all of them, is a whole ``removed`` or ``added`` row.

The work is bounded for the largest bodies the editor accepts (``INSTATIC_POST_BODY_MAX_CHARS``).
Lines are aligned first: :mod:`difflib` alone takes time quadratic in the lines that differ
(45 s for two 200,000-character bodies of 30,000 short lines), so the lines both sides share
at the start and the end are set aside first; what is left is anchored on lines that occur
once on each side, in the longest run of them in the same order (as in patience diff,
O(n log n)); only the gaps between anchors are aligned by :mod:`difflib`, and a gap of more
than :data:`MAX_ALIGNED_LINES` is shown as removed, then added. Words are marked within the
changed line pairs while a :class:`WordBudget` lasts. At most :data:`MAX_SHOWN_LINES` rows are
returned, and bodies are compared up to :data:`MAX_COMPARED_CHARS` characters; when any bound
applies the diff starts with a ``note`` row saying "too large to compare in full" and why.
"""

import bisect
import difflib
import re
from collections import Counter
from dataclasses import dataclass

CONTEXT_LINES = 3
#: Lines (both sides together) of one gap between anchors that difflib aligns; a gap of n
#: lines costs it up to n² steps, so the whole diff costs at most this many per line.
MAX_ALIGNED_LINES = 200
#: Rows of a diff returned at most: the page renders each one.
MAX_SHOWN_LINES = 2000
#: Characters of each body compared at most (above the editor's limit for a post's body).
MAX_COMPARED_CHARS = 250_000
#: Cost (tokens of the old line's changed middle times the new one's) of marking one line
#: pair word by word, at most: two paragraphs of 300 changed words each.
MAX_WORD_PAIR_COST = 90_000
#: Cost of marking words in the whole diff, at most.
MAX_WORD_COST = 400_000

TOO_LARGE = "Too large to compare in full"

#: A word or a punctuation mark with the spaces after it (or spaces alone, at the start).
_TOKEN = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")


@dataclass(frozen=True)
class Segment:
    """A run of a changed line: ``same`` on both sides, ``removed`` or ``added``."""

    kind: str
    text: str


@dataclass(frozen=True)
class Row:
    """One row of a diff.

    ``kind`` is ``same``, ``removed`` or ``added`` (a whole line, in ``text``), ``changed``
    (a line pair, in ``segments``), ``gap`` (``skipped`` unchanged lines not shown) or
    ``note`` (what a bound left out, in ``text``).
    """

    kind: str
    text: str = ""
    segments: tuple[Segment, ...] = ()
    skipped: int = 0


def _lines(title: str, body: str) -> list[str]:
    return [f"Title: {title}", "", *body.replace("\r\n", "\n").split("\n")]


def _anchors(old: list[str], new: list[str]) -> list[tuple[int, int]]:
    """Return pairs (i, j) of lines unique on both sides, the longest run in the same order."""
    old_counts, new_counts = Counter(old), Counter(new)
    new_index = {line: j for j, line in enumerate(new) if new_counts[line] == 1}
    pairs = [
        (i, new_index[line])
        for i, line in enumerate(old)
        if old_counts[line] == 1 and line in new_index
    ]
    # The longest run of them in the same order on both sides: the longest increasing
    # subsequence of the j's (patience sorting), with a link back from each pair.
    ends: list[int] = []  # ends[k]: the pair ending the best run of k + 1 pairs so far
    end_js: list[int] = []  # the j of each of those pairs, for the binary search
    back: list[int] = []
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(end_js, j)
        back.append(ends[k - 1] if k else -1)
        if k == len(ends):
            ends.append(n)
            end_js.append(j)
        else:
            ends[k], end_js[k] = n, j
    run: list[tuple[int, int]] = []
    n = ends[-1] if ends else -1
    while n >= 0:
        run.append(pairs[n])
        n = back[n]
    return run[::-1]


def _gap_opcodes(old, new, i0, i1, j0, j1) -> tuple[list[tuple], bool]:
    """Return the opcodes of one gap between anchors, and whether it was too large to align."""
    if i0 == i1 and j0 == j1:
        return [], False
    if i0 == i1:
        return [("insert", i0, i1, j0, j1)], False
    if j0 == j1:
        return [("delete", i0, i1, j0, j1)], False
    if i1 - i0 == 1 and j1 - j0 == 1:  # the commonest gap: one line changed
        return [("equal" if old[i0] == new[j0] else "replace", i0, i1, j0, j1)], False
    if (i1 - i0) + (j1 - j0) > MAX_ALIGNED_LINES:
        return [("unaligned", i0, i1, j0, j1)], True
    matcher = difflib.SequenceMatcher(None, old[i0:i1], new[j0:j1], autojunk=False)
    return [
        (tag, i0 + a0, i0 + a1, j0 + b0, j0 + b1) for tag, a0, a1, b0, b1 in matcher.get_opcodes()
    ], False


def _opcodes(old: list[str], new: list[str]) -> tuple[list[tuple], bool]:
    """Return difflib-style opcodes turning ``old`` into ``new``, and whether any gap was
    too large to align line by line."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    codes: list[tuple] = [("equal", 0, start, 0, start)] if start else []
    too_large = False
    i, j = start, start
    middle_anchors = [
        (start + a, start + b) for a, b in _anchors(old[start:end_old], new[start:end_new])
    ]
    for anchor_i, anchor_j in [*middle_anchors, (end_old, end_new)]:
        gap, large = _gap_opcodes(old, new, i, anchor_i, j, anchor_j)
        codes += gap
        too_large |= large
        if anchor_i < end_old:
            codes.append(("equal", anchor_i, anchor_i + 1, anchor_j, anchor_j + 1))
        i, j = anchor_i + 1, anchor_j + 1
    if end_old < len(old):
        codes.append(("equal", end_old, len(old), end_new, len(new)))
    return _merge_equal(codes), too_large


def _merge_equal(codes: list[tuple]) -> list[tuple]:
    merged: list[tuple] = []
    for code in codes:
        if merged and code[0] == "equal" and merged[-1][0] == "equal":
            _, i0, _, j0, _ = merged[-1]
            merged[-1] = ("equal", i0, code[2], j0, code[4])
        else:
            merged.append(code)
    return merged


def _groups(codes: list[tuple], context: int) -> list[list[tuple]]:
    """Group opcodes into hunks with ``context`` lines around changes (as difflib does)."""
    if not codes or codes == [codes[0]] and codes[0][0] == "equal":
        return []
    codes = list(codes)
    if codes[0][0] == "equal":
        tag, i1, i2, j1, j2 = codes[0]
        codes[0] = (tag, max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    if codes[-1][0] == "equal":
        tag, i1, i2, j1, j2 = codes[-1]
        codes[-1] = (tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    groups: list[list[tuple]] = []
    group: list[tuple] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append((tag, i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return groups


@dataclass
class WordBudget:
    """What word-by-word marking may still cost in one diff, and whether a pair was refused.

    difflib over a pair's tokens costs up to their counts multiplied (after the common start
    and end are set aside), so that product is the cost: at most :data:`MAX_WORD_PAIR_COST`
    for one pair and :data:`MAX_WORD_COST` for the whole diff.
    """

    left: int
    exceeded: bool = False

    def spend(self, cost: int) -> bool:
        """Take ``cost`` from what is left and return True, or return False if past a bound."""
        if cost > MAX_WORD_PAIR_COST or cost > self.left:
            self.exceeded = True
            return False
        self.left -= cost
        return True


def _tokens(line: str) -> list[str]:
    """Split a line into words and punctuation marks, each with the spaces after it."""
    return _TOKEN.findall(line)


def _word_segments(old: str, new: str, budget: WordBudget) -> tuple[Segment, ...] | None:
    """Return ``old`` turned into ``new`` word by word, or None to show the lines whole.

    None when the pair is past the bounds (see :class:`WordBudget`), or when fewer
    than a third of the words are kept: marking nearly every word reads worse than the two
    lines one after the other.
    """
    a, b = _tokens(old), _tokens(new)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    cost = len(middle_a) * len(middle_b)
    if not budget.spend(cost):
        return None
    parts: list[tuple[str, list[str]]] = [("same", a[:head])]
    matcher = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        if tag == "equal":
            parts.append(("same", middle_a[a0:a1]))
        else:
            parts.append(("removed", middle_a[a0:a1]))
            parts.append(("added", middle_b[b0:b1]))
    parts.append(("same", a[len(a) - tail :]))
    kept = sum(1 for kind, tokens in parts if kind == "same" for t in tokens if not t.isspace())
    words = max(sum(1 for t in a if not t.isspace()), sum(1 for t in b if not t.isspace()))
    if kept * 3 < words:
        return None
    segments: list[Segment] = []
    for kind, tokens in _spaces_kept_plain(parts):
        text = "".join(tokens)
        if not text:
            continue
        if segments and segments[-1].kind == kind:
            segments[-1] = Segment(kind, segments[-1].text + text)
        else:
            segments.append(Segment(kind, text))
    return tuple(segments)


def _spaces_kept_plain(parts: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """Move the spaces that end both a removed run and the added run after it out of them,
    so a replaced word is marked without the space that follows it."""
    out: list[tuple[str, list[str]]] = []
    for n, (kind, tokens) in enumerate(parts):
        out.append((kind, list(tokens)))
        if kind != "added" or n == 0 or parts[n - 1][0] != "removed":
            continue
        removed, added = out[-2][1], out[-1][1]
        if not removed or not added:
            continue
        last_old, last_new = removed[-1], added[-1]
        space = last_old[len(last_old.rstrip()) :]
        if space and last_new.endswith(space) and last_old.strip() and last_new.strip():
            removed[-1], added[-1] = last_old[: -len(space)], last_new[: -len(space)]
            out.append(("same", [space]))
    return out


def _changed_rows(removed: list[str], added: list[str], budget: WordBudget) -> list[Row]:
    """Return the rows of a changed passage: line pairs word by word where they read well.

    Lines are paired in order (the first removed with the first added, and so on); a pair
    shown word by word is one ``changed`` row, any other pair a ``removed`` row then an
    ``added`` one, so each side still reads in its own order.
    """
    rows: list[Row] = []
    for old_line, new_line in zip(removed, added, strict=False):
        segments = _word_segments(old_line, new_line, budget)
        if segments is None:
            rows += [Row("removed", old_line), Row("added", new_line)]
        else:
            rows.append(Row("changed", segments=segments))
    rows += [Row("removed", line) for line in removed[len(added) :]]
    rows += [Row("added", line) for line in added[len(removed) :]]
    return rows


def _rows(
    old: list[str], new: list[str], groups: list[list[tuple]], budget: WordBudget
) -> tuple[list[Row], bool]:
    """Return the diff's rows (at most :data:`MAX_SHOWN_LINES` of text), and whether cut."""
    rows: list[Row] = []
    at = 0
    for group in groups:
        if group[0][1] > at:
            rows.append(Row("gap", skipped=group[0][1] - at))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [Row("same", line) for line in old[i1:i2]]
            elif tag == "unaligned":  # its lines were not paired, so neither are its words
                rows += [Row("removed", line) for line in old[i1:i2]]
                rows += [Row("added", line) for line in new[j1:j2]]
            else:
                rows += _changed_rows(old[i1:i2], new[j1:j2], budget)
            if len(rows) > MAX_SHOWN_LINES:
                return rows[:MAX_SHOWN_LINES], True
        at = group[-1][2]
    if groups and at < len(old):
        rows.append(Row("gap", skipped=len(old) - at))
    return rows, False


def _compared(body: str) -> tuple[str, bool]:
    return (body[:MAX_COMPARED_CHARS], True) if len(body) > MAX_COMPARED_CHARS else (body, False)


def revision_diff(*, old_title: str, old_body: str, new_title: str, new_body: str) -> list[Row]:
    """Return the changes from the old title and body to the new ones (empty: identical)."""
    (old_body, old_cut), (new_body, new_cut) = _compared(old_body), _compared(new_body)
    return _diff(_lines(old_title, old_body), _lines(new_title, new_body), old_cut or new_cut)


def text_diff(old: str, new: str) -> list[Row]:
    """Return the changes from one text to another (empty: identical), bounded alike."""
    (old, old_cut), (new, new_cut) = _compared(old), _compared(new)
    return _diff(_text_lines(old), _text_lines(new), old_cut or new_cut)


def two_sides(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    """Split a diff into the two texts it compares, each marking what the other lacks.

    The first side keeps the ``removed`` words and lines (what only the old text has), the
    second the ``added`` ones; both keep the unchanged lines, gaps and notes. The conflict
    page shows a colleague's text beside the editor's this way, each side readable on its own.
    """
    old: list[Row] = []
    new: list[Row] = []
    for row in rows:
        if row.kind == "changed":
            old.append(Row("changed", segments=_side(row.segments, "removed")))
            new.append(Row("changed", segments=_side(row.segments, "added")))
        elif row.kind == "removed":
            old.append(row)
        elif row.kind == "added":
            new.append(row)
        else:
            old.append(row)
            new.append(row)
    return old, new


def _side(segments: tuple[Segment, ...], kind: str) -> tuple[Segment, ...]:
    return tuple(s for s in segments if s.kind in ("same", kind))


def _text_lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").split("\n")


def _diff(old: list[str], new: list[str], compared_cut: bool) -> list[Row]:
    codes, too_large = _opcodes(old, new)
    budget = WordBudget(MAX_WORD_COST)
    rows, cut = _rows(old, new, _groups(codes, CONTEXT_LINES), budget)
    notes = []
    if compared_cut:
        notes.append(f"only the first {MAX_COMPARED_CHARS:,} characters of each body are compared")
    if too_large:
        notes.append(
            f"changed passages of more than {MAX_ALIGNED_LINES} lines are shown as removed, "
            "then added"
        )
    if cut:
        rows.append(Row("note", f"… {TOO_LARGE.lower()}: the rest is not shown."))
        notes.append(f"only the first {MAX_SHOWN_LINES:,} lines of the diff are shown")
    if budget.exceeded:
        notes.append(
            "words are marked within changed lines up to a bound; past it, changed lines are "
            "shown as removed, then added"
        )
    if notes:
        rows.insert(0, Row("note", f"{TOO_LARGE}: {'; '.join(notes)}."))
    return rows
