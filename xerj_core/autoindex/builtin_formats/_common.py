"""Small pieces the built-in formats share: building documents, unique section anchors, opening zip packages."""

from __future__ import annotations

import bisect
import io
import posixpath
import re
import zipfile
from typing import Any, Sequence

import orjson

from xerj_core.autoindex import compressed
from xerj_core.autoindex.formats import FormatError, decode_text, extension
from xerj_core.model import SourceDocument
from xerj_core.text import label_key, slugify


def document(
    fmt: Any,
    rel_path: str,
    mtime_ms: int,
    *,
    doc_id: str,
    title: str,
    text: str,
    section: str,
    kind: str,
    dataset: str | None = None,
    **fields: Any,
) -> SourceDocument:
    """A document of ``fmt`` for the file ``rel_path``; ``fields`` with value ``None`` are left out."""
    return SourceDocument(
        doc_id=doc_id,
        dataset=dataset or fmt.dataset,
        ax_path=rel_path,
        title=title,
        text=text,
        section=section,
        kind=kind,
        mtime_ms=mtime_ms,
        format=fmt.name,
        fields={k: v for k, v in fields.items() if v is not None},
    )


# An anchor becomes part of a document id, which is also a node id with a byte limit; a heading
# is a line, but a generated or pasted one can be kilobytes.
MAX_ANCHOR_CHARS = 100


class Anchors:
    """Hands out unique anchors within one file: ``intro``, ``intro-1``, ``intro-2`` (empty → ``fallback``)."""

    def __init__(self, fallback: str = "section") -> None:
        self._seen: dict[str, int] = {}
        self._fallback = fallback

    def __call__(self, label: str) -> str:
        base = slugify(label)[:MAX_ANCHOR_CHARS].rstrip("-") or self._fallback
        anchor = base
        while anchor in self._seen:
            self._seen[base] += 1
            anchor = f"{base}-{self._seen[base]}"
        self._seen[anchor] = 0
        return anchor


def labels_at(text: str, title_starts: list[int], label: re.Pattern[str], between: re.Pattern[str]
              ) -> list[tuple[int, str]]:
    """``(document position, label)`` of each reference target ``label`` finds in ``text`` (its group 1; 0 is the
    card, ``n`` the ``n``-th section, whose titles start at ``title_starts``), as Sphinx places one: in the section
    whose title follows it across what ``between`` matches (blank lines, other targets), else in the section it
    is written in. Labels are compared as Sphinx compares them (:func:`~xerj_core.text.label_key`)."""
    found = []
    for match in label.finditer(text):
        key = label_key(match.group(1))
        if not key:
            continue
        opens = between.match(text, match.end() + 1).end() if match.end() < len(text) else len(text)
        if opens in title_starts:  # it opens the section whose title follows
            found.append((title_starts.index(opens) + 1, key))
        else:  # it is written inside a section (or before the first title: the card)
            found.append((bisect.bisect_right(title_starts, match.start()), key))
    return found


def parse_xml(data: bytes, what: str, *, recover: bool = False) -> Any:
    """The root element of the XML ``data`` (a member of a ``what``), parsed with no DTD loaded, no entity expanded
    and nothing fetched; with ``recover``, as much as libxml2 can read of it. A :class:`FormatError` otherwise."""
    from lxml import etree  # imported with the first such file: lxml's 4 MB stay out of runs that read none

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True,
                             recover=recover)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        raise FormatError(f"malformed {what}: {exc}") from None
    if root is None:
        raise FormatError(f"malformed {what}: an XML part holds no element")
    return root


class Package:
    """A zip package (Office Open XML, OpenDocument, EPUB: ``what``, as errors name it) opened to read its parts by
    name, closed on leaving a ``with`` block. What its members expand to is checked against the file limit before
    any is read: a zip bomb is refused, not expanded. Every failure is a :class:`FormatError`."""

    def __init__(self, data: bytes, what: str, *, recover: bool = False) -> None:
        self.what = what
        self._recover = recover
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, ValueError) as exc:
            raise FormatError(f"not a{'n' if what[0] in 'AEIOU' else ''} {what}: not a zip file ({exc})") from None
        members = self._zip.infolist()
        expanded = sum(info.file_size for info in members)
        if expanded > compressed.MAX_FILE_BYTES:
            self._zip.close()
            raise FormatError(f"{what} expands to {expanded / (1 << 20):,.0f} MiB, past the "
                              f"{compressed.MAX_FILE_BYTES >> 20} MiB a file may hold")
        self.names = frozenset(info.filename for info in members)

    def __enter__(self) -> "Package":
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._zip.close()

    def read(self, name: str) -> bytes:
        """The part ``name``'s bytes (a :class:`FormatError` when the package cannot give them: damaged, an unknown
        compression)."""
        try:
            return self._zip.read(name)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, OSError, ValueError, KeyError) as exc:
            raise FormatError(f"malformed {self.what}: {name} cannot be read ({exc})") from None

    def xml(self, name: str | None) -> Any:
        """The part ``name`` parsed as XML (see :func:`parse_xml`), or None when the package holds no such part."""
        return parse_xml(self.read(name), self.what, recover=self._recover) if name in self.names else None

    def main_part(self, default: str) -> tuple[str, Any]:
        """An Office Open XML package's main part, where its relationships put it (``default`` unless they say),
        and its parsed XML; a :class:`FormatError` when the package does not hold it."""
        path = package_part(self.xml("_rels/.rels"), "", type_suffix="/officeDocument") or default
        root = self.xml(path)
        if root is None:
            raise FormatError(f"not a{'n' if self.what[0] in 'AEIOU' else ''} {self.what}: it holds no {path}")
        return path, root

    def relationships(self, part: str) -> Any:
        """The parsed relationships of the part ``part`` (``ppt/_rels/presentation.xml.rels``), or None."""
        return self.xml(posixpath.join(posixpath.dirname(part), "_rels", posixpath.basename(part) + ".rels"))


