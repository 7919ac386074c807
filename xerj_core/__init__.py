"""xerj's small core: storage, query, graph, memory and autoindex behind one Engine."""

from importlib.metadata import PackageNotFoundError, version as _version

from xerj_core.hookspecs import hookimpl

try:
    __version__ = _version("xerj")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0"

__all__ = ["hookimpl", "__version__"]
