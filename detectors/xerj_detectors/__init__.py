"""The built-in relationship detectors, one plugin module each (registered through entry points)."""
