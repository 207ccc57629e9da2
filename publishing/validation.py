"""What makes a post publishable and a schedule valid: one definition for form, actions, job."""

import re
from datetime import UTC, datetime, timedelta, tzinfo

from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.formats import date_format

from publishing.conf import settings
from publishing.slugs import is_url_slug

TITLE_MAX_CHARS = 200

# The range of times every time zone can show. Python's datetimes stop at years 1 and 9999, so
# 9999-12-31 in UTC is a year-10000 time east of UTC and its page fails with OverflowError. No
# zone is a whole day away from UTC, so a day's margin at each end is enough.
EARLIEST_TIME = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
LATEST_TIME = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)
TIME_LABELS = {"publish_at": "publish time", "unpublish_at": "unpublish time"}

# Characters a post's text may not hold: those XML 1.0 cannot carry at all (the feed and the
# sitemap are XML, and one such title made the feed fail for every reader), i.e. the C0
# controls but tab, newline and carriage return, and U+FFFE, U+FFFF and lone surrogates.
XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# A title or slug is one line: no tab, newline or carriage return either, nor DEL.
LINE_FORBIDDEN = re.compile("[\x00-\x1f\x7f\ud800-\udfff\ufffe\uffff]")
TEXT_LABELS = {"title": "title", "slug": "slug", "body": "body"}
#: The fields whose text is several lines (tabs and line breaks are fine there).
MULTILINE_FIELDS = frozenset(["body"])


def xml_text(value: str) -> str:
    """Return ``value`` without the characters XML 1.0 cannot carry (for the feed, sitemap)."""
    return XML_FORBIDDEN.sub("", value) if value else value


def character_problem(value: str, *, label: str, multiline: bool = False) -> str | None:
    """Return why ``value`` cannot be a post's ``label`` text (None when it can).

    Names the first forbidden character by its code point and where it is, so the editor can
    find an invisible character pasted from elsewhere.
    """
    match = (XML_FORBIDDEN if multiline else LINE_FORBIDDEN).search(value or "")
    if match is None:
        return None
    character = f"U+{ord(match[0]):04X}"
    at = match.start()
    if multiline:
        line = value.count("\n", 0, at) + 1
        column = at - (value.rfind("\n", 0, at) + 1) + 1
        where = f"line {line}, column {column}"
    else:
        where = f"position {at + 1}"
    kind = "control character" if ord(match[0]) < 0x80 else "character"
    return (
        f"The {label} contains a {kind} ({character}) at {where}, which cannot be published "
        "(web feeds cannot carry it); remove it."
    )


def text_problems(**texts: str | None) -> dict[str, str]:
    """Return field name -> message for texts holding characters no page can carry."""
    errors = {}
    for name, value in texts.items():
        problem = character_problem(
            value or "", label=TEXT_LABELS.get(name, name), multiline=name in MULTILINE_FIELDS
        )
        if problem:
            errors[name] = problem
    return errors


def body_text_problems(body: str) -> list[str]:
    """Return why the body's characters cannot be published, as :func:`publish_problems` says.

    Apart from it because the publish job's batches check posts without reading their bodies.
    """
    problem = character_problem(body or "", label="body", multiline=True)
    return [_lowered(problem)] if problem else []


def validate_title_text(value: str) -> None:
    """Model field validator of titles (the admin's forms run it): see :func:`text_problems`."""
    _raise_problem(value, "title")


def validate_body_text(value: str) -> None:
    """Model field validator of bodies (the admin's forms run it): see :func:`text_problems`."""
    _raise_problem(value, "body")


def _raise_problem(value: str, name: str) -> None:
    problem = text_problems(**{name: value}).get(name)
    if problem:
        raise ValidationError(problem, code="forbidden_character")


def publish_problems(
    *, title: str, slug: str, body_length: int, max_chars: int | None = None
) -> list[str]:
    """Return why a post with these values cannot go live (empty when it can).

    Cheap on purpose: the publish job checks every post of a batch, so it looks at the title,
    the slug and the body's length (computed by the database), never renders the body. A
    batch passes ``max_chars`` (``INSTATIC_POST_BODY_MAX_CHARS``) read once: read per post,
    the setting cost more than the checks, time that a 10,000-post backlog batch held the
    interpreter from the publish job's thread.
    """
    problems = []
    if not (title or "").strip():
        problems.append("the title is empty")
    elif len(title) > TITLE_MAX_CHARS:
        problems.append(f"the title is longer than {TITLE_MAX_CHARS} characters")
    elif LINE_FORBIDDEN.search(title):
        problems.append(_lowered(character_problem(title, label="title")))
    if not is_url_slug(slug or ""):
        problems.append(f"the slug {slug!r} is not a valid slug (letters, digits, - and _ only)")
    if max_chars is None:
        max_chars = int(settings.POST_BODY_MAX_CHARS)
    if not body_length:
        problems.append("the body is empty")
    elif body_length > max_chars:
        problems.append(f"the body is longer than {max_chars:,} characters")
    return problems


