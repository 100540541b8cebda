"""The compiled query engine; everything else is configured in pyproject.toml.

query/kernel/ holds the kernel's parts in plain C (store, terms, search, output) and the
Python glue (module.c); query/kernel/lmdb/ is LMDB 0.9 (OpenLDAP Public License, see its
LICENSE), built in so that the kernel reads the index in place through LMDB's C API.
"""

from setuptools import Extension, setup

KERNEL = "query/kernel/"

setup(ext_modules=[Extension(
    "fastsubs.query._kernel",
    sources=[KERNEL + name for name in ("module.c", "store.c", "terms.c", "search.c", "output.c",
                                        "lmdb/mdb.c", "lmdb/midl.c")],
    include_dirs=[KERNEL],
    extra_compile_args=["-fvisibility=hidden", "-Wno-unused-but-set-variable"],
)])
