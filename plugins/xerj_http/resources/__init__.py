"""Thin Falcon resources over the engine: parse the request, call one engine API, shape the answer."""
