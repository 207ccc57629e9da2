"""Three-way merge of an editor's form against a colleague's change: deciding only, no I/O.

An editor opens a post (the *base*), a colleague or the scheduler changes it (*theirs*), then
the editor submits their form (*mine*). Per field: what only one side changed takes that
side's value, what both changed to the same value is that value, and what both changed to
different values is a conflict the editor must settle. The forms (:mod:`publishing.forms`)
gather the three sets of values and show the result; this module only decides.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime


@dataclass(frozen=True)
class MergeResult:
    """The merged values, and which fields came from the colleague or conflict.

    ``values`` holds the colleague's value for fields in ``theirs`` and the editor's for every
    other field, a conflicting one included (the form shows both and saves neither until the
    editor picks).
    """

    values: dict[str, object]
    theirs: tuple[str, ...]
    conflicts: tuple[str, ...]


def same(a: object, b: object) -> bool:
    """Return True if ``a`` and ``b`` are the same value; aware datetimes as instants.

    Python compares two datetimes of one zone by their wall times, ignoring ``fold``: 02:30
    CEST and 02:30 CET on the night clocks go back would be "equal". In UTC they are not.
    """
    if isinstance(a, datetime) and isinstance(b, datetime):
        if a.tzinfo is None or b.tzinfo is None:
            return a == b
        return a.astimezone(UTC) == b.astimezone(UTC)
    return a == b


def merge(
    *,
    base: Mapping[str, object],
    theirs: Mapping[str, object],
    mine: Mapping[str, object],
    fields: Iterable[str],
) -> MergeResult:
    """Merge ``mine`` and ``theirs``, both edits of ``base``, field by field over ``fields``."""
    values: dict[str, object] = {}
    from_theirs: list[str] = []
    conflicts: list[str] = []
    for name in fields:
        old, their, my = base[name], theirs[name], mine[name]
        if same(my, old) and not same(their, old):
            values[name] = their
            from_theirs.append(name)
            continue
        values[name] = my
        if not same(my, old) and not same(their, old) and not same(my, their):
            conflicts.append(name)
    return MergeResult(values=values, theirs=tuple(from_theirs), conflicts=tuple(conflicts))
