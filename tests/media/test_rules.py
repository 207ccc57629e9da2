"""The media app's pure rules, as tables: refusals, paths, keys in texts, who sees what."""

import pytest

from media import rules

MB = 1024 * 1024


@pytest.mark.parametrize(
    ("name", "refused", "words"),
    [
        ("photo.jpg", False, ""),
        ("photo.JPEG", False, ""),
        ("a.png", False, ""),
        ("a.gif", False, ""),
        ("a.webp", False, ""),
        ("logo.svg", True, "SVG files are not accepted"),
        ("logo.SVGZ", True, "SVG files are not accepted"),
        ("run.exe", True, "has .exe"),
        ("photo.jpg.php", True, "has .php"),
        ("noextension", True, "has no extension"),
        ("", True, "has no extension"),
    ],
)
def test_names(name, refused, words):
    problem = rules.name_refusal(name)
    assert (problem is not None) == refused
    if refused:
        assert words in problem


@pytest.mark.parametrize(
    ("size", "problem"),
    [
        (0, "The file is empty."),
        (1, None),
        (20 * MB, None),
        (20 * MB + 1, "The file is 20 MB; the largest accepted is 20 MB."),
        (31 * MB, "The file is 31 MB; the largest accepted is 20 MB."),
    ],
)
def test_sizes(size, problem):
    found = rules.size_refusal(size, max_bytes=20 * MB)
    assert (found or None) == problem or (problem and found.startswith(problem))


@pytest.mark.parametrize(
    ("name", "format", "size", "frames", "words"),
    [
        ("a.jpg", "JPEG", (100, 100), 1, None),
        ("a.jpeg", "JPEG", (100, 100), 1, None),
        ("a.png", "JPEG", (100, 100), 1, "is a JPEG image but its name ends in .png"),
        ("a.jpg", None, (0, 0), 1, "is not a JPEG, PNG, GIF or WebP image"),
        ("a.jpg", "TIFF", (10, 10), 1, "is not a JPEG, PNG, GIF or WebP image"),
        ("a.png", "PNG", (10_000, 10_001), 1, "the most accepted is 100 megapixels"),
        ("a.png", "PNG", (10_000, 10_000), 1, None),
        ("a.gif", "GIF", (10, 10), 3, "is animated"),
        ("a.png", "PNG", (0, 10), 1, "has no pixels"),
    ],
)
def test_headers(name, format, size, frames, words):
    problem = rules.image_refusal(
        name=name,
        format=format,
        width=size[0],
        height=size[1],
        frames=frames,
        max_pixels=100_000_000,
    )
    if words is None:
        assert problem is None
    else:
        assert words in problem


@pytest.mark.parametrize(
    ("alt", "refused"), [("", True), ("   ", True), ("A cat", False), ("x" * 501, True)]
)
def test_alt_text(alt, refused):
    assert (rules.alt_refusal(alt) is not None) == refused


@pytest.mark.parametrize(
    ("width", "made"),
    [(100, []), (480, []), (481, [480]), (1200, [480, 960]), (5000, [480, 960, 1600])],
)
def test_widths(width, made):
    assert rules.widths_for(width, (1600, 480, 960)) == made


@pytest.mark.parametrize(
    ("original", "format", "name"),
    [
        ("Team Photo.JPG", "JPEG", "team-photo.jpg"),
        ("../../etc/passwd.png", "PNG", "passwd.png"),
        ("ünïcode ©.jpeg", "JPEG", "unicode.jpg"),
        ("....png", "PNG", "image.png"),
        ("x" * 300 + ".webp", "WEBP", "x" * 80 + ".webp"),
    ],
)
def test_file_names(original, format, name):
    assert rules.file_name(original, format) == name


def test_paths():
    key = "a" * 20
    assert rules.storage_path(key, "p.jpg") == f"images/{key}/p.jpg"
    assert rules.storage_path(key, "p.jpg", width=480, webp=True) == f"images/{key}/480/p.webp"
    assert rules.public_path(key, "p.jpg", width=960) == f"/media/{key}/960/p.jpg"


def test_keys_in_texts():
    one, two = "0123456789abcdef0123", "fedcba9876543210fedc"
    body = f"![a](/media/{one}/a.jpg) and <img src='/media/{two}/480/b.png'> /media/short/x"
    assert rules.keys_in(body, "", f"/media/{one.upper()}/x.jpg") == {one, two}


@pytest.mark.parametrize(
    ("public", "editor", "preview", "allowed", "cache"),
    [
        (True, False, False, True, "public, max-age=60"),
        (True, True, False, True, "public, max-age=60"),
        (False, True, False, True, rules.PRIVATE),
        (False, False, True, True, rules.PRIVATE),
        (False, False, False, False, ""),
    ],
)
def test_access(public, editor, preview, allowed, cache):
    decision = rules.decide_access(public=public, editor=editor, preview=preview, max_age=60)
    assert (decision.allowed, decision.cache_control) == (allowed, cache)


@pytest.mark.parametrize(
    ("accept", "webp"),
    [("image/avif,image/webp,*/*", True), ("image/png,*/*", False), ("", False)],
)
def test_webp_negotiation(accept, webp):
    assert rules.wants_webp(accept) is webp
