"""Which code produced an output: fastsubs's version and, for a build from a git clone, its commit.

A version names a release; between releases (and in a clone someone edited) it says too
little for a methods section, so ``--version``, ``OUT.json`` and ``fastsubs-index info``
also give the commit where it is known:

* an install built from a clone (``pip install .``, a wheel or an sdist made there) carries
  the commit of the clone at build time in ``_commit.py``, which ``setup.py`` writes;
* the clone itself (``make``'s editable install, Python started in its root) asks git, and
  marks a commit whose tracked files were changed since with ``+changes``;
* anything else (an sdist made outside a clone, no git) has no commit: ``None``.

This module imports nothing of fastsubs, so that ``setup.py`` can load it from its path.
"""

from __future__ import annotations

import functools
import importlib
import subprocess
from pathlib import Path

VERSION = "0.3.0"

#: The module a build writes into the package, holding ``COMMIT``.
COMMIT_MODULE = "_commit"
#: Appended to the commit of a clone whose tracked files differ from it.
CHANGED = "+changes"


def clone_commit(directory: str | Path) -> str | None:
    """The commit checked out in the git clone whose tracked files include ``directory``'s
    ``__init__.py`` (``+changes`` after it where a tracked file differs), or None: not in a
    clone, not tracked there (a copy installed into a virtual environment inside a clone), no git."""
    def git(*arguments: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run(["git", "-C", str(directory), *arguments], capture_output=True, text=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            return None

    tracked = git("ls-files", "--error-unmatch", "__init__.py")
    head = git("rev-parse", "--verify", "HEAD")
    if tracked is None or tracked.returncode != 0 or head is None or head.returncode != 0:
        return None
    changed = git("diff", "--quiet", "HEAD", "--")
    return head.stdout.strip() + (CHANGED if changed is None or changed.returncode != 0 else "")


@functools.cache
def commit() -> str | None:
    """The commit this fastsubs was built from (see the module's docstring), once per process."""
    try:
        built = importlib.import_module(f"{__package__}.{COMMIT_MODULE}")
    except ImportError:
        return clone_commit(Path(__file__).resolve().parent)
    recorded: str | None = getattr(built, "COMMIT", None)
    return recorded


def spelled(version: str, known_commit: str | None) -> str:
    """A version and its commit as a person reads them: ``0.3.0 (commit 1f2e...)``, or
    ``0.3.0`` alone where no commit is known (``null`` in JSON: ``OUT.json``, an index's
    build record).  The one spelling of ``--version``, ``fastsubs-index info``'s "built"
    and "read by" lines, whatever built the copy: a clone, or a tree without ``.git``."""
    return version if known_commit is None else f"{version} (commit {known_commit})"


def describe() -> str:
    """This fastsubs's version and commit (:func:`spelled`): what ``--version`` prints."""
    return spelled(VERSION, commit())
