"""Where a folder is published (its git remotes' forge addresses), and a link to one of its files by that address."""

from __future__ import annotations

import pytest

from xerj_core.autoindex.detect import Corpus
from xerj_core.autoindex.pipeline import run
from xerj_core.autoindex.published import published_at, published_path

from .test_autoindex import edges_of

CONFIG = """[core]
\trepositoryformatversion = 0
[remote "origin"]
\turl = git@github.com:Owner/Repo.git
\tfetch = +refs/heads/*:refs/remotes/origin/*
[remote "mirror"]
\turl = https://gitlab.com/group/sub/project.git
[branch "main"]
\tremote = origin
"""


@pytest.fixture
def work_tree(tmp_path):
    """A git work tree (its config written as git writes it: no git needed) with a docs/ folder."""
    top = tmp_path / "repo"
    (top / ".git").mkdir(parents=True)
    (top / ".git" / "config").write_text(CONFIG)
    (top / "docs").mkdir()
    return top


def test_a_work_trees_remotes_are_where_it_and_its_folders_are_published(work_tree, tmp_path):
    assert published_at(work_tree) == ("github.com/owner/repo\0", "gitlab.com/group/sub/project\0")
    assert published_at(work_tree / "docs") == ("github.com/owner/repo\0docs/", "gitlab.com/group/sub/project\0docs/")
    # a linked work tree (git worktree add): a .git file naming its git directory, whose commondir has the config
    linked = tmp_path / "linked"
    linked.mkdir()
    (work_tree / ".git" / "worktrees" / "linked").mkdir(parents=True)
    (work_tree / ".git" / "worktrees" / "linked" / "commondir").write_text("../..\n")
    (linked / ".git").write_text(f"gitdir: {work_tree / '.git' / 'worktrees' / 'linked'}\n")
    assert published_at(linked) == published_at(work_tree)
    outside = tmp_path / "plain"
    outside.mkdir()
    assert published_at(outside) == () or all(not e.startswith("github.com/owner/repo") for e in published_at(outside))


@pytest.mark.parametrize(("address", "path"), [
    ("https://github.com/owner/repo/blob/main/docs/guide.md", "guide.md"),
    ("https://GitHub.com/Owner/Repo/blob/v2.0/docs/guide.md#install", "guide.md#install"),
    ("https://github.com/owner/repo/tree/main/docs/how-to/", "how-to"),
    ("https://github.com/owner/repo/edit/main/docs/a%20b.md", "a b.md"),
    ("https://github.com/owner/repo/blob/main/docs/guide.md?plain=1#L3", "guide.md#L3"),
    ("https://raw.githubusercontent.com/owner/repo/main/docs/guide.md", "guide.md"),
    ("https://gitlab.com/group/sub/project/-/blob/main/docs/guide.md", "guide.md"),
    ("<https://github.com/owner/repo/blob/main/docs/guide.md>", "guide.md"),
    ("https://github.com/owner/repo/blob/main/src/app.py", None),  # outside the indexed folder
    ("https://github.com/owner/other/blob/main/docs/guide.md", None),  # another repository
    ("https://github.com/owner/repo", None),  # the repository's page, no file
    ("https://github.com/owner/repo/issues/12", None),
    ("https://example.com/owner/repo/blob/main/docs/guide.md", None),
])
def test_an_address_of_a_file_of_the_folder_is_read_back_as_its_path(work_tree, address, path):
    assert published_path(address, published_at(work_tree / "docs")) == path


def test_a_repository_named_like_a_view_is_read_after_its_name():
    published = ("github.com/owner/src\0",)
    assert published_path("https://github.com/owner/src/blob/main/src/x.md", published) == "src/x.md"
    assert published_path("https://github.com/owner/src/x.md", published) is None  # no view, no ref
    assert published_path("https://github.com/owner/srcs/blob/main/x.md", published) is None


def test_where_a_folder_is_published_is_part_of_what_names_answer_from():
    """Remembered detections are reused while the corpus's names digest holds: a remote added changes it."""
    files = {"a.md": ()}
    assert Corpus(files).names_digest() != Corpus(files, published=("github.com/o/r\0",)).names_digest()


def test_autoindex_links_a_page_to_a_file_by_its_forge_address(engine, work_tree):
    docs = work_tree / "docs"
    (docs / "README.md").write_text("# Docs\n\nSee the [guide](https://github.com/owner/repo/blob/main/docs/guide.md"
                                    "#install), the [app](https://github.com/owner/repo/blob/main/src/app.py) and "
                                    "[elsewhere](https://github.com/someone/else/blob/main/docs/guide.md).\n")
    (docs / "guide.md").write_text("# Guide\n\n## Install\n\nSteps.\n")
    (work_tree / "src").mkdir()
    (work_tree / "src" / "app.py").write_text('"""The app."""\n')
    run(engine, docs, brain="docs")
    links = sorted((e["src"], e["dst"]) for e in edges_of(engine, "docs").values() if e["type"] == "mdlink")
    assert links == [("README.md#docs", "guide.md#install")]
    run(engine, work_tree, brain="whole")  # the work tree itself: the app is a file of the folder now
    links = sorted((e["src"], e["dst"]) for e in edges_of(engine, "whole").values() if e["type"] == "mdlink")
    assert links == [("docs/README.md#docs", "docs/guide.md#install"), ("docs/README.md#docs", "src/app.py")]
