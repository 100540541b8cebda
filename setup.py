"""The compiled core; everything else is configured in pyproject.toml.

kernel/ holds the C core: the index format and its checks (format.h, store.c, records.c, verify.c), the
reader's cache (cache.c), the search (terms.c, lists.c, score.c, search.c), the open index and its
searchers (index.c), the output formats (render.c, sample.c), fastsubs-query's input
lines made into output (chunk.c) and the Python glue (module.c, module_search.c, module_format.c);
kernel/lmdb/ is LMDB 0.9.32 with the patches kernel/lmdb/UPSTREAM names (OpenLDAP Public
License, see its LICENSE), built in so that the core reads the
index in place through LMDB's C API; kernel/ryu/ is Ryu's d2s (Apache-2.0 or Boost, see its
README), which writes numbers in JSON as Python's repr() does.
"""

from pathlib import Path

from setuptools import Extension, setup

KERNEL = "kernel/"
#: kernel/SOURCES lists the core's sources, once (the tests' C programs read it too).
SOURCES = [line for line in (Path(__file__).parent / KERNEL / "SOURCES").read_text().splitlines()
           if line.strip() and not line.startswith("#")]

#: The headers the sources include: setuptools rebuilds an extension only when one of its
#: sources or of these is newer than it, so an edit of a header alone is compiled too.
HEADERS = sorted(str(path) for path in Path(KERNEL).rglob("*.h"))

FLAGS = ["-fvisibility=hidden", "-Wno-unused-but-set-variable"]

setup(ext_modules=[
    Extension("fastsubs._kernel", sources=[KERNEL + name for name in SOURCES], include_dirs=[KERNEL],
              depends=HEADERS, extra_compile_args=FLAGS),
    # the index builder's hot loop (reading n-gram lines), apart from the query's core
    Extension("fastsubs.indexer._native", sources=["indexer/native.c"], extra_compile_args=FLAGS),
])
