"""Rendering benchmark: hostile 200,000-character bodies, and ``/`` with ten of them.

Prints, for each hostile pattern, the time to turn Markdown into HTML (target <= 100 ms for
the worst) and the whole save-time render (Markdown, nesting check, nh3 sanitizing, excerpt),
each next to the same for 200,000 characters of plain prose, as a ratio. Then the server time
of ``/`` (Django test client) with ten worst-case posts saved (target <= 20 ms): page views
read the stored HTML and never render.
"""

import os
import statistics
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from publishing import posts, rendering  # noqa: E402
from publishing.models import Post  # noqa: E402

N = 200_000
TARGET_MARKDOWN_MS = 100.0
TARGET_INDEX_MS = 20.0


def repeat(unit: str) -> str:
    return (unit * (N // len(unit) + 1))[:N]


PATTERNS = {
    "unclosed links [a](b": repeat("[a](b "),
    "unclosed brackets [": repeat("["),
    "image brackets ![": repeat("!["),
    "nested emphasis *a **b": repeat("*a **b "),
    "emphasis runs ***a": repeat("***a"),
    "deep nested emphasis": ("*a " * (N // 6) + "b*" * (N // 6))[:N],
    "nested links": ("[" * (N // 5) + "a" + "](b)" * (N // 5))[:N],
    "backticks": repeat("`"),
    "backtick runs": "".join("`" * i + "a" for i in range(1, 700))[:N],
    "deep lists": "".join("  " * i + "- a\n" for i in range(20000))[:N],
    "list markers on one line": repeat("- "),
    "deep blockquotes": ">" * N,
    "blockquote lines": repeat("> > > > > > > > > > a\n"),
    "raw html opens <b>": repeat("<b>"),
    "entities &a": repeat("&a"),
    "table rows": "|a|b|\n|-|-|\n" + repeat("|a|b|\n"),
    "link reference defs": repeat("[a]: b\n"),
}
PROSE = repeat("The quick brown fox jumps over the lazy dog. ")


def best_ms(function, text: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function(text)
        times.append((time.perf_counter() - start) * 1000)
    return min(times)


def main() -> int:
    ok = True
    base_md = best_ms(rendering.markdown_to_html, PROSE)
    base_full = best_ms(rendering.render, PROSE)
    print(
        f"baseline: 200,000 characters of prose: markdown {base_md:.1f} ms, full {base_full:.1f} ms"
    )
    print(
        f"{'pattern':28s} {'markdown ms':>12s} {'ratio':>7s} {'full render ms':>15s} {'ratio':>7s}"
    )
    worst_name, worst_md = "", 0.0
    heaviest_name, heaviest_full = "", 0.0
    for name, text in PATTERNS.items():
        md = best_ms(rendering.markdown_to_html, text)
        full = best_ms(rendering.render, text, runs=1)
        print(f"{name:28s} {md:12.1f} {md / base_md:7.1f} {full:15.1f} {full / base_full:7.1f}")
        if md > worst_md:
            worst_name, worst_md = name, md
        if full > heaviest_full:
            heaviest_name, heaviest_full = name, full
    hit = worst_md <= TARGET_MARKDOWN_MS
    ok &= hit
    print(
        f"worst markdown: {worst_name} {worst_md:.1f} ms "
        f"(target <= {TARGET_MARKDOWN_MS:.0f} ms) {'ok' if hit else 'MISSED'}"
    )

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0)
    try:
        # The pattern whose save-time render is heaviest (the most stored HTML to serve).
        worst_name, worst_text = heaviest_name, PATTERNS[heaviest_name]
        for i in range(10):
            post = posts.save_post(
                post=Post(title=f"Hostile {i}", slug=f"hostile-{i}", body=worst_text), user=None
            )
            posts.publish_now(post=post, user=None)
        client = Client()
        assert client.get("/").status_code == 200
        times = []
        for _ in range(30):
            start = time.perf_counter()
            response = client.get("/")
            times.append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200
        median = statistics.median(times)
        hit = median <= TARGET_INDEX_MS
        ok &= hit
        print(
            f"/ with 10 posts of {worst_name!r}: median {median:.1f} ms, max {max(times):.1f} ms "
            f"(target <= {TARGET_INDEX_MS:.0f} ms) {'ok' if hit else 'MISSED'}"
        )
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
