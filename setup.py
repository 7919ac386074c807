"""The compiled part of xerj: one optional C extension (the hop's inner loop); everything else is in pyproject.toml.

The extension is optional: where no C compiler is found the install goes on without it and the hop runs on
numpy alone (same answers, slower; ``xerj_core.graph.hoprun`` says which is in use)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("xerj_core.graph._hoprun", ["xerj_core/graph/_hoprun.c"],
                             extra_compile_args=["-O2"], optional=True)])
