"""Where a folder's own files are published: its git remotes' web addresses, and a link to one read as its file.

A repository's pages often link its own files by their address on the forge
(``https://github.com/<owner>/<repo>/blob/main/CONTRIBUTING.md``), which names
no file of the folder to a link detector. :func:`published_at` reads the
remotes of the git work tree holding the folder (``.git/config``, following a
``gitdir:`` file and a linked work tree's ``commondir``) and gives each as the
address its files are published under; :func:`published_path` reads a link to
one of those files back as the file's path from the folder's root.

Addresses understood (``<ref>`` one path segment: a branch, a tag or a commit):
``https://github.com/<owner>/<repo>/(blob|tree|raw|edit)/<ref>/<path>``,
``https://raw.githubusercontent.com/<owner>/<repo>/<ref>/<path>``,
``https://gitlab.com/<group>/.../<repo>/-/(blob|tree|raw)/<ref>/<path>`` and
``https://bitbucket.org/<owner>/<repo>/src/<ref>/<path>``, on whatever host the
remote names. The host, owner and repository are compared case-insensitively,
as the forges do.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path
from urllib.parse import unquote

# a remote's URL: scheme://[user@]host[:port]/path, or scp-like [user@]host:path
_URL = re.compile(r"(?:[a-z][a-z0-9+.-]*://)?(?:[^@/]+@)?([^/:]+)(?::\d+)?[:/](.+?)(?:\.git)?/?$", re.I)
# a link's address: its host and path, the query dropped, the fragment kept apart
_LINK = re.compile(r"https?://(?:www\.)?([^/?#\s]+)/([^?#\s]*)(?:\?[^#\s]*)?(?:#(\S*))?$", re.I)
# what follows the repository in a forge's address of a file: GitHub's and GitLab's views, Bitbucket's source,
# then the ref
_VIEW = re.compile(r"(?:-/)?(?:blob|tree|raw|edit|src)/[^/]+/")
_RAW_HOSTS = {"raw.githubusercontent.com": "github.com"}


def published_at(root: Path) -> tuple[str, ...]:
    """Each remote of the git work tree holding ``root`` as ``host/owner/repo`` (lowercase), then a NUL and the
    folder's path inside the work tree (empty when it is the work tree); sorted, repeats dropped. Empty when
    ``root`` is in no work tree or its config cannot be read."""
    root = root.resolve()
    for top in (root, *root.parents):
        dot_git = top / ".git"
        if dot_git.exists():
            break
    else:
        return ()
    inside = root.relative_to(top).as_posix()
    inside = "" if inside == "." else inside + "/"
    return tuple(sorted({f"{remote}\0{inside}" for remote in _remotes(_git_dir(dot_git))}))


def _git_dir(dot_git: Path) -> Path:
    """The directory holding the config: ``.git`` itself, or where a ``.git`` file (a submodule's, a linked work
    tree's) points, and that one's common directory."""
    git_dir = dot_git
    if dot_git.is_file():
        try:
            line = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return dot_git
        if line.startswith("gitdir:"):
            git_dir = (dot_git.parent / line[len("gitdir:"):].strip()).resolve()
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return git_dir
    return (git_dir / common).resolve()


def _remotes(git_dir: Path) -> set[str]:
    config = configparser.ConfigParser(strict=False, interpolation=None)
    try:
        config.read(git_dir / "config", encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return set()
    found = set()
    for section in config.sections():
        if section.startswith("remote ") and config.has_option(section, "url"):
            match = _URL.match(config.get(section, "url").strip())
            if match is not None and "/" in match.group(2):
                found.add(f"{match.group(1)}/{match.group(2).strip('/')}".lower())
    return found


def published_path(address: str, published: tuple[str, ...]) -> str | None:
    """``address`` read back as a file of the folder: its path from the folder's root, ``#`` and the fragment
    when it has one; None when it is no file address of one of ``published`` (see :func:`published_at`), or
    names a file outside the folder."""
    if not published:
        return None
    link = _LINK.match(address.strip().strip("<>"))
    if link is None:
        return None
    host, path, fragment = link.group(1).lower(), unquote(link.group(2)), link.group(3)
    raw = _RAW_HOSTS.get(host)  # raw.githubusercontent.com/<owner>/<repo>/<ref>/<path>: no view, the ref alone
    where = f"{raw or host}/{path}"
    for entry in published:
        remote, _, folder = entry.partition("\0")
        if not where.lower().startswith(remote + "/"):
            continue
        # the view is read after the repository the remote names, so a repository called src or raw is one
        rest = where[len(remote) + 1:]
        if raw:
            ref_end = rest.find("/") + 1
        else:
            view = _VIEW.match(rest)
            ref_end = view.end() if view else 0
        inner = rest[ref_end:]
        if ref_end and inner.startswith(folder):
            return inner[len(folder):].rstrip("/") + (f"#{unquote(fragment)}" if fragment else "")
    return None
