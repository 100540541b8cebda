"""The compiled core; everything else is configured in pyproject.toml.

kernel/ holds the C core: the index format and its checks (format.h, store.c, records.c, verify.c), the
reader's cache (cache.c), the search (terms.c, lists.c, score.c, search.c), the open index and its
searchers (engine.c), the output formats (render.c, sample.c), fastsubs-query's input
lines made into output (chunk.c) and the Python glue (module.c, module_search.c, module_format.c);
kernel/lmdb/ is LMDB 0.9.32 with the patches kernel/lmdb/UPSTREAM names (OpenLDAP Public
License, see its LICENSE), built in so that the core reads the
index in place through LMDB's C API; kernel/ryu/ is Ryu's d2s (Apache-2.0 or Boost, see its
README), which writes numbers in JSON as Python's repr() does.

The editable install (make's pip install -e) adds one thing to setuptools' own (EditableWheel).
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel
from setuptools.command.sdist import sdist

KERNEL = "kernel/"
#: kernel/SOURCES lists the core's sources, once (the tests' C programs read it too).
SOURCES = [line for line in (Path(__file__).parent / KERNEL / "SOURCES").read_text().splitlines()
           if line.strip() and not line.startswith("#")]

#: The headers the sources include: setuptools rebuilds an extension only when one of its
#: sources or of these is newer than it, so an edit of a header alone is compiled too.
HEADERS = sorted(str(path) for path in Path(KERNEL).rglob("*.h"))

#: The package's own folder (its subpackages indexer/, query/ and bench/ lie beside it: pyproject.toml's package-dir).
PACKAGE = Path(__file__).resolve().parent / "fastsubs"

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
        _write_commit(Path(base_dir) / "fastsubs")


#: The module the editable install adds (EditableWheel), with the clone's fastsubs/ in ``PACKAGE``.
PACKAGE_ON_PATH = '''"""Written by fastsubs's setup.py for its editable install: fastsubs found on sys.path."""

import sys
from importlib.util import spec_from_file_location

ENTRY = {entry!r}
PACKAGE = {package!r}


class Finder:
    """Finds fastsubs, and nothing else, under ENTRY (at the end of sys.path)."""

    def __init__(self, entry):
        if entry != ENTRY:
            raise ImportError(entry)

    @staticmethod
    def find_spec(name, target=None):
        if name != "fastsubs":
            return None
        return spec_from_file_location(name, PACKAGE + "/__init__.py", submodule_search_locations=[PACKAGE])


def install():
    if Finder not in sys.path_hooks:
        sys.path_hooks.append(Finder)
    if ENTRY not in sys.path:
        sys.path.append(ENTRY)
'''


class EditableWheel(editable_wheel):
    """setuptools' editable install of packages mapped to other folders (pyproject.toml's
    package-dir) is a finder on sys.meta_path, which Python asks only after its search of
    sys.path: in the folder that holds a clone named fastsubs, that search takes the clone, a
    folder without __init__.py, for a namespace package, and the finder is never asked.  So
    fastsubs itself is also found on sys.path, as a package in site-packages is (an entry that
    finds nothing else); its subpackages are still setuptools' (docs/development.md, "Layout").
    _select_strategy is setuptools' own: were it renamed, the default suite's
    test_the_editable_install_is_imported_from_the_clones_root_and_its_parent fails."""

    def _select_strategy(self, name, tag, build_lib):
        return _PackageOnPath(super()._select_strategy(name, tag, build_lib), name)


class _PackageOnPath:
    """setuptools' strategy of an editable wheel, and PACKAGE_ON_PATH with a .pth that installs it."""

    def __init__(self, strategy, name):
        self.strategy = strategy
        self.name = name
        self.module = "__editable___" + "".join(c if c.isalnum() else "_" for c in name) + "_on_path"

    def __enter__(self):
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self.strategy.__exit__(*exc)

    def __call__(self, wheel, files, mapping):
        self.strategy(wheel, files, mapping)
        text = PACKAGE_ON_PATH.format(entry=f"__editable__.{self.name}.on_path", package=str(PACKAGE))
        wheel.writestr(f"{self.module}.py", text.encode())
        wheel.writestr(f"__editable__.{self.name}.on_path.pth", f"import {self.module}; {self.module}.install()\n")


setup(cmdclass={"build_py": BuildRecordingCommit, "sdist": SdistRecordingCommit, "editable_wheel": EditableWheel},
      ext_modules=[
          Extension("fastsubs._kernel", sources=[KERNEL + name for name in SOURCES], include_dirs=[KERNEL],
                    depends=HEADERS, extra_compile_args=FLAGS),
          # the index builder's hot loop (reading n-gram lines), apart from the query's core
          Extension("fastsubs.indexer._native", sources=["indexer/native.c"], extra_compile_args=FLAGS),
      ])
