"""What other apps do when a post changes, and what they tell the editor about it.

Publishing's actions call :func:`post_changed` inside the transaction of every change of a
post (an editor's save or action, the publish job's batch), after the change is written. An
app registers a receiver with :func:`on_post_changed` (in its ``AppConfig.ready``): releases
stop a scheduled release whose item of the post no longer applies, so its owner hears of it
before the release's time. Publishing knows none of them.

A receiver returns the sentences the editor should read about what it did ("this stops the
release …"). Whoever shows the change to an editor collects them with :func:`telling` around
the action; elsewhere (the publish job, ``manage.py``) they are dropped: a receiver that must
be heard also logs or emails.
"""

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: ``receiver(post_ids, *, by_editor, user)``: ``by_editor`` is False for the publish job,
#: which must never wait on a row an editor holds; ``user`` made the change (None: Instatic).
PostChanged = Callable[..., Iterable[str] | None]

_receivers: list[PostChanged] = []
_told: ContextVar[list[str] | None] = ContextVar("publishing_told", default=None)


def on_post_changed(receiver: PostChanged) -> None:
    """Call ``receiver`` after every change of posts (once, however often it is added)."""
    if receiver not in _receivers:
        _receivers.append(receiver)


def post_changed(post_ids: list[int], *, by_editor: bool = True, user=None) -> None:
    """Tell every receiver that ``user`` changed ``post_ids`` (in the caller's transaction)."""
    said = _told.get()
    for receiver in _receivers:
        sentences = receiver(post_ids, by_editor=by_editor, user=user) or ()
        if said is not None:
            said.extend(sentences)


@contextmanager
def telling() -> Iterator[list[str]]:
    """Collect, in the yielded list, what receivers say about the changes made in the block."""
    said: list[str] = []
    token = _told.set(said)
    try:
        yield said
    finally:
        _told.reset(token)
