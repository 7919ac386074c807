"""HTML format benchmark: xerj's page extraction against lxml's own text extraction and a bare html.parser pass.

Run: python tests/bench/bench_html.py [--pages 3000] [--rounds 3] [--from DIR ...]

The pages are real ones: the ``.html`` files under ``--from`` (by default the
Rust documentation a rustup toolchain installs, then ``/usr/share/doc``), up to
``--pages`` of them, read into memory first. Each side turns every page's bytes
into text, in ``--rounds`` rounds (which side goes first alternates); each side's
figure is its median round.

* ``xerj HtmlFormat.parse``: decode (declared charset, else UTF-8, else the
  detected encoding), text with block structure as lines, title, every link with
  its byte offset and, for an anchor without text, its label; a file card.
* ``lxml text_content``: decode as UTF-8, ``lxml.html.document_fromstring`` builds
  the tree and ``text_content()`` flattens it, links gathered by ``iterlinks()``:
  the usual way to get text out of HTML in Python, with no structure kept.
* ``html.parser``: the standard library's tokenizer with a handler that only
  collects text runs, the floor of any extractor built on it (xerj's was, before lxml).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from html.parser import HTMLParser
from pathlib import Path

import lxml.html

from xerj_core.autoindex.builtin_formats.html import HtmlFormat

RUST_DOCS = Path.home() / ".rustup" / "toolchains"


def default_roots() -> list[Path]:
    found = sorted(RUST_DOCS.glob("*/share/doc/rust/html")) if RUST_DOCS.is_dir() else []
    return [*found[:1], Path("/usr/share/doc")]


def pages(roots: list[Path], limit: int) -> list[tuple[str, bytes]]:
    """Up to ``limit`` ``.html`` files under ``roots``, spread over their folders (every k-th file, in path order)."""
    paths = []
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            paths += [os.path.join(folder, name) for name in files if name.endswith((".html", ".htm"))]
    paths.sort()
    step = max(1, len(paths) // limit)
    found = []
    for path in paths[::step][:limit]:
        try:
            found.append((path, Path(path).read_bytes()))
        except OSError:
            continue
    return found


class _Texts(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def xerj(corpus: list[tuple[str, bytes]]) -> int:
    fmt = HtmlFormat()
    return sum(len(fmt.parse(path, data, 0)[0].text) for path, data in corpus)


def lxml_text_content(corpus: list[tuple[str, bytes]]) -> int:
    total = 0
    for _path, data in corpus:
        text = data.decode("utf-8", "replace")
        if not text.strip():
            continue
        tree = lxml.html.document_fromstring(text)
        total += len(tree.text_content()) + sum(1 for _link in tree.iterlinks())
    return total


def html_parser_texts(corpus: list[tuple[str, bytes]]) -> int:
    total = 0
    for _path, data in corpus:
        parser = _Texts()
        parser.feed(data.decode("utf-8", "replace"))
        parser.close()
        total += len("".join(parser.parts))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--from", dest="roots", type=Path, nargs="*", default=None)
    args = parser.parse_args()
    corpus = pages(args.roots or default_roots(), args.pages)
    if not corpus:
        raise SystemExit("no .html pages found; pass --from DIR")
    mb = sum(len(data) for _path, data in corpus) / 1e6
    sides = {"xerj HtmlFormat.parse": xerj, "lxml text_content": lxml_text_content, "html.parser": html_parser_texts}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for n in range(args.rounds):
        for name in (list(sides) if n % 2 == 0 else list(reversed(sides))):  # which goes first alternates
            start = time.perf_counter()
            sides[name](corpus)
            times[name].append(time.perf_counter() - start)
    roots = ", ".join(map(str, args.roots or default_roots()))
    print(f"HTML pages: {len(corpus):,} real pages ({mb:.1f} MB) from {roots}, {args.rounds} rounds, each side in "
          f"turn, load average {os.getloadavg()[0]:.1f}")
    ours = statistics.median(times["xerj HtmlFormat.parse"])
    for name, spent in times.items():
        middle = statistics.median(spent)
        print(f"  {name:24} {middle:7.2f} s  {mb / middle:6.1f} MB/s" +
              ("" if middle == ours else f"  ratio xerj / {name}: {ours / middle:.2f}"))


if __name__ == "__main__":
    main()
