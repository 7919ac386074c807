"""The reliability harness: load, kill -9 faults, a full disk and hostile input against a real `xerj serve`.

Not part of the default test run (no ``test_*.py`` here); ``python -m tests.reliability all --quick``
runs the short version in CI and ``--full`` the whole, writing docs/RELIABILITY.md.
"""
