"""May this content go live now? The checks other apps add to every path that puts content live.

The publish job's batches (a due post, a due revision) and a release going out (the job's or
"Release now") ask :func:`why_not` in the transaction that makes the content live, with its
rows locked, so what was checked is what goes live. An app adds a check with
:func:`add_go_live_check` in its ``AppConfig.ready``: reviews hold content no reviewer
approved as it is. Publishing names none of them; with none added, everything due goes live.

A check is ``check(kind, ids) -> {id: why}``: for ``kind`` (:data:`POST`, :data:`REVISION`
or :data:`RELEASE`), the ids among ``ids`` that may not go live now, each with a sentence
saying why and what to do (a held post shows it as its publish error).
"""

from collections.abc import Callable, Iterable

POST, REVISION, RELEASE = "post", "revision", "release"

GoLiveCheck = Callable[[str, list[int]], dict[int, str]]

_checks: list[GoLiveCheck] = []


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
