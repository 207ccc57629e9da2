"""Errors the publishing services raise; each message says what to do about it."""


class PublishingError(Exception):
    """A publishing action that cannot be done as asked."""


class InvalidTransition(PublishingError):
    """The post is not in a state that allows the action (e.g. it was published meanwhile)."""


class InvalidSchedule(PublishingError):
    """Publish or unpublish times that cannot be used; ``errors`` maps field names to messages."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__(" ".join(errors.values()))


class NotPublishable(PublishingError):
    """The post's content cannot be published; ``problems`` lists why."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("; ".join(problems))
