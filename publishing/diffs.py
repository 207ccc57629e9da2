"""Line diffs of two revisions' titles and bodies, for the admin's compare page.

Plain text in, plain text out: the template escapes every line (a body's raw HTML is shown as
text, never run). Three lines of context around changes, in unified-diff hunks.

The work is bounded for the largest bodies the editor accepts (``INSTATIC_POST_BODY_MAX_CHARS``):
:mod:`difflib` alone takes time quadratic in the lines that differ (45 s for two 200,000-
character bodies of 30,000 short lines). So the lines both sides share at the start and the
end are set aside first; what is left is anchored on lines that occur once on each side, in
the longest run of them in the same order (as in patience diff, O(n log n)); only the gaps
between anchors are aligned by :mod:`difflib`, and a gap of more than
:data:`MAX_ALIGNED_LINES` is shown as removed, then added. At most :data:`MAX_SHOWN_LINES`
lines are returned, and bodies are compared up to :data:`MAX_COMPARED_CHARS` characters; when
any bound applies the diff says "too large to compare in full" in a ``hunk`` line, which the
page shows like the hunk headers.
"""

import bisect
import difflib
from collections import Counter
from dataclasses import dataclass

CONTEXT_LINES = 3
#: Lines (both sides together) of one gap between anchors that difflib aligns; a gap of n
#: lines costs it up to n² steps, so the whole diff costs at most this many per line.
MAX_ALIGNED_LINES = 200
#: Lines of a diff returned at most: the page renders each one.
MAX_SHOWN_LINES = 2000
#: Characters of each body compared at most (above the editor's limit for a post's body).
MAX_COMPARED_CHARS = 250_000

TOO_LARGE = "Too large to compare in full"


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff; ``kind`` is ``added``, ``removed``, ``context`` or ``hunk``."""

    kind: str
    text: str


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
        return [("replace", i0, i1, j0, j1)], True
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


def _range(start: int, stop: int) -> str:
    """Return a hunk header's range as unified diffs write it (1-based; empty ones at 0)."""
    length = stop - start
    beginning = start + 1 if length else start
    return str(beginning) if length == 1 else f"{beginning},{length}"


def _shown(old: list[str], new: list[str], groups: list[list[tuple]]) -> list[DiffLine]:
    """Return the diff's lines, stopping once there are more than :data:`MAX_SHOWN_LINES`."""
    lines: list[DiffLine] = []
    for group in groups:
        first, last = group[0], group[-1]
        header = f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@"
        lines.append(DiffLine("hunk", header))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines += [DiffLine("context", line) for line in old[i1:i2]]
            else:
                lines += [DiffLine("removed", line) for line in old[i1:i2]]
                lines += [DiffLine("added", line) for line in new[j1:j2]]
            if len(lines) > MAX_SHOWN_LINES:
                return lines
    return lines


def _compared(body: str) -> tuple[str, bool]:
    return (body[:MAX_COMPARED_CHARS], True) if len(body) > MAX_COMPARED_CHARS else (body, False)


def revision_diff(
    *, old_title: str, old_body: str, new_title: str, new_body: str
) -> list[DiffLine]:
    """Return the changes from the old title and body to the new ones (empty: identical)."""
    (old_body, old_cut), (new_body, new_cut) = _compared(old_body), _compared(new_body)
    old, new = _lines(old_title, old_body), _lines(new_title, new_body)
    codes, too_large = _opcodes(old, new)
    lines = _shown(old, new, _groups(codes, CONTEXT_LINES))
    notes = []
    if old_cut or new_cut:
        notes.append(f"only the first {MAX_COMPARED_CHARS:,} characters of each body are compared")
    if too_large:
        notes.append(
            f"changed passages of more than {MAX_ALIGNED_LINES} lines are shown as removed, "
            "then added"
        )
    if len(lines) > MAX_SHOWN_LINES:
        lines = lines[:MAX_SHOWN_LINES]
        lines.append(DiffLine("hunk", f"… {TOO_LARGE.lower()}: the rest is not shown."))
        notes.append(f"only the first {MAX_SHOWN_LINES:,} lines of the diff are shown")
    if notes:
        lines.insert(0, DiffLine("hunk", f"{TOO_LARGE}: {'; '.join(notes)}."))
    return lines
