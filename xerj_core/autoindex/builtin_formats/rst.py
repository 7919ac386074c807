"""reStructuredText (Sphinx documentation): a file card plus one section document per section title.

A section title is a line of text at the left margin underlined, or over- and
underlined, by a line repeating one punctuation character, at least as long as
the title (``Install\\n=======``); it follows a blank line, another title or the
start of the file. Levels go by adornment style in order of first use, as
docutils assigns them. A section runs to the next title of any level; its text
starts with its title line (adornments left out), its label is the title and
its id is ``{path}#{anchor}`` (a slug made unique within the file, as Markdown's
are). The card's text is what precedes the first title, its title the
``.. title::`` directive, else the first section title, else the file name
without extension.

A label (``.. _install-guide:``, what ``:ref:`` roles name) belongs to the
section it opens when a title follows it (with nothing but blank lines and
other labels between), else to the section it is written in (the card before
the first title); a document lists its own in ``labels``, lowercased with its
whitespace made single spaces, as Sphinx compares them.

What links a Sphinx tree (``toctree`` entries, ``:doc:`` and ``:ref:`` roles,
``include`` and ``image`` directives) is left in the text for the ``rstlink``
detector.
"""

from __future__ import annotations

import re

from xerj_core import hookimpl
from xerj_core.autoindex.builtin_formats._common import Anchors, document, labels_at
from xerj_core.autoindex.formats import decode_text, extension, stem
from xerj_core.model import SourceDocument

EXTENSIONS = frozenset({".rst", ".rest"})

# A line of one punctuation character repeated (docutils accepts any of these as adornment).
_ADORNMENT = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])\1*[ \t]*""")
_TITLE_DIRECTIVE = re.compile(r"^\.\. title::[ \t]+(.+?)[ \t]*$", re.M)
# an internal hyperlink target: ``.. _name:`` alone on its line (one with a URL after the colon is external)
_LABEL = re.compile(r"^\.\. _([^:`\n][^:\n]*|`[^`\n]+`):[ \t]*$", re.M)
_BLANK_OR_LABEL = re.compile(r"(?:[ \t]*\n|\.\. _(?:[^:`\n][^:\n]*|`[^`\n]+`):[ \t]*\n)*")


def _adornment(line: str) -> str | None:
    """The character ``line`` repeats, when it is an adornment line, else None."""
    return line[0] if len(line) >= 2 and _ADORNMENT.fullmatch(line) else None


def _is_title_text(line: str) -> bool:
    """Whether ``line`` may be a title: at the left margin, not blank, not an explicit markup line (``..``)."""
    return bool(line) and not line[0].isspace() and not line.startswith("..") and _adornment(line) is None


def sections(text: str) -> list[tuple[int, int, int, str]]:
    """The section titles of ``text`` as ``(start, end, level, label)``: the title's first and past-its-last
    character offsets (adornments included), its level from 1, and its text."""
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    styles: dict[tuple[str, bool], int] = {}
    found: list[tuple[int, int, int, str]] = []
    i, after_break = 0, True  # after_break: the previous line is blank, a title's last line, or none
    while i < len(lines):
        line = lines[i]
        mark = _adornment(line)
        if (after_break and mark is not None and i + 2 < len(lines) and _is_title_text(lines[i + 1].strip())
                and lines[i + 2].rstrip() == line.rstrip() and len(line.rstrip()) >= len(lines[i + 1].strip())):
            style, label, last = (mark, True), lines[i + 1].strip(), i + 2
        elif (after_break and _is_title_text(line) and i + 1 < len(lines)
              and (under := _adornment(lines[i + 1])) is not None
              and len(lines[i + 1].rstrip()) >= len(line.rstrip())):
            style, label, last = (under, False), line.strip(), i + 1
        else:
            after_break = not line.strip()
            i += 1
            continue
        level = styles.setdefault(style, len(styles) + 1)
        found.append((starts[i], starts[last] + len(lines[last]), level, label))
        i, after_break = last + 1, True
    return found


class RstFormat:
    """reStructuredText into ``ax-notes``: a card and one section per section title."""

    name = "rst"
    dataset = "ax-notes"
    priority = 10

    def accepts(self, rel_path: str, head: bytes) -> bool:
        return extension(rel_path) in EXTENSIONS

    def parse(self, rel_path: str, data: bytes, mtime_ms: int) -> list[SourceDocument]:
        decoded = decode_text(data, rel_path)
        text = decoded.text
        found = sections(text)
        directive = _TITLE_DIRECTIVE.search(text)
        title = (directive.group(1) if directive else "") or next((label for *_, label in found), "") \
            or stem(rel_path)
        preamble_end = found[0][0] if found else len(text)
        docs = [document(self, rel_path, mtime_ms, doc_id=rel_path, title=title, text=text[:preamble_end].strip(),
                         section="", kind="file", ordinal=0, encoding=decoded.encoding)]
        anchors = Anchors()
        ends = [start for start, *_ in found[1:]] + [len(text)]
        for ordinal, ((start, title_end, level, label), end) in enumerate(zip(found, ends), 1):
            anchor = anchors(label)
            body = (label + "\n\n" + text[title_end:end].strip()).strip()
            docs.append(document(self, rel_path, mtime_ms, doc_id=f"{rel_path}#{anchor}", title=title, text=body,
                                 section=label, kind="section", ordinal=ordinal, level=level, anchor=anchor))
        for at, label in labels_at(text, [start for start, *_ in found], _LABEL, _BLANK_OR_LABEL):
            labels = docs[at].fields.setdefault("labels", [])
            if label not in labels:
                labels.append(label)
        return docs


@hookimpl
def xerj_register_formats(register) -> None:
    register(RstFormat())
