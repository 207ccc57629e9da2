"""Changes other apps make to posts at their time, inside the publish job's run.

The publish job (:mod:`publishing.jobs`) puts due posts live, takes expired ones down and
switches due revisions. An app whose changes go out at a time of their own (releases, each
whole at one instant) adds a :class:`DueWork` with :func:`add_due_work` in its
``AppConfig.ready``: its first due time is read in the job's one agenda statement
(:mod:`publishing.agenda`), and when it is due the job runs it in the run's transaction, with
the run's clock reading and node. Publishing names none of them.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import QuerySet


@dataclass(frozen=True)
class Done:
    """What a run of due work left: ``more`` due at once (it took only its share), or some
    ``held`` by another transaction (looked at again a second later)."""

    more: bool = False
    held: bool = False


@dataclass(frozen=True)
class DueWork:
    """One kind of change another app makes at its time.

    - ``name``: its key in the agenda (not one of publishing's own kinds).
    - ``first_due()``: a one-column query of its due times, earliest first, leaving out what
      waits for an editor; the agenda reads its first row.
    - ``run(now=, node=)``: make the changes due at ``now``, in the caller's transaction.
    """

    name: str
    first_due: Callable[[], QuerySet]
    run: Callable[..., Done]


_works: dict[str, DueWork] = {}


def add_due_work(work: DueWork) -> None:
    """Have the publish job do ``work`` when it is due (once, however often it is added)."""
    _works[work.name] = work


def due_works() -> list[DueWork]:
    """Return the due work other apps added, in the order they were added."""
    return list(_works.values())


def run_due(agenda, *, now: datetime, node: str) -> Done:
    """Run each added work that ``agenda`` says is due at ``now``; return what they left."""
    more = held = False
    for work in due_works():
        if agenda.due(work.name, now):
            done = work.run(now=now, node=node)
            more, held = more or done.more, held or done.held
    return Done(more=more, held=held)