def is_lock_file(rel_path: str) -> bool:
    """Whether ``rel_path`` is the lock file an office program keeps beside a document it has open
    (``~$report.docx``): a few bytes naming who opened it, no document."""
    return posixpath.basename(rel_path).startswith("~$")


def headed_documents(fmt: Any, rel_path: str, mtime_ms: int, title: str, preamble: Sequence[str],
                     sections: Sequence[tuple[int, str, Sequence[str]]], **fields: Any) -> list[SourceDocument]:
    """A document read as a note is: its card (``title``, the text before its first heading, ``fields``), then
    one section per ``(level, heading, paragraphs)``, anchored as a Markdown heading's."""
    docs = [document(fmt, rel_path, mtime_ms, doc_id=rel_path, title=title, text="\n".join(preamble).strip(),
                     section="", kind="file", ordinal=0, **fields)]
    anchors = Anchors()
    for n, (level, label, paragraphs) in enumerate(sections, 1):
        anchor = anchors(label)
        docs.append(SourceDocument(f"{rel_path}#{anchor}", fmt.dataset, rel_path, title,
                                   "\n".join([label, *paragraphs]), label, "section", mtime_ms, fmt.name,
                                   {"ordinal": n, "level": level, "anchor": anchor}))
    return docs


# Office Open XML's namespaces for a package's relationships and its core properties (docProps/core.xml).
_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_CORE = (("title", "{http://purl.org/dc/elements/1.1/}title"), ("author", "{http://purl.org/dc/elements/1.1/}creator"),
         ("keywords", "{http://schemas.openxmlformats.org/package/2006/metadata/core-properties}keywords"),
         ("created", "{http://purl.org/dc/terms/}created"), ("modified", "{http://purl.org/dc/terms/}modified"))


def package_part(relationships: Any, folder: str, *, type_suffix: str = "", rid: str | None = None) -> str | None:
    """The part an Office Open XML relationship points to, as a path in the package: the one with id ``rid``, else
    the first whose type ends with ``type_suffix``; ``folder`` is the folder of the part the relationships are
    of. None when there is none, or it points outside the package."""
    for relationship in relationships.iter(f"{_RELS}Relationship") if relationships is not None else ():
        if (relationship.get("Id") == rid) if rid is not None else \
                (relationship.get("Type") or "").endswith(type_suffix):
            target = relationship.get("Target") or ""
            if relationship.get("TargetMode") == "External" or not target:
                return None
            return posixpath.normpath(target.lstrip("/") if target.startswith("/") else posixpath.join(folder, target))
    return None


def core_properties(core: Any) -> dict[str, str]:
    """An Office Open XML package's ``title``, ``author``, ``keywords``, ``created`` and ``modified`` (those it
    sets), from its parsed ``docProps/core.xml`` (None: none)."""
    found = {}
    for key, tag in _CORE:
        element = core.find(tag) if core is not None else None
        value = " ".join((element.text or "").split()) if element is not None else ""
        if value:
            found[key] = value
    return found


def json_head(rel_path: str, head: bytes) -> bytes | None:
    """The first bytes of a ``.json`` file as an export's sniffing reads them (a UTF-8 BOM dropped), or None for
    a file of another extension."""
    return head.lstrip(b"\xef\xbb\xbf") if extension(rel_path) == ".json" else None


def load_json(data: bytes, rel_path: str, empty: Any = None) -> Any:
    """A JSON file's value (``empty`` for a file of whitespace alone); a :class:`FormatError` when it is not
    JSON."""
    try:
        return orjson.loads(decode_text(data, rel_path).text or orjson.dumps(empty))
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"not JSON: {exc}") from None
