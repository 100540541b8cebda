"""The tests' C programs (tests/c/), compiled with the kernel's sources under
AddressSanitizer and UndefinedBehaviorSanitizer.

With ``-fsanitize=address,undefined -fno-sanitize-recover=all`` any out-of-bounds read or
write, use after free, leak (LeakSanitizer runs at exit) or undefined behaviour ends a run
with a report; :func:`no_sanitizer_report` fails a test on one.

Each object is compiled once, whichever program needs it: objects are named by what they
are made of (the compiler, flags, source, the kernel's headers) in one folder, shared by
pytest-xdist's workers and kept from one session to the next (``build/test-c-programs``, or
the session's own folder where the clone cannot be written), so that a session compiles
only what changed since the last; a lock makes the second worker that needs a program wait
for the first one's build instead of repeating it.  Files unused for KEPT_DAYS go.

LMDB (kernel/lmdb/, vendored with its patches) takes ~7 s to compile with the sanitizers on a
quiet machine (15 s on a busy one), more than all of the kernel's own sources together; the
default suite's programs compile it without them, at -O0 (0.4 s).  The kernel's reads of
what LMDB hands out are still checked (they are compiled with the sanitizers, and ASan's
allocator serves LMDB too); what is lost is checking LMDB's own code, which the slow
suite's programs still do (``sanitize_lmdb=True``).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
KERNEL = REPO / "kernel"
C_TESTS = REPO / "tests" / "c"
SANITIZERS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]
SANITIZED = ["-std=c11", "-g", "-O1", "-pthread", *SANITIZERS, f"-I{KERNEL}"]
PLAIN = ["-std=c11", "-O0", "-pthread", f"-I{KERNEL}"]
LMDB = ("lmdb/mdb.c", "lmdb/midl.c")
#: What the tests' C programs link besides LMDB: every source of kernel/SOURCES (the one list
#: of them, setup.py's) but the Python glue.
PLAIN_C = [name for name in (KERNEL / "SOURCES").read_text().split()
           if name.endswith(".c") and not name.startswith("module") and name not in LMDB]
#: Exit statuses of a sanitizer's report, told apart from a program's own failure (1).
SANITIZER_ENV = {"ASAN_OPTIONS": "detect_leaks=1:exitcode=86", "UBSAN_OPTIONS": "print_stacktrace=1:exitcode=87"}
REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
#: Compilers run at once (the machines the suite runs on have 2 cores).
JOBS = 2
#: Where the objects and programs are kept between sessions.
KEPT = REPO / "build" / "test-c-programs"
#: Days a kept object or program stays unused before a build removes it.
KEPT_DAYS = 14


def no_sanitizer_report(result: subprocess.CompletedProcess[bytes]) -> str:
    """The run's standard error, failing the test if it holds a sanitizer's report."""
    errors = result.stderr.decode(errors="replace")
    assert result.returncode not in (86, 87) and not any(report in errors for report in REPORTS), errors
    return errors


def run_program(binary: Path, *args: str | os.PathLike[str], input: bytes = b"",
                timeout: float = 600) -> subprocess.CompletedProcess[bytes]:
    """Run a program built here, its sanitizers' reports made recognisable (SANITIZER_ENV)."""
    return subprocess.run([str(binary), *map(str, args)], input=input, capture_output=True,
                          env={**os.environ, **SANITIZER_ENV}, timeout=timeout)


def _digest(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


@functools.cache
def _compiler(gcc: str) -> bytes:
    """What names the compiler in an object's name: its path and version."""
    found = subprocess.run([gcc, "--version"], capture_output=True, check=True)
    return gcc.encode() + b"\0" + found.stdout


def _folder(factory: pytest.TempPathFactory) -> Path:
    """KEPT, or the session's folder (shared by pytest-xdist's workers) where it cannot be made."""
    try:
        KEPT.mkdir(parents=True, exist_ok=True)
        return KEPT
    except OSError:
        base = factory.getbasetemp()
        folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "c-programs"
        folder.mkdir(exist_ok=True)
        return folder


def _forget_unused(folder: Path) -> None:
    """Remove what no build has used for KEPT_DAYS (the objects of sources since changed)."""
    limit = time.time() - KEPT_DAYS * 86400
    for entry in folder.iterdir():
        if entry.name != ".lock" and entry.stat().st_mtime < limit:
            entry.unlink(missing_ok=True)


def build_program(factory: pytest.TempPathFactory, main: str, sanitize_lmdb: bool = False) -> Path:
    """tests/c/``main`` linked with the kernel's plain C (PLAIN_C) and LMDB, compiled with the
    sanitizers (LMDB too only with ``sanitize_lmdb``); skips the test without gcc."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is not installed")
    folder = _folder(factory)
    compiler = _compiler(gcc)
    headers = b"".join(path.read_bytes() for path in sorted(KERNEL.glob("**/*.h")))
    units = [(C_TESTS / main, SANITIZED)] + [(KERNEL / name, SANITIZED if sanitize_lmdb or name not in LMDB else PLAIN)
                                             for name in [*PLAIN_C, *LMDB]]
    objects = [folder / f"{source.stem}-{_digest(compiler, source.read_bytes(), headers, ' '.join(flags).encode())}.o"
               for source, flags in units]
    binary = folder / f"{Path(main).stem}-{_digest(*(obj.name.encode() for obj in objects))}"
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed
        _forget_unused(folder)
        for used in (binary, *objects):
            if used.exists():
                os.utime(used)
        if binary.exists():
            return binary
        todo = [(source, flags, obj) for (source, flags), obj in zip(units, objects) if not obj.exists()]
        todo.sort(key=lambda unit: unit[0].name != "mdb.c" or unit[1] is PLAIN)  # the long one first
        for first in range(0, len(todo), JOBS):
            running = [(subprocess.Popen([gcc, *flags, "-c", str(source), "-o", f"{obj}.part"], stderr=subprocess.PIPE),
                        obj) for source, flags, obj in todo[first:first + JOBS]]
            for process, obj in running:
                _, errors = process.communicate()
                assert process.returncode == 0, errors.decode()
                os.replace(f"{obj}.part", obj)  # whole, or not there
        linked = subprocess.run([gcc, *SANITIZED, *map(str, objects), "-o", f"{binary}.part", "-lm", "-lpthread"],
                                capture_output=True)
        assert linked.returncode == 0, linked.stderr.decode()
        os.replace(f"{binary}.part", binary)
    return binary
