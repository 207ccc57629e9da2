"""The rule a post's slug follows: the one the public URL (``posts/<slug:slug>/``) accepts.

One rule, checked in three places that must agree: Python (:func:`is_url_slug`), the
database's check constraint on ``Post.slug`` and the public site's reads
(:class:`IsURLSlug`, the same condition in SQL), so a post whose address cannot be built is
refused on insert and, on a database that does not have the constraint yet, never listed.
"""

import re

from django.db.models import BooleanField, Func

#: Django's ``slug`` path converter: ASCII letters, digits, hyphens and underscores.
URL_SLUG = re.compile(r"[-a-zA-Z0-9_]+")
#: A character the rule does not allow, as a character class every vendor's matcher reads
#: the same way (SQLite's GLOB, PostgreSQL's and MariaDB's regular expressions).
_OTHER_CHARACTER = "[^-a-zA-Z0-9_]"


def is_url_slug(slug: str) -> bool:
    """Return True if ``slug`` can be part of a post's public address."""
    return URL_SLUG.fullmatch(slug) is not None


class IsURLSlug(Func):
    """True where the expression (a slug) follows :data:`URL_SLUG`: the condition in SQL.

    Not empty, and no character outside the class: an unanchored search for one character
    the rule does not allow, since ``$`` in MariaDB's regular expressions also matches
    before a final newline. SQLite has no regular expressions of its own (Django adds a
    ``REGEXP`` function to its connections only, which another client of the file would not
    have), so it uses ``GLOB``, case-sensitive with the same character class; MariaDB
    compares the bytes (``CAST AS BINARY``), so a case-insensitive collation cannot fold a
    non-ASCII letter into ``a-z``.
    """

    arity = 1
    output_field = BooleanField()
    conditional = True

    def as_sql(self, compiler, connection, **extra_context):  # PostgreSQL
        sql, params = compiler.compile(self.source_expressions[0])
        return f"({sql} <> '' AND {sql} !~ %s)", [*params, *params, _OTHER_CHARACTER]

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return (
            f"({sql} <> '' AND NOT ({sql} GLOB %s))",
            [*params, *params, f"*{_OTHER_CHARACTER}*"],
        )

    def as_mysql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return (
            f"(CHAR_LENGTH({sql}) > 0 AND NOT (CAST({sql} AS BINARY) REGEXP %s))",
            [*params, *params, _OTHER_CHARACTER],
        )
