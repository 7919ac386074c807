"""The compiled part of xerj: two optional C extensions (the hop's inner loop, the kNN scan's int8 first pass);
everything else is in pyproject.toml.

Both are optional: where no C compiler is found the install goes on without them, hops run on numpy alone and
kNN scans read every float32 row (same answers, slower; ``xerj_core.graph.hoprun`` and
``xerj_core.query.knnquant`` say which is in use)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("xerj_core.graph._hoprun", ["xerj_core/graph/_hoprun.c"],
                             extra_compile_args=["-O2"], optional=True),
                   # -O3: the int8 loop is only fast vectorised, which GCC's -O2 does for the cheapest loops alone
                   Extension("xerj_core.query._knnscan", ["xerj_core/query/_knnscan.c"],
                             extra_compile_args=["-O3"], optional=True)])
