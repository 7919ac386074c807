"""Conformance suites a plugin author subclasses: one ``Abstract*Tests`` mixin per plugin kind."""
