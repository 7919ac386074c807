"""Index-name rules (Elasticsearch's) and the reserved agent-memory namespace prefix."""

from __future__ import annotations

from xerj_core.errors import InvalidIndexName

RESERVED_PREFIX = ".xerj-memory-"
_FORBIDDEN = set('\\/*?"<>| ,#:')
_MAX_BYTES = 255


def validate_index_name(name: str) -> str:
    """Return ``name`` when Elasticsearch would accept it as an index name, else raise InvalidIndexName."""
    if not isinstance(name, str) or not name:
        raise InvalidIndexName("index name must not be empty", index=str(name))
    problem = None
    if not name.isascii() and name.encode(errors="surrogatepass") != name.encode(errors="ignore"):
        problem = "must be valid Unicode text"
    elif name != name.lower():
        problem = "must be lowercase"
    elif bad := sorted(set(name) & _FORBIDDEN):
        problem = f"must not contain the following characters {bad}"
    elif name[0] in "-_+":
        problem = "must not start with '_', '-', or '+'"
    elif name in (".", ".."):
        problem = "must not be '.' or '..'"
    elif len(name.encode()) > _MAX_BYTES:
        problem = f"index name is too long, ({len(name.encode())} > {_MAX_BYTES})"
    elif any(ord(ch) < 0x20 for ch in name):
        problem = "must not contain control characters"
    if problem:
        raise InvalidIndexName(f"Invalid index name [{name}], {problem}", index=name)
    return name


def is_reserved(name: str) -> bool:
    """Whether ``name`` lies in the reserved namespace that holds every memory namespace and brain."""
    return name.startswith(RESERVED_PREFIX)
