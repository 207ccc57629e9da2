"""Markdown rendering and sanitizing: the one function every public page and the feed use."""

import pytest

from publishing.rendering import RenderError, excerpt, render_body, render_markdown


def test_markdown_is_rendered():
    html = render_markdown("# Title\n\nSome *emphasis*, `code` and a [link](https://example.com).")
    assert "<h1>Title</h1>" in html
    assert "<em>emphasis</em>" in html and "<code>code</code>" in html
    assert '<a href="https://example.com" rel="noopener noreferrer nofollow">link</a>' in html


def test_tables_and_fenced_code():
    html = render_markdown("| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nx = 1\n```")
    assert "<table>" in html and "<td>1</td>" in html
    assert '<code class="language-python">x = 1' in html


@pytest.mark.parametrize(
    ("body", "forbidden"),
    [
        ("<script>alert(1)</script>", "<script"),
        ('<img src="x" onerror="alert(1)">', "onerror"),
        ("[x](javascript:alert(1))", "javascript:"),
        ("[x](JaVaScRiPt:alert(1))", "javascript:"),
        ('<a href="data:text/html,<script>alert(1)</script>">x</a>', "data:"),
        ('<iframe src="https://evil.example"></iframe>', "<iframe"),
        ('<p style="color:red">x</p>', "style="),
        ("<!-- hidden --> text", "hidden"),
    ],
)
def test_dangerous_markup_is_removed(body, forbidden):
    assert forbidden not in render_markdown(body).lower()


def test_mailto_links_are_kept():
    assert 'href="mailto:a@example.com"' in render_markdown("[mail](mailto:a@example.com)")


def test_html_nested_too_deep_is_a_render_error_and_render_body_degrades_to_text():
    with pytest.raises(RenderError, match="more than 100 deep"):
        render_markdown(">" * 101 + " x")
    assert render_body("<b>" * 101) == "<pre>" + "&lt;b&gt;" * 101 + "</pre>"
    assert "<blockquote>" in render_markdown(">" * 20 + " x"), "ordinary nesting renders"


def test_closed_and_void_elements_do_not_count_as_nesting():
    render_markdown("<b>x</b><br><img src='/a.png'>" * 500 + "</x>" * 50)


def test_excerpt_is_plain_text():
    text = excerpt("Hello **world** & <script>alert(1)</script> friends " + "word " * 100, words=5)
    assert text == "Hello world & friends word …"
