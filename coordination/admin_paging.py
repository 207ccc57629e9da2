"""Admin pagination for tables too big to count: the run ledger at a million rows.

Django's change list counts the filtered rows on every page view to draw the page links; on a
ledger of a million rows that ``COUNT(*)`` reads the whole table (or index) every time. This
paginator counts at most ``cap`` rows (``SELECT COUNT(*) FROM (... LIMIT cap + 1)``), so a page
costs the same whatever the table's size; past the cap the list says "more than N" and the
filters narrow it down.
"""

from django.core.paginator import Paginator
from django.utils.functional import cached_property

#: Rows counted at most; past it the admin shows "more than" this many.
COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    """A paginator whose count stops at ``cap`` (``capped`` says whether there are more)."""

    cap = COUNT_CAP

    @cached_property
    def count(self) -> int:
        counted = self.object_list[: self.cap + 1].count()
        self.capped = counted > self.cap
        return min(counted, self.cap)

    capped = False
