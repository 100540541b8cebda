"""The compiled core; everything else is configured in pyproject.toml.

kernel/ holds the C core: the index format and its checks (format.h, store.c, records.c, verify.c), the
reader's cache (cache.c), the search (terms.c, lists.c, score.c, search.c), the open index and its
searchers (engine.c), the output formats (render.c, sample.c), fastsubs-query's input
lines made into output (chunk.c) and the Python glue (module.c, module_search.c, module_format.c);
kernel/lmdb/ is LMDB 0.9.32 with the patches kernel/lmdb/UPSTREAM names (OpenLDAP Public
License, see its LICENSE), built in so that the core reads the
index in place through LMDB's C API; kernel/ryu/ is Ryu's d2s (Apache-2.0 or Boost, see its
README), which writes numbers in JSON as Python's repr() does.
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

KERNEL = "kernel/"
#: kernel/SOURCES lists the core's sources, once (the tests' C programs read it too).
SOURCES = [line for line in (Path(__file__).parent / KERNEL / "SOURCES").read_text().splitlines()
           if line.strip() and not line.startswith("#")]

#: The headers the sources include: setuptools rebuilds an extension only when one of its
#: sources or of these is newer than it, so an edit of a header alone is compiled too.
HEADERS = sorted(str(path) for path in Path(KERNEL).rglob("*.h"))

#: The package's source: src/fastsubs, a link to fastsubs/ in a clone, the files themselves in an sdist.
PACKAGE = (Path(__file__).parent / "src" / "fastsubs").resolve()

FLAGS = ["-fvisibility=hidden", "-Wno-unused-but-set-variable"]


def _origin():
    """fastsubs/origin.py, loaded from its path (the package cannot be imported before its core is built)."""
    spec = importlib.util.spec_from_file_location("fastsubs_origin", PACKAGE / "origin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write_commit(package_dir):
    """Record the clone's commit in package_dir/_commit.py, so that an installed copy can say which
    commit it was built from (fastsubs/origin.py); outside a clone (a wheel built from an sdist,
    which carries the file already) nothing is written."""
    origin = _origin()
    commit = origin.clone_commit(PACKAGE)
    if commit is not None:
        target = Path(package_dir) / f"{origin.COMMIT_MODULE}.py"
        target.write_text(f'"""Written by setup.py: the commit this copy was built from."""\n\nCOMMIT = {commit!r}\n')


class BuildRecordingCommit(build_py):
    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):  # an editable install is the clone: it asks git itself
            _write_commit(Path(self.build_lib) / "fastsubs")


class SdistRecordingCommit(sdist):
    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        _write_commit(Path(base_dir) / "src" / "fastsubs")


setup(cmdclass={"build_py": BuildRecordingCommit, "sdist": SdistRecordingCommit}, ext_modules=[
    Extension("fastsubs._kernel", sources=[KERNEL + name for name in SOURCES], include_dirs=[KERNEL],
              depends=HEADERS, extra_compile_args=FLAGS),
    # the index builder's hot loop (reading n-gram lines), apart from the query's core
    Extension("fastsubs.indexer._native", sources=["indexer/native.c"], extra_compile_args=FLAGS),
])
