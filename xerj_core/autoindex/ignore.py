"""Which paths a folder's ignore files leave out of a walk: ``.gitignore`` and ``.xerjignore``, read as git reads them.

A folder of code holds what its owner never wrote: a ``venv/`` of thousands of
installed modules, ``node_modules/``, ``build/`` copies of every source. Their
``.gitignore`` already says so, so the walk honours it the way git does: each
ignore file governs its own directory and everything below it, a deeper file
overrides a shallower one, the last matching line of a file wins, ``!pattern``
takes a path back, and a directory left out is not entered (nothing inside it
can be taken back). ``.xerjignore`` has the same syntax and is read after the
``.gitignore`` beside it, so it can leave out more for xerj alone, or take back
(``!notes/``) what git ignores. Patterns are matched by ``pathspec``, which
implements git's wildmatch rules (``**``, anchoring, directory-only patterns,
escapes) so they are not re-derived here.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pathspec
from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

# Read in each directory in this order: a later file's verdict overrides an earlier one's.
IGNORE_FILES = (".gitignore", ".xerjignore")


@attrs.frozen
class IgnoreFile:
    """One ignore file's compiled lines and the directory they govern.

    Paths are matched from the repository's top (the root itself outside a
    repository), so a file above the root and one inside it read the same kind
    of path: the file's own directory (``strip`` characters) comes off first.
    """

    name: str  # how a reason names it: root-relative, or absolute for a file above the root
    spec: pathspec.GitIgnoreSpec
    strip: int = 0

    def verdict(self, path: str, is_dir: bool) -> tuple[bool, int] | None:
        """(left out, 0-based line) of the last line matching ``path``, or None when no line speaks of it."""
        found = self.spec.check_file(f"{path[self.strip:]}/" if is_dir else path[self.strip:])
        return None if found.include is None else (found.include, found.index)


def compile_file(path: Path, name: str, base: str) -> IgnoreFile:
    """``path``'s lines, governing ``base`` (its directory below the top, '' the top); raises OSError when it
    cannot be read."""
    text = path.read_bytes().decode("utf-8", "replace")
    # pathspec drops blank lines from its patterns; a comment in their place keeps each pattern at its line's index
    lines = [line if line.strip() else "#" for line in text.splitlines()]
    return IgnoreFile(name, pathspec.GitIgnoreSpec.from_lines(lines, _pattern), len(base) + 1 if base else 0)


def _pattern(line: str) -> GitIgnoreSpecPattern:
    """``line``'s pattern, or a comment's (matching nothing) for a line git passes over and pathspec refuses (a
    lone ``!``, a trailing ``\\``): one bad line in a repository's ``.gitignore`` must not stop a run."""
    try:
        return GitIgnoreSpecPattern(line)
    except ValueError:  # pathspec's GitIgnorePatternError
        return GitIgnoreSpecPattern("#")


def _files_of(directory: Path, base: str, name_of) -> list[IgnoreFile]:
    return [compile_file(directory / name, name_of(name), base)
            for name in IGNORE_FILES if (directory / name).is_file()]


def _why(rules: tuple[IgnoreFile, ...], path: str, is_dir: bool) -> str | None:
    for rule in reversed(rules):
        verdict = rule.verdict(path, is_dir)
        if verdict is not None:
            left_out, index = verdict
            return f"ignored by {rule.name} line {index + 1}: {rule.spec.patterns[index].pattern}" \
                if left_out else None
    return None


@attrs.frozen
class Scope:
    """The ignore files in force in one directory of a walk, outermost first."""

    prefix: str = ""  # the root's path below the repository's top, with its slash ('' outside one)
    rules: tuple[IgnoreFile, ...] = ()

    def enter(self, directory: Path, rel_dir: str, names: set[str]) -> "Scope":
        """This scope with the ignore files among ``names`` (``directory``'s entries, ``rel_dir`` under the root)
        added; raises OSError for one that cannot be read."""
        if not any(name in names for name in IGNORE_FILES):
            return self
        base = f"{self.prefix}{rel_dir}".rstrip("/")
        added = _files_of(directory, base, lambda name: f"{rel_dir}/{name}" if rel_dir else name)
        return attrs.evolve(self, rules=(*self.rules, *added)) if added else self

    def why_ignored(self, rel: str, is_dir: bool) -> str | None:
        """Why the walk leaves ``rel`` (root-relative) out, naming the file, line and pattern that matched it
        last, or None to walk it."""
        return _why(self.rules, f"{self.prefix}{rel}", is_dir) if self.rules else None


def scope_of(root: Path) -> Scope:
    """What a repository holding ``root`` applies to it: its ``.git/info/exclude`` and the ignore files of each
    directory from its top down to ``root``'s parent. No rules when ``root`` is not inside a git work tree, when
    they cannot be read, or when they leave ``root`` itself out: a folder named on purpose is indexed, under its
    own ignore files only.
    """
    root = root.resolve()
    top = next((d for d in (root, *root.parents) if (d / ".git").exists()), None)
    if top is None:
        return Scope()
    steps = root.relative_to(top).parts
    prefix = "".join(f"{step}/" for step in steps)
    rules: list[IgnoreFile] = []
    try:
        exclude = top / ".git" / "info" / "exclude"
        if exclude.is_file():
            rules.append(compile_file(exclude, str(exclude), ""))
        for depth in range(len(steps) + 1):
            base = "/".join(steps[:depth])
            if depth and _why(tuple(rules), base, True):
                return Scope(prefix)  # the root, or a directory above it, is one the repository leaves out
            if depth < len(steps):
                directory = top.joinpath(*steps[:depth])
                rules.extend(_files_of(directory, base, lambda name, d=directory: str(d / name)))
    except OSError:
        return Scope(prefix)  # the repository's rules, unreadable, are not guessed at
    return Scope(prefix, tuple(rules))
