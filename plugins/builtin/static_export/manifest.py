"""The manifest of a build: what each file was rendered from, read and written in step.

Each kind of page with many files (posts, index pages, sitemap pages) has a list in the
build: one JSON line per file, ``[first, file, key, sha]``, sorted by ``first`` (post id,
page number), the order the export streams them in. ``key`` is what the file was rendered
from; ``sha`` its content's hash. The lists are read forward only, a line at a time, so
memory does not grow with the site. ``.instatic-export.json`` names the lists and holds the
fingerprint, the live posts' key and the content hash; it is written last.
"""

import json
import os
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from plugins.builtin.static_export.folder import Build
from plugins.builtin.static_export.keys import RENDER_VERSION
from plugins.builtin.static_export.layout import CURRENT, MANIFEST


class DamagedList(Exception):
    """A recycled build's list cannot be read to its end: what it holds is not known."""


def line(entry: list) -> str:
    """Return ``entry`` as one line of a list."""
    return json.dumps(entry, separators=(",", ":")) + "\n"


def read_manifest(root: Path) -> dict | None:
    """Return the live build's manifest, or None when there is no (readable) live build."""
    try:
        return json.loads((root / CURRENT / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def manifest_of(build: Build, *, fingerprint: str, key: str) -> dict:
    """Return the manifest of a complete ``build`` of the live posts ``key``."""
    return {
        "version": RENDER_VERSION,
        "fingerprint": fingerprint,
        "source_key": key,
        "content_hash": build.content_hash,
        "files": build.files,
        "small": build.small,
        "lists": build.lists,
        "created_at": datetime.now(UTC).isoformat(),
    }


def write_manifest(folder: Path, manifest: dict) -> None:
    """Write the manifest atomically, as the last file of a build."""
    temporary = folder / f"{MANIFEST}.{uuid.uuid4().hex}"
    temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(temporary, folder / MANIFEST)


def build_files(build: Path, manifest: dict) -> Iterable[str]:
    """Yield every file of a complete build, from its manifest: its manifest last."""
    yield from manifest["small"]
    for name in manifest["lists"]:
        with open(build / name, encoding="utf-8") as listed:
            for entry in listed:
                yield json.loads(entry)[1]
        yield name
    yield MANIFEST


class ForwardReader:
    """A build's manifest list, read forward only, one line at a time (never held whole).

    Only a line's first field is parsed to skip it; whole entries are parsed when needed.
    ``strict``: a damaged line raises ``DamagedList`` (else the rest is taken as absent).
    """

    def __init__(self, path: str, *, strict: bool = False):
        self.strict = strict
        self.count = 0  # lines consumed
        try:
            self._file = open(path, encoding="utf-8")  # noqa: SIM115 (closed by close())
        except OSError:
            if strict:
                raise DamagedList(f"{path} cannot be read") from None
            self._file = None
        self._next = self._read()

    def _damaged(self, what: str) -> None:
        if self.strict:
            raise DamagedList(what)
        self._next = None
        self.close()

    def _read(self) -> str | None:
        text = self._file.readline() if self._file is not None else ""
        if text and not text.endswith("\n"):
            self._damaged("a list ends in the middle of a line")
            return None
        return text or None

    def _first(self) -> int | None:
        try:
            return int(self._next[1 : self._next.index(",")])
        except ValueError:
            self._damaged(f"a list's line is damaged: {self._next[:80]!r}")
            return None

    def _pop(self) -> tuple[list, str] | None:
        text, self._next = self._next, self._read()
        self.count += 1
        try:
            return json.loads(text), text
        except ValueError:
            self._damaged(f"a list's line is damaged: {text[:80]!r}")
            return None

    def take(self, first: int, skipped: Callable[[list], None] | None = None):
        """Return ``(entry, line)`` for ``first``, or None; entries before it go to ``skipped``."""
        while self._next is not None:
            current = self._first()
            if current is None or current > first:
                return None
            if current < first and skipped is None:  # not needed: not parsed
                self._next = self._read()
                self.count += 1
                continue
            found = self._pop()
            if found is None:
                return None
            if current == first:
                return found
            skipped(found[0])
        return None

    def drain(self, skipped: Callable[[list], None]) -> None:
        """Hand every entry left to ``skipped``."""
        while self._next is not None:
            found = self._pop()
            if found is not None:
                skipped(found[0])

    def close(self) -> None:
        """Close the list's file (reading on finds nothing)."""
        if self._file is not None:
            self._file.close()
            self._file = None


class ManifestList:
    """One manifest list of the build being written, beside those of the builds it reuses.

    ``mine``: the same list of the recycled build being written over (what its files are);
    ``theirs``: the live build's (what can be hard-linked from it). Both are read in step with
    the stream, one line at a time. The new list is written beside and replaces the old one
    when the pass completes.
    """

    def __init__(self, build: Build, name: str):
        self.build = build
        self.name = name
        self.count = 0
        self.mine = ForwardReader(build.path(name), strict=True) if build.recycled else None
        self.theirs = ForwardReader(os.path.join(build.base, name)) if build.base else None
        self._new = build.path(f"{name}.new")
        self._out = open(self._new, "w", encoding="utf-8")  # noqa: SIM115 (closed in __exit__)

    def __enter__(self) -> "ManifestList":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if kind is None and self.mine is not None:
                self.mine.drain(self._gone)
                expected = self.build.old_lists.get(self.name)
                if expected is not None and self.mine.count != expected:
                    raise DamagedList(f"{self.name}: {self.mine.count} of {expected} lines")
        finally:
            for reader in (self.mine, self.theirs):
                if reader is not None:
                    reader.close()
            self._out.close()
        if kind is None:
            os.replace(self._new, self.build.path(self.name))
            self.build.lists[self.name] = self.count

    def _gone(self, entry: list) -> None:
        self.build.remove(entry[1], entry[3])

    def reuse(self, first: int, relative: str, key: str) -> tuple[tuple[str, str] | None, bool]:
        """Return ``((sha, line), in_place)``; ``(sha, line)`` when the file for ``first``
        needs no rendering (the build has it already, or it was hard-linked from the live
        build), else None: render it. ``in_place``: the build had this page at this name.
        """
        in_place = False
        if self.mine is not None:
            found = self.mine.take(first, self._gone)
            if found is not None:
                entry, text = found
                in_place = entry[1] == relative
                if in_place and entry[2] == key and self.build.trusted:
                    self.build.kept()
                    return (entry[3], text), True
                if not in_place:
                    self.build.remove(entry[1], entry[3])  # a changed slug: the old page goes
        if self.theirs is not None:
            found = self.theirs.take(first)
            if found is not None:
                entry, text = found
                if (
                    entry[1] == relative
                    and entry[2] == key
                    and self.build.link(relative, in_place=in_place)
                ):
                    return (entry[3], text), in_place
        return None, in_place

    def add(self, relative: str, sha: str, text: str) -> None:
        """Count a file of the build (in list order) and write its line."""
        self.build.count(relative, sha)
        self._out.write(text)
        self.count += 1
