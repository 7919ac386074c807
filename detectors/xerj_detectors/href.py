"""``href``: ``<a href="…">`` links to corpus files, read from HTML-sniffed documents only.

The HTML format records each link with the byte offset of its anchor text
(``fields["links"]``); a relative or ``/``-rooted href that names a corpus
file (a folder: its ``index.html``, else the note published as that folder,
``guide/setup/``: ``guide/setup.md``; a ``/``-rooted one naming nothing at the
root is tried from each folder above the page, as a site below the indexed
folder is rooted there) becomes an edge whose evidence is the line
of page text holding the anchor. An anchor with no text, such as an icon or
an image link (the format gives it a ``label``), gets the rationale
``"<file> links to <href>"`` at offset 0, with its label when it has one: the
line at its offset is the text after it. Query strings are dropped;
``#fragment`` picks a section of the target when it has one.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from xerj_core.detectors import (Corpus, DetectorState, EdgeDraft, SourceDocument, clip, hookimpl, line_at,
                                 make_draft, resolve_relative)

INDEX_NAMES = ("index.html", "index.htm")


class HrefDetector:
    name = "href"
    type = "href"
    # 3: a /-rooted href naming nothing at the root is rooted at the folders above the page (a site's root)
    # 4: a folder href naming no index page names the note published there (guide/setup/: guide/setup.md)
    tag = "href@4"
    weight = 0.7
    confidence = 0.85

    def detect(
        self, file_docs: Sequence[SourceDocument], corpus: Corpus, state: DetectorState | None
    ) -> Iterable[EdgeDraft]:
        for doc in file_docs:
            links = doc.fields.get("links") if doc.format == "html" else None
            if not links:
                continue
            data = doc.text.encode("utf-8")
            seen: set[str] = set()
            # links with text first: a page that links to a file by an icon and in its prose is quoted from its prose
            for link in sorted(links, key=lambda link: link.get("label") is not None):
                href, offset = link.get("href"), link.get("offset", 0)
                if not isinstance(href, str) or not isinstance(offset, int):
                    continue
                dst = resolve_relative(corpus, doc.ax_path, href, index_names=INDEX_NAMES, site_roots=True)
                if dst is None or dst.doc_id == doc.doc_id or dst.doc_id in seen:
                    continue
                seen.add(dst.doc_id)
                label = link.get("label")
                quote = line_at(data, offset) if label is None else ""
                if quote:
                    yield make_draft(self, doc, dst, quote=quote, offset=offset)
                else:  # an anchor without text (an icon, an image link): say what was read, as a rationale
                    named = f' ("{label}")' if isinstance(label, str) and label else ""
                    yield make_draft(self, doc, dst, quote=clip(f"{doc.ax_path} links to {href}{named}"), offset=0)


@hookimpl
def xerj_register_detectors(register) -> None:
    register(HrefDetector())