def _lowered(message: str) -> str:
    """Return a sentence as one item of a list of problems ("the title ...; the body ...")."""
    return message[0].lower() + message[1:].rstrip(".")


def _local(value: datetime) -> str:
    local = timezone.localtime(value)
    return f"{date_format(local, 'Y-m-d H:i:s')} {timezone.get_current_timezone_name()}"


def _clock(value: datetime) -> str:
    return value.strftime("%H:%M:%S" if value.second else "%H:%M")


def _duration(delta: timedelta) -> str:
    minutes = round(abs(delta).total_seconds() / 60)
    return f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"


def wall_time_problem(value: datetime, zone: tzinfo) -> str | None:
    """Return why the naive wall time ``value`` cannot be read in ``zone`` (None when it can).

    A time in a daylight-saving gap does not exist and one in a fold happens twice; guessing
    would publish an hour early or late without telling anyone, so the editor is told what
    happened and what to pick instead. The one definition the post form's time fields use.
    """
    first = value.replace(tzinfo=zone, fold=0)
    second = value.replace(tzinfo=zone, fold=1)
    if first.utcoffset() == second.utcoffset():
        return None
    name = getattr(zone, "key", str(zone))
    day = f"{value:%Y-%m-%d}"
    shift = _duration(second.utcoffset() - first.utcoffset())
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) != value:
        # In a gap, fold=0 reads the time with the offset from before the change, which lands
        # as far past the gap as the time was into it: the time the editor most likely meant.
        meant = first.astimezone(UTC).astimezone(zone)
        return (
            f"{_clock(value)} does not exist on {day} in {name} (clocks go forward by "
            f"{shift}); did you mean {_clock(meant)}?"
        )
    earlier, later = sorted((first, second), key=lambda t: t.astimezone(UTC))
    return (
        f"{_clock(value)} happens twice on {day} in {name} (clocks go back by {shift}): first "
        f"at {_clock(value)} {earlier.tzname()}, then again {shift} later at "
        f"{_clock(value)} {later.tzname()}. Which one: {_clock(value)} {earlier.tzname()} or "
        f"{_clock(value)} {later.tzname()}? Choose it below."
    )


def time_problems(**times: datetime | None) -> dict[str, str]:
    """Return field name -> message for times no page could show (empty when all can).

    Raise ValueError for a naive datetime: callers must say which zone a time is in.
    """
    errors: dict[str, str] = {}
    for name, value in times.items():
        if value is None:
            continue
        if timezone.is_naive(value):
            raise ValueError(
                f"{name} must be an aware datetime (with a time zone), got the naive "
                f"{value.isoformat()}; use django.utils.timezone.make_aware() first."
            )
        try:
            showable = EARLIEST_TIME <= value.astimezone(UTC) <= LATEST_TIME
        except OverflowError:
            showable = False
        if not showable:
            errors[name] = (
                f"The {TIME_LABELS.get(name, name)} cannot be shown in every time zone: choose "
                f"one between {EARLIEST_TIME:%Y-%m-%d} and {LATEST_TIME:%Y-%m-%d} (UTC)."
            )
    return errors


def schedule_problems(
    *,
    publish_at: datetime | None,
    unpublish_at: datetime | None,
    now: datetime,
    publish_required: bool = True,
    check_publish_future: bool = True,
    check_unpublish_future: bool = True,
) -> dict[str, str]:
    """Return field name -> message for times that cannot be used (empty when they can).

    ``now`` is the database's time. A publish time must lie in the future when it is being set
    (``check_publish_future``); an unpublish time must come after the publish time and, when it
    is being set, lie in the future too. Every time must be one all zones can show
    (:func:`time_problems`, which also refuses naive datetimes).
    """
    errors = time_problems(publish_at=publish_at, unpublish_at=unpublish_at)
    if errors:
        return errors
    if publish_at is None:
        if publish_required:
            errors["publish_at"] = "Choose a publish time to schedule this post."
    elif check_publish_future and publish_at <= now:
        errors["publish_at"] = (
            f"The publish time must be in the future: it is now {_local(now)}, "
            f"and {_local(publish_at)} has passed."
        )
    if unpublish_at is not None:
        if publish_at is not None and unpublish_at <= publish_at:
            errors["unpublish_at"] = "The unpublish time must be after the publish time."
        elif check_unpublish_future and unpublish_at <= now:
            errors["unpublish_at"] = (
                f"The unpublish time must be in the future: it is now {_local(now)}."
            )
    return errors
