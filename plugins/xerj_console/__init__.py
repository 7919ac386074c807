"""The xerj console: a browser UI over the HTTP API, served as static files by the ``console`` plugin."""
