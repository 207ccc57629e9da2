"""Sections other apps add to the "My notifications" page, below the email switches.

Editors know none of them: an app registers a function of ``request`` that returns the
section's HTML, or ``None`` when it has nothing to show that user (the outbox lists the posts
the editor watches this way).
"""

from collections.abc import Callable

from django.http import HttpRequest
from django.utils.safestring import SafeString

Section = Callable[[HttpRequest], SafeString | None]

_sections: list[Section] = []


def add_notifications_section(section: Section) -> None:
    """Show ``section`` on every editor's "My notifications" page (once, however often)."""
    if section not in _sections:
        _sections.append(section)


def notifications_sections(request: HttpRequest) -> list[SafeString]:
    """Return the sections for ``request``'s user, in the order they were added."""
    return [shown for shown in (each(request) for each in _sections) if shown]
