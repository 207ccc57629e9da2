"""What other apps do when a post changes (or is about to be deleted, or to get a new draft
text), and what they tell the editor about it.

Publishing's actions call :func:`post_changed` inside the transaction of every change of a
post (its creation, an editor's save or action, the publish job's batch), after the change is
written. An app registers a receiver with :func:`on_post_changed` (in its
``AppConfig.ready``): releases stop a scheduled release whose item of the post no longer
applies, so its owner hears of it before the release's time. Publishing knows none of them.

A receiver returns the sentences the editor should read about what it did ("this stops the
release …"). Whoever shows the change to an editor collects them with :func:`telling` around
the action; elsewhere (the publish job, ``manage.py``) they are dropped: a receiver that must
be heard also logs or emails.

Before a save writes a new text over a post, rules added with :func:`add_save_rule` may refuse
it or take the post back to draft (reviews: an approved, scheduled post whose text changed needs
a review again); what they did afterwards is told like a receiver's sentences.

Two more hooks, each in the action's transaction with the post locked: receivers added with
:func:`on_posts_deleting` hear of posts about to be deleted (a scheduled release holding one
stops), and checks added with :func:`add_new_draft_check` may refuse a new draft text of a
post, with the sentence the editor reads (a pending release goes out with the draft it holds).
"""

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

#: ``receiver(post_ids, *, by_editor, user)``: ``by_editor`` is False for the publish job,
#: which must never wait on a row an editor holds; ``user`` made the change (None: Instatic).
PostChanged = Callable[..., Iterable[str] | None]

_receivers: list[PostChanged] = []
_deleting: list[Callable[[list[int]], object]] = []
_save_rules: list[Callable[..., "Saving | None"]] = []
_draft_checks: list[Callable[[object], str]] = []
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


def on_posts_deleting(receiver: Callable[[list[int]], object]) -> None:
    """Call ``receiver(post_ids)`` before posts are deleted (once, however often it is added)."""
    if receiver not in _deleting:
        _deleting.append(receiver)


def posts_deleting(post_ids: list[int]) -> None:
    """Tell every receiver that ``post_ids`` are about to be deleted (in the caller's
    transaction)."""
    for receiver in _deleting:
        receiver(post_ids)


def add_new_draft_check(check: Callable[[object], str]) -> None:
    """Ask ``check(post)`` before a new draft text of a post is written (once, however often
    it is added); a non-empty answer refuses it, saying why and what to do."""
    if check not in _draft_checks:
        _draft_checks.append(check)


def new_draft_problem(post) -> str:
    """Return why a new draft text of ``post`` (locked) may not be written now ("" if it may)."""
    for check in _draft_checks:
        problem = check(post)
        if problem:
            return problem
    return ""


@dataclass(frozen=True)
class Saving:
    """What a save rule says of a new text about to be saved over a post.

    ``back_to_draft``: the save takes a scheduled post back to draft. ``after()`` runs once
    the change is written (in its transaction) and returns what the editor reads of it.
    """

    back_to_draft: bool = False
    after: Callable[[], Iterable[str]] | None = None


def add_save_rule(rule: Callable[..., Saving | None]) -> None:
    """Ask ``rule(current, post, *, user)`` before a new text of a post is saved (once,
    however often it is added); it may raise to refuse the save, in words."""
    if rule not in _save_rules:
        _save_rules.append(rule)


def saving(current, post, *, user=None) -> list[Saving]:
    """Return what every save rule says of saving ``post`` over ``current`` (locked)."""
    return [said for said in (rule(current, post, user=user) for rule in _save_rules) if said]


def saved(verdicts: list[Saving]) -> None:
    """Run the rules' ``after`` once the save is written; tell the editor what they say."""
    told = _told.get()
    for verdict in verdicts:
        if verdict.after is not None:
            sentences = list(verdict.after() or ())
            if told is not None:
                told.extend(sentences)
