"""Autoindex: turn a folder into documents (formats) and relationship edges (detectors)."""
