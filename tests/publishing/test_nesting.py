"""The nesting guard holds on the tree the sanitizer builds, at a cost linear in the body.

HTML's tree builder nests and copies formatting elements in ways a count of the body's tags
does not see: ``<i><b><div></i>`` repeated builds a tree as deep as the repetitions, and a
``<b>`` left open in a ``<div>`` is copied into every later one. The guard counts the depth on
the sanitized output, refuses bodies the builder would nest or copy without bound before it
runs, and renders a body once per save.
"""

import time
from html.parser import HTMLParser
from unittest import mock

import pytest
from django.urls import reverse
from hypothesis import example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from publishing import rendering
from publishing.conf import settings
from publishing.models import Post
from publishing.rendering import MAX_NESTING, RenderError, render, render_markdown
from tests.publishing.conftest import form_data, live_post
from tests.publishing.test_admin_revisions import revisions_url, schedule_form

# Once per `make test`: rendering is the same whatever the vendor.
pytestmark = pytest.mark.sqlite


class _Depth(HTMLParser):
    """The oracle: a real HTML parser's count of open elements (void ones never open)."""

    def __init__(self):
        super().__init__()
        self.depth = self.deepest = 0

    def handle_starttag(self, tag, attrs):
        if tag not in rendering.VOID_ELEMENTS:
            self.depth += 1
            self.deepest = max(self.deepest, self.depth)

    def handle_endtag(self, tag):
        if tag not in rendering.VOID_ELEMENTS:
            self.depth -= 1


def real_depth(html: str) -> int:
    parser = _Depth()
    parser.feed(html)
    parser.close()
    return parser.deepest


def numbered(pattern: str, times: int) -> str:
    return "".join(pattern.format(n=n) for n in range(times))


HOSTILE = {
    "a closing tag of another element keeps the block open": "<i><b><div></i>" * 2000,
    "bold left open in blocks is copied into each": numbered("<div><b title={n}></div>", 2000),
    "bold left open by a paragraph": numbered("<p><b title={n}>x</p>", 2000),
    "open formatting copied into every block after a paragraph closes": (
        "<p>" + numbered("<b title={n}>", 90) + "<div>x</div>" * 5000
    ),
    "a long link copied into every block": (
        '<p><a href="/' + "x" * 5000 + '">' + "<div>x</div>" * 2000
    ),
    "links closing each other around bold": numbered("<a href='/{n}'><b title={n}>", 3000),
    "nested tables": "<table><td>x" * 2000,
    "unclosed bold": "<b>" * 5000,
    "deep blockquotes": ">" * 5000 + " x",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_bodies_the_parser_would_nest_or_copy_without_bound_are_refused(name):
    body = HOSTILE[name]
    with pytest.raises(RenderError):
        render_markdown(body)
    shown = render(body).html
    assert shown.startswith("<pre>"), "shown as text"
    assert real_depth(shown) <= MAX_NESTING


def test_the_reported_body_would_have_nested_two_thousand_deep():
    """What the sanitizer alone makes of it: the tree the guard is about."""
    sanitized = rendering.sanitize(rendering.markdown_to_html("<i><b><div></i>" * 2000))
    assert real_depth(sanitized) == rendering.nesting_depth(sanitized) == 2001


ORDINARY = {
    "list items without end tags": "<ul>" + "<li>item" * 500 + "</ul>",
    "paragraphs without end tags": "<p>para" * 500,
    "definition lists": "<dl>" + "<dt>term<dd>meaning" * 300 + "</dl>",
    "a table of many rows": "<table>" + "<tr><td>a<td>b" * 500 + "</table>",
    "misnested bold and italic": "<b>bold <i>both</b> italic</i> " * 300,
    "a bold heading left open": "<b>Heading\n\n" + "A paragraph.\n\n" * 500,
    "links around images": "[![a](/a.png)](/b) " * 500,
    "twenty levels of quotes": "> " * 20 + "deep",
    "forty levels of lists": "".join("  " * i + "- a\n" for i in range(40)),
}


@pytest.mark.parametrize("name", sorted(ORDINARY))
def test_ordinary_bodies_render_as_html(name):
    html = render_markdown(ORDINARY[name])
    assert not html.startswith("<pre>")
    assert real_depth(html) <= MAX_NESTING


TOKENS = [
    "<i>",
    "</i>",
    "<b>",
    "</b>",
    "<b title=x>",
    "<a href='/x'>",
    "</a>",
    "<div>",
    "</div>",
    "<p>",
    "</p>",
    "<li>",
    "</li>",
    "<ul>",
    "</ul>",
    "<table>",
    "<td>",
    "</table>",
    "<blockquote>",
    "</blockquote>",
    "<code>",
    "<br>",
    "<img src=/a.png>",
    "text ",
    "**",
    "*",
    "> ",
    "- ",
    "\n",
    "\n\n",
    "`",
    "[a](/b)",
]
nestings = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=24)


