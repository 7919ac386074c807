"""The built-in document formats, one plugin module each (registered through entry points)."""
