"""Built-in text embedders, each registered as a plugin through the ``xerj`` entry points."""
