"""Shared fixtures: real indexes built from real model files, and the installed CLIs.

The default suite runs from the repository alone: its real model is the bundled demo
model (``models/``, a 4-gram Kneser-Ney model of 20K words), and its text is drawn from
that model (:mod:`model_text`).  Only the slow suite (``-m slow``) also reads
``../shared/data`` beside the repository (CI lays it there): the big models, the
held-out text, and the original tool's outputs for ``kn4-small``.
"""

from __future__ import annotations

import functools
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, settings

import fastsubs
from exhaustive import ArpaModel
from model_text import sampled_sentences

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
REFERENCE = SHARED_DATA / "reference"
TEST_DATA = Path(__file__).resolve().parent / "data"


def clone_commit() -> str | None:
    """The commit checked out in the clone this suite runs in, ``+changes`` after it where a
    tracked file differs from it; None in a source tree without ``.git`` (``git archive``, a
    release tarball, an sdist), or one whose package git does not track."""
    def git(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(REPO), *arguments], capture_output=True, text=True, check=False)

    if git("ls-files", "--error-unmatch", "fastsubs/__init__.py").returncode != 0:
        return None
    head = git("rev-parse", "HEAD").stdout.strip()
    changed = "+changes" if git("status", "--porcelain", "--untracked-files=no").stdout.strip() else ""
    return head + changed


def spelled_version(version: str, commit: str | None) -> str:
    """How the tools write a version and its commit: ``0.3.0 (commit 1f2e...)``, or the
    version alone where no commit is known."""
    return version if commit is None else f"{version} (commit {commit})"


def clone_version() -> str:
    """What the tools of this clone should say they are, found here with git and the
    package's metadata rather than by fastsubs.origin: the version and the commit checked
    out (:func:`clone_commit`), or the version alone outside a clone."""
    import importlib.metadata

    return spelled_version(importlib.metadata.version("fastsubs"), clone_commit())


BIN = Path(sys.executable).parent
DEMO_MODEL = REPO / "models" / "demo-kn4-20k.arpa.gz"
#: Sentences drawn from the demo model for the tests (each takes the first N it needs).
DEMO_SENTENCES = 1500


# ``--hypothesis-profile no-shrink``: report a failing example as found (tests/mutations.py
# runs the suite against planted bugs, where shrinking big models would take minutes).
settings.register_profile("no-shrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])


def shared(name: str) -> Path:
    """A file of ``../shared/data``, for the slow suite; the test is skipped without it."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared data folder sits beside the repository)")
    return path


@functools.cache
def demo_model() -> ArpaModel:
    """The demo model as the exhaustive scorer reads it (parsed once per process, ~1 s)."""
    return ArpaModel.from_file(str(DEMO_MODEL))


@functools.cache
def _demo_sentences() -> tuple[str, ...]:
    return tuple(sampled_sentences(demo_model(), DEMO_SENTENCES, seed=1))


def demo_sentences(count: int) -> list[str]:
    """The first ``count`` sentences drawn from the demo model: the default suite's text
    (the same on every run; fewer are the first of more)."""
    assert count <= DEMO_SENTENCES, f"only {DEMO_SENTENCES} sentences are drawn"
    return list(_demo_sentences()[:count])


def demo_text(count: int) -> bytes:
    """:func:`demo_sentences` as an input file holds them: a line each."""
    return "".join(f"{line}\n" for line in demo_sentences(count)).encode()


def python_block(document: Path, after: str = "") -> str:
    """The first ```python block of ``document`` (a README or a page of docs/) after the
    line ``after``, as a user would paste it."""
    return fenced_block(document, after, "python")


def fenced_block(document: Path, after: str, language: str) -> str:
    """The first fenced block of ``language`` (``""``: a block that names none) of
    ``document`` after the text ``after``, as a user would paste it."""
    text = document.read_text()
    found = re.search(rf"^```{language}\n(.*?)^```$", text[text.index(after):], re.S | re.M)
    assert found is not None, f"no {language or 'plain'} block in {document} after {after!r}"
    return found.group(1)


def run_cli(program: str, *args: str | os.PathLike[str], input: bytes | None = None,
            check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
    """Run an installed console script (``fastsubs-index`` / ``fastsubs-query``) for real."""
    result = subprocess.run([str(BIN / program), *map(str, args)], input=input, capture_output=True,
                            timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{program} {args} failed ({result.returncode}): {result.stderr.decode()}")
    return result


def children(pid: int) -> list[int]:
    """The processes ``pid`` has forked and not yet reaped."""
    with open(f"/proc/{pid}/task/{pid}/children") as stream:
        return [int(child) for child in stream.read().split()]


def run_on_a_terminal(program: str, *args: str | os.PathLike[str], timeout: float = 600) -> tuple[int, bytes]:
    """Run an installed console script with stderr a pseudo-terminal (progress lines are
    printed only there): its exit status and what it wrote there."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen([str(BIN / program), *map(str, args)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=terminal)
    os.close(terminal)
    shown = b""
    try:
        while True:
            try:
                block = os.read(controller, 65536)
            except OSError:  # EIO: the program closed its end
                break
            if not block:
                break
            shown += block
    finally:
        os.close(controller)
    return process.wait(timeout=timeout), shown.replace(b"\r\n", b"\n")


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 192 KiB tmpfs, where one can be mounted (root with CAP_SYS_ADMIN): a full output
    disk, or a full $TMPDIR."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=192k", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled demo model compiled once per test session: the default suite's real
    model (a Kneser-Ney model's shape: 20K words, 0.5M n-grams, a 16 MiB index)."""
    target = tmp_path_factory.mktemp("indexes") / "demo.fsidx"
    fastsubs.build_index(DEMO_MODEL, target)
    return target


@pytest.fixture(scope="session")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """kn4-small (5K words, ../shared/data) compiled once per test session: for the slow
    tests that compare with the original tool's outputs for it, or run on it long."""
    target = tmp_path_factory.mktemp("indexes") / "kn4-small.fsidx"
    fastsubs.build_index(shared("kn4-small.arpa.gz"), target)
    return target


@pytest.fixture(scope="session")
def tiny_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-written golden model."""
    target = tmp_path_factory.mktemp("indexes") / "tiny.fsidx"
    fastsubs.build_index(TEST_DATA / "tiny.arpa", target)
    return target
