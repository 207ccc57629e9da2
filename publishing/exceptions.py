"""Errors the publishing actions raise; each message says what to do about it."""

from datetime import datetime

from django.utils import timezone
from django.utils.formats import date_format


class PublishingError(Exception):
    """A publishing action that cannot be done as asked."""


class InvalidTransition(PublishingError):
    """The post is not in a state that allows the action (e.g. it was published meanwhile)."""


class InvalidSchedule(PublishingError):
    """Publish or unpublish times that cannot be used; ``errors`` maps field names to messages."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__(" ".join(errors.values()))


class InvalidContent(PublishingError):
    """A title, slug or body that cannot be stored; ``errors`` maps field names to messages."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__(" ".join(errors.values()))


class NotPublishable(PublishingError):
    """The post's content cannot be published; ``problems`` lists why."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


class EditConflict(PublishingError):
    """Someone changed the post after the editor opened it: nothing was written.

    Raised by the actions when the caller's ``expected_version`` is not the row's version
    under the row lock. The message names who changed the post and when, in the current time
    zone (the editor's, during a request), and says what state the post is in now.
    """

    def __init__(
        self, *, title: str, changed_by: str, changed_at: datetime, status_label: str, version: int
    ):
        self.title = title
        self.changed_by = changed_by
        self.changed_at = changed_at
        self.status_label = status_label
        self.version = version
        when = date_format(timezone.localtime(changed_at), "Y-m-d H:i:s T")
        super().__init__(
            f"“{title}” was changed by {changed_by or 'someone'} at {when} since you opened "
            f"it; it is now {status_label}."
        )
