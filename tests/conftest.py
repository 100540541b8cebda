"""Shared fixtures: real indexes built from real model files, and the installed CLIs.

The default suite runs from the repository alone: its real model is the bundled demo
model (``models/``, a 4-gram Kneser-Ney model of 20K words), and its text is drawn from
that model (:mod:`model_text`).  Only the slow suite (``-m slow``) also reads
``../shared/data`` beside the repository (CI lays it there): the big models, the
held-out text, and the original tool's outputs for ``kn4-small``.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import pickle
import pty
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import lmdb
import numpy as np
import pytest
from hypothesis import Phase, settings

import fastsubs
from exhaustive import ArpaModel
from fastsubs import format as fmt
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
T = TypeVar("T")


# ``--hypothesis-profile no-shrink``: report a failing example as found (tests/mutations.py
# runs the suite against planted bugs, where shrinking big models would take minutes).
settings.register_profile("no-shrink", phases=[Phase.explicit, Phase.reuse, Phase.generate])



def poll_until(process: subprocess.Popen, done: Callable[[], bool], what: str, seconds: float = 120) -> None:
    """Poll until ``done()`` holds (a condition, not a fixed sleep); fail with ``process``'s
    stderr if it ends first, or saying ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not done():
        assert process.poll() is None, process.stderr.read().decode()  # type: ignore[union-attr]
        assert time.monotonic() < deadline, what
        time.sleep(0.01)

def shared(name: str) -> Path:
    """A file of ``../shared/data``, for the slow suite; the test is skipped without it."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared data folder sits beside the repository)")
    return path


#: A folder that the session's processes share (pytest-xdist's workers: the parent of their
#: own temporary folders), once the session has started (``_session_folder``).
_SESSION_FOLDER: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _session_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp()
    _SESSION_FOLDER[:] = [base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base]


#: Where the tests keep what they make from the repository's files, from one session to the
#: next, named by a digest of what it is made from (``build/`` is git's to ignore).
KEPT = REPO / "build" / "tests"


def _kept(name: str, made_from: list[bytes], make: Callable[[], T]) -> T:
    """``make()``, made once and kept (pickled in KEPT, or in the session's folder where KEPT
    cannot be made) under a digest of ``made_from`` and the Python that made it: the next
    session and the other pytest-xdist workers read it instead of making it again."""
    try:
        KEPT.mkdir(parents=True, exist_ok=True)
        folder = KEPT
    except OSError:
        if not _SESSION_FOLDER:  # (outside a test)
            return make()
        folder = _SESSION_FOLDER[0]
    digest = hashlib.sha256(b"\0".join([*made_from, sys.version.encode()])).hexdigest()[:16]
    kept = folder / f"{name}-{digest}.pickle"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        if not kept.exists():
            for older in folder.glob(f"{name}-*.pickle"):
                older.unlink()
            made = make()
            kept.with_suffix(".part").write_bytes(pickle.dumps(made, protocol=pickle.HIGHEST_PROTOCOL))
            os.replace(kept.with_suffix(".part"), kept)
            return made
    return pickle.loads(kept.read_bytes())


def _tests_file(name: str) -> bytes:
    return Path(__file__).with_name(name).read_bytes()


@functools.cache
def demo_model() -> ArpaModel:
    """The demo model as the exhaustive scorer reads it: parsed once (~2 s), kept (read
    again in ~0.5 s) while the model and exhaustive.py stay as they are."""
    return _kept("demo-model", [DEMO_MODEL.read_bytes(), _tests_file("exhaustive.py")],
                 lambda: ArpaModel.from_file(str(DEMO_MODEL)))


@functools.cache
def demo_oracle() -> ArpaModel:
    """:func:`demo_model` with its numbers as an index stores them (``stored_as_float32``),
    made once per process: what the search's lists are compared with."""
    return demo_model().stored_as_float32()


@functools.cache
def _demo_sentences() -> tuple[str, ...]:
    """Drawn once, then kept, while the model, exhaustive.py and model_text.py stay as they
    are: a session, or a worker, that needs the text but not the model then reads neither
    the model nor the kept model (the draw is seeded: the same sentences)."""
    return _kept("demo-sentences", [DEMO_MODEL.read_bytes(), _tests_file("exhaustive.py"),
                                    _tests_file("model_text.py"), f"{DEMO_SENTENCES} sentences, seed 1".encode()],
                 lambda: tuple(sampled_sentences(demo_model(), DEMO_SENTENCES, seed=1)))


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


class FedFifo:
    """A FIFO at ``path`` that a thread feeds ``data`` into, all but its last ``held`` bytes
    until :meth:`release`: a process reading it is certain to be still reading until then,
    however fast it is and however loaded the machine (a race a test cannot lose).
    A context manager: leaving it releases the rest and ends the thread, whether or not a
    reader ever came or stayed."""

    def __init__(self, path: Path, data: bytes, held: int = 0) -> None:
        self.path = path
        os.mkfifo(path)
        self._released = threading.Event()
        self._thread = threading.Thread(target=self._feed, args=(data, held), daemon=True)
        self._thread.start()

    def _feed(self, data: bytes, held: int) -> None:
        try:
            with open(self.path, "wb") as stream:
                stream.write(data[:len(data) - held])
                if held:
                    stream.flush()
                    self._released.wait()
                    stream.write(data[len(data) - held:])
        except BrokenPipeError:  # the reader stopped reading (stopped, killed)
            pass

    def release(self) -> None:
        self._released.set()

    def __enter__(self) -> FedFifo:
        return self

    def __exit__(self, *_: object) -> None:
        self.release()
        # a reader of our own, drained and closed, ends a writer still waiting for one
        reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            while self._thread.is_alive():
                try:
                    os.read(reader, 1 << 16)
                except BlockingIOError:
                    self._thread.join(0.01)
        finally:
            os.close(reader)


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
def demo_index(_session_folder: None) -> Path:
    """The bundled demo model compiled once per test session (by the first of
    pytest-xdist's workers that needs it, for all: the tests only read it): the default
    suite's real model (a Kneser-Ney model's shape: 20K words, 0.5M n-grams, a 16 MiB index)."""
    target = _SESSION_FOLDER[0] / "indexes" / "demo.fsidx"
    with open(_SESSION_FOLDER[0] / "demo-index.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        if not target.exists():
            fastsubs.build_index(DEMO_MODEL, target)  # published whole, or not at all
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


def beta_tables(index: Path) -> dict[int, np.ndarray]:
    """Each order's back-off table (orders 2 ... N - 1) as the index stores it: the array
    beta_values cut by the lengths the header gives (kernel/format.h)."""
    env = lmdb.open(str(index), readonly=True, lock=False, max_dbs=4)
    try:
        with env.begin() as txn:
            header = fmt.decode_header(txn.get(fmt.HEADER_KEY, db=env.open_db(fmt.META_DB, txn=txn, create=False)))
            arrays = env.open_db(fmt.ARRAYS_DB, txn=txn, create=False)
            values = np.frombuffer(txn.get(fmt.ARRAY_NAMES[fmt.ARRAY_BETA_VALUES], db=arrays), fmt.SCORE_DTYPE).copy()
    finally:
        env.close()
    ends = np.cumsum(header["beta_tables"])
    return {order: values[end - length:end] for order, length, end in
            zip(range(2, header["order"]), header["beta_tables"], ends)}


def pattern_betas(pattern: dict, table: np.ndarray) -> list[float]:
    """A decoded pattern's back-off weights: its codes' entries of its order's table."""
    return table[np.array(pattern["beta_codes"], np.int64)].tolist()
