"""Audit sinks for xerj: the hash-chained JSONL file sink, its search and verify routes, and ``xerj audit``."""