@hypothesis_settings(max_examples=150)
@given(unit=nestings, times=st.integers(1, 300))
def test_the_rendered_tree_never_nests_deeper_than_the_guard(unit, times):
    body = "".join(unit) * times
    html = render(body).html
    assert real_depth(html) <= MAX_NESTING
    assert rendering.nesting_depth(html) == real_depth(html), "the fast count reads the same"


def best_of(runs: int, function, *args) -> float:
    times = []
    for _ in range(runs):
        rendering._rendered.cache_clear()
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return min(times)


#: Render time per character of any nesting over that of plain text of the same length. Dense
#: markup costs far more than text: every tag is an element built, checked and serialized, up
#: to about 400 times plain text at this length, and 1,000 times under coverage's tracer
#: (``make test``), which slows the guard's Python and not the Rust that renders plain text.
#: A cost growing with the square of the nesting is several thousand times: the reported body
#: was 6,500 times before the guard.
MAX_RATIO = 3000
LENGTH = 100_000


@hypothesis_settings(max_examples=20)
@given(unit=nestings)
@example(unit=["<i>", "<b>", "<div>", "</i>"])  # the reported body
def test_render_time_per_character_stays_within_a_constant_of_plain_text(unit):
    body = ("".join(unit) * (LENGTH // len("".join(unit)) + 1))[:LENGTH]
    baseline = max(best_of(5, render, "x" * LENGTH), 1e-5)
    elapsed = best_of(3, render, body)
    assert elapsed / baseline < MAX_RATIO, (elapsed, baseline)


def test_the_reported_body_scaled_to_the_longest_costs_little():
    limit = int(settings.POST_BODY_MAX_CHARS)
    body = ("<i><b><div></i>" * (limit // 15 + 1))[:limit]
    baseline = max(best_of(3, render, "x" * limit), 1e-4)
    assert best_of(2, render, body) / baseline < MAX_RATIO


@pytest.mark.django_db
def test_saving_a_post_in_the_admin_renders_its_body_once(as_editor):
    page = as_editor.get(reverse("admin:publishing_post_add"))
    data = form_data(page)
    data.update(title="Once", slug="rendered-once", body="Rendered *once*, with a unique body.")
    with mock.patch.object(
        rendering, "markdown_to_html", wraps=rendering.markdown_to_html
    ) as markdown:
        response = as_editor.post(reverse("admin:publishing_post_add"), data)
    assert response.status_code == 302
    assert markdown.call_count == 1
    assert Post.objects.get(slug="rendered-once").body_html == (
        "<p>Rendered <em>once</em>, with a unique body.</p>\n"
    )


@pytest.mark.django_db
def test_scheduling_a_revision_on_its_page_renders_its_body_once(as_editor):
    post = live_post(title="Live", body="Live body.")
    data = schedule_form(as_editor, post)
    data.update(
        title="Revised",
        body="A revised body, rendered *once*.",
        publish_at_0="2099-07-01",
        publish_at_1="14:00:00",
    )
    with mock.patch.object(
        rendering, "markdown_to_html", wraps=rendering.markdown_to_html
    ) as markdown:
        response = as_editor.post(revisions_url(post), data)
    assert response.status_code == 302
    assert markdown.call_count == 1
    assert post.revisions.get(number=2).body_html == (
        "<p>A revised body, rendered <em>once</em>.</p>\n"
    )
