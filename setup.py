"""The compiled part of xerj: seven optional C extensions (the hop's inner loop, the kNN scan's int8 first pass, the
Python outline's byte walk, a write's term ranking, a text's word count, a seal's bucket layout, sharedterm's
candidate search); everything else is in pyproject.toml.

All are optional: where no C compiler is found the install goes on without them, hops run on numpy alone, kNN
scans read every float32 row, the outline finds strings and comments with a regular expression and numpy, writes
rank terms with a dict and a sort, a text's words are counted in a dict, seals lay their buckets out with numpy,
and sharedterm counts its candidates in dense numpy blocks (same answers, slower; ``xerj_core.graph.hoprun``,
``xerj_core.query.knnquant``, ``xerj_core.autoindex.builtin_formats.pyoutline``, ``xerj_core.termrank``,
``xerj_core.text``, ``xerj_core.store.postpack`` and ``xerj_detectors.sharedterm`` say which is in use)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("xerj_core.graph._hoprun", ["xerj_core/graph/_hoprun.c"],
                             extra_compile_args=["-O2"], optional=True),
                   # -O3: the int8 loop is only fast vectorised, which GCC's -O2 does for the cheapest loops alone
                   Extension("xerj_core.query._knnscan", ["xerj_core/query/_knnscan.c"],
                             extra_compile_args=["-O3"], optional=True),
                   Extension("xerj_core.autoindex.builtin_formats._pyscan",
                             ["xerj_core/autoindex/builtin_formats/_pyscan.c"], extra_compile_args=["-O2"],
                             optional=True),
                   # the two share _termtable.h, the hash table of terms
                   Extension("xerj_core._termrank", ["xerj_core/_termrank.c"],
                             depends=["xerj_core/_termtable.h", "xerj_core/_buffers.h"],
                             extra_compile_args=["-O2"], optional=True),
                   Extension("xerj_core._wordcount", ["xerj_core/_wordcount.c"], depends=["xerj_core/_termtable.h"],
                             extra_compile_args=["-O2"], optional=True),
                   Extension("xerj_core.store._postpack", ["xerj_core/store/_postpack.c"],
                             depends=["xerj_core/_buffers.h"], extra_compile_args=["-O2"], optional=True),
                   Extension("xerj_detectors._meetings", ["detectors/xerj_detectors/_meetings.c"],
                             include_dirs=["xerj_core"], depends=["xerj_core/_buffers.h"],
                             extra_compile_args=["-O2"], optional=True)])
