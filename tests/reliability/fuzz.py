"""atheris targets (``python -m tests.reliability.fuzz TARGET [libFuzzer flags]``): parsers must refuse, never crash.

A target fails on any exception other than the parser's own refusal
(``FormatError`` for the formats, a 4xx ``XerjError`` for the query DSL).
"""

from __future__ import annotations

import sys

import atheris

with atheris.instrument_imports():
    import orjson

    from xerj_core.autoindex.formats import FormatError
    from xerj_core.errors import XerjError
    from xerj_core.query import request as query_request

FORMATS = {"markdown": ("note.md", "markdown"), "html": ("page.html", "html"), "email": ("mail.eml", "email"),
           "pdf": ("doc.pdf", "pdf"), "latex": ("paper.tex", "latex"), "bibtex": ("refs.bib", "bibtex"),
           "chats": ("conversations.json", "chats"), "outlook": ("mail.msg", "outlook"), "roam": ("graph.json", "roam"),
           "bear": ("notes.bear2bk", "bear"), "telegram": ("result.json", "telegram"),
           "slack": ("general/2024-01-15.json", "slack")}


def _format(name: str):
    from xerj_core.autoindex.formats import collect_formats
    from xerj_core.plugins import get_plugin_manager

    found = collect_formats(get_plugin_manager()).get(name)
    if found is None:
        raise SystemExit(f"no format [{name}] installed")
    return found


def main() -> None:
    target = sys.argv[1]
    if target == "query":
        def one(data: bytes) -> None:
            # Bytes that are a JSON object go to the search-body parser, the rest (as text) to the q= parser.
            try:
                body = orjson.loads(data)
            except orjson.JSONDecodeError:
                body = None
            try:
                if isinstance(body, dict):
                    query_request.parse_search_request(body)
                else:
                    query_request.parse_q(data.decode("utf-8", "replace"))
            except XerjError as exc:
                if exc.status >= 500:
                    raise
    else:
        path, name = FORMATS[target]
        fmt = _format(name)

        def one(data: bytes) -> None:
            try:
                fmt.parse(path, data, 0)
            except FormatError:
                pass

    atheris.Setup([sys.argv[0], *sys.argv[2:]], one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
