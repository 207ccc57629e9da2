"""A build being written: its files, the lists it has written and the running content hash.

A file is never written into: it is unlinked and created anew, since in a build rewritten in
place its inode may be shared (hard-linked) with the live build.
"""

import hashlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from plugins.builtin.static_export.layout import make_parent, normal


def file_sha(path: str) -> str:
    """Return the hash of a file's content."""
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()


class Build:
    """A build being written: its files, the manifest lists and the running content hash.

    A *recycled* build already holds a complete earlier build (its lists say what): pages
    whose key did not change are left as they are (when it is ``trusted``: rendered the way
    this export renders), others replaced, and pages the site no longer has removed.
    """

    def __init__(
        self,
        folder: Path,
        base: Path | None,
        *,
        recycled: bool = False,
        trusted: bool = True,
        small: Iterable[str] = (),
        lists: dict[str, int] | None = None,
        name: str | None = None,
    ):
        self.folder = str(folder)
        self.name = name  # where a recycled build was in builds/
        self.trusted = trusted
        self.base = str(base) if base is not None else None
        self.recycled = recycled
        self.old_small = list(small)  # the always-rendered files the recycled build has
        self.old_lists = dict(lists or {})  # the recycled build's lists and their lengths
        self.small: list[str] = []
        self.lists: dict[str, int] = {}
        # Files this pass wrote where the recycled build had another page (a slug that moved
        # from one post to another) or none: not to be removed as that other page's.
        self._moved_in: set[str] = set()
        self._digest = hashlib.sha256()
        self.files = 0
        self.rendered = 0
        self.reused = 0

    def again(self) -> "Build":
        """Return this folder as a build to rewrite in place (another pass over it)."""
        return Build(
            Path(self.folder),
            Path(self.base) if self.base else None,
            recycled=True,
            small=self.small,
            lists=self.lists,
            name=self.name,
        )

    def path(self, relative: str) -> str:
        """Return the path of ``relative`` in this build's folder."""
        return os.path.join(self.folder, relative)

    def _target(self, relative: str, *, in_place: bool) -> str:
        """Return the path to create ``relative`` at: its folder made, no file left there.

        ``in_place``: the recycled build has the same page there (an earlier version of it).
        """
        normalized = normal(relative)
        path = self.path(normalized)
        make_parent(self.folder, normalized)
        if self.recycled:
            if not in_place:
                self._moved_in.add(normalized)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return path

    def write(self, relative: str, content: bytes, *, in_place: bool = False) -> str:
        """Write a rendered file; return its hash."""
        with open(self._target(relative, in_place=in_place), "xb") as stream:
            stream.write(content)
        self.rendered += 1
        return hashlib.sha256(content).hexdigest()

    def link(self, relative: str, *, in_place: bool = False) -> bool:
        """Hard-link (else copy) a file of the base build; False when it is not there."""
        if self.base is None:
            return False
        source = os.path.join(self.base, relative)
        target = self._target(relative, in_place=in_place)
        try:
            os.link(source, target)
        except FileNotFoundError:
            return False
        except OSError:  # another filesystem, no hard links, too many links: copy
            try:
                shutil.copyfile(source, target)
            except FileNotFoundError:
                return False
        self.reused += 1
        return True

    def kept(self) -> None:
        """Count a file a recycled build already has as it should be."""
        self.reused += 1

    def remove(self, relative: str, sha: str | None = None) -> None:
        """Delete a file a recycled build has and the site no longer does (and emptied folders).

        Only a page of the earlier build goes: not if this pass wrote another page there
        (another post took the slug), nor, given the ``sha`` the list gives it, if the file
        there is not that page (slugs traded while an earlier pass ran left another post's
        page there). A fresh build has nothing to remove.
        """
        if not self.recycled:
            return
        normalized = normal(relative)
        if normalized in self._moved_in:
            return
        try:
            if sha is not None and file_sha(self.path(normalized)) != sha:
                return
            os.unlink(self.path(normalized))
        except FileNotFoundError:
            pass
        parent = os.path.dirname(normalized)
        while parent:
            try:
                os.rmdir(self.path(parent))
            except OSError:  # not empty (or gone)
                break
            parent = os.path.dirname(parent)

    def count(self, relative: str, sha: str) -> None:
        """Add a file to the content hash (in manifest order, the same for the same site)."""
        self._digest.update(f"{relative}\0{sha}\n".encode())
        self.files += 1

    def write_small(self, relative: str, content: bytes) -> None:
        """Write one of the files rendered on every export (the feed, the sitemap index...)."""
        self.count(relative, self.write(relative, content, in_place=True))
        self.small.append(normal(relative))

    def remove_old_small(self) -> None:
        """Remove the recycled build's always-rendered files this pass did not write."""
        for relative in self.old_small:
            if relative not in self.small:
                self.remove(relative)

    @property
    def content_hash(self) -> str:
        """Return the hash of the files counted so far, in manifest order."""
        return self._digest.hexdigest()
