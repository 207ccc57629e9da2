"""May this content go live now? The checks other apps add to every path that puts content live.

The publish job's batches (a due post, a due revision) and a release going out (the job's or
"Release now") ask :func:`why_not` in the transaction that makes the content live, with its
rows locked, so what was checked is what goes live. An app adds a check with
:func:`add_go_live_check` in its ``AppConfig.ready``: reviews hold content no reviewer
approved as it is. Publishing names none of them; with none added, everything due goes live.

A check is ``check(kind, ids) -> {id: why}``: for ``kind`` (:data:`POST`, :data:`REVISION`
or :data:`RELEASE`), the ids among ``ids`` that may not go live now, each with a sentence
saying why and what to do (a held post shows it as its publish error).

Editors hear it earlier, from the same apps: before an editor schedules or publishes a post,
or schedules a revision's text, the action asks :func:`editor_problem` (checks added with
:func:`add_editor_check`, e.g. "not approved as it is now") and refuses with its sentence; and
the pages that offer those buttons say beforehand what they wait for (:func:`editor_notice`,
from notices added with :func:`add_editor_notice`).
"""

from collections.abc import Callable, Iterable

POST, REVISION, RELEASE = "post", "revision", "release"

GoLiveCheck = Callable[[str, list[int]], dict[int, str]]
#: ``check(kind, post, *, title=None, body=None) -> why`` ("" when it may): ``post`` (locked by
#: the action, or not saved yet) and, for a revision, the text to schedule.
EditorCheck = Callable[..., str]
#: ``notice(kind) -> sentence`` ("" when there is nothing to say).
EditorNotice = Callable[[str], str]

_checks: list[GoLiveCheck] = []
_editor_checks: list[EditorCheck] = []
_editor_notices: list[EditorNotice] = []


def add_go_live_check(check: GoLiveCheck) -> None:
    """Ask ``check`` before any content goes live (once, however often it is added)."""
    if check not in _checks:
        _checks.append(check)


def why_not(kind: str, ids: Iterable[int]) -> dict[int, str]:
    """Return the ids of ``kind`` that may not go live now, each with the first check's why."""
    ids = list(ids)
    held: dict[int, str] = {}
    if not ids:
        return held
    for check in _checks:
        for pk, why in check(kind, ids).items():
            held.setdefault(pk, why)
    return held


def add_editor_check(check: EditorCheck) -> None:
    """Ask ``check`` before an editor puts content live or schedules it (once, however often
    it is added)."""
    if check not in _editor_checks:
        _editor_checks.append(check)


def editor_problem(kind: str, post, *, title: str | None = None, body: str | None = None) -> str:
    """Return why an editor may not schedule or publish this content now ("" if they may)."""
    for check in _editor_checks:
        why = check(kind, post, title=title, body=body)
        if why:
            return why
    return ""


def add_editor_notice(notice: EditorNotice) -> None:
    """Show ``notice``'s sentence where editors schedule or publish (once, however often)."""
    if notice not in _editor_notices:
        _editor_notices.append(notice)


def editor_notice(kind: str) -> str:
    """Return what the pages that schedule or publish content of ``kind`` should say first."""
    return " ".join(said for said in (notice(kind) for notice in _editor_notices) if said)
