"""Putting a finished index in place atomically, so a reader never sees half of one.

A build writes into a temporary directory beside the target.  Publishing swaps it
in with one ``rename``: onto a missing target with ``rename(2)``, onto an existing
index with ``renameat2(RENAME_EXCHANGE)`` (Linux), so the target path always names
either the old complete index or the new one.  Processes that already opened the old
index keep reading it (its files stay alive while mapped) until they finish.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import tempfile
from pathlib import Path

TEMP_PREFIX = ".fastsubs-build-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def make_temp_dir(target: Path) -> Path:
    """A fresh temporary directory beside ``target`` (same filesystem, so rename works)."""
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{target.name}-", dir=parent))


def remove_stale_temp_dirs(target: Path) -> None:
    """Delete temporary directories left by earlier builds of ``target`` that died.

    A directory counts as stale when the process id in its lock file is gone;
    builds still running keep theirs.
    """
    for candidate in target.parent.glob(f"{TEMP_PREFIX}{target.name}-*"):
        owner = candidate / "builder.pid"
        try:
            pid = int(owner.read_text())
        except (OSError, ValueError):
            pid = None
        if pid is not None and _process_alive(pid):
            continue
        shutil.rmtree(candidate, ignore_errors=True)


def claim_temp_dir(temp: Path) -> None:
    """Record this process as the owner of ``temp`` (see :func:`remove_stale_temp_dirs`)."""
    (temp / "builder.pid").write_text(str(os.getpid()))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid != os.getpid()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths; False where the system cannot."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err), str(b))


def publish(temp: Path, target: Path) -> None:
    """Move the complete index in ``temp`` to ``target``, replacing what is there."""
    (temp / "builder.pid").unlink(missing_ok=True)
    _fsync_dir(temp)
    if target.exists() or target.is_symlink():
        if _exchange(temp, target):
            shutil.rmtree(temp, ignore_errors=True)
        else:
            old = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{target.name}-old-", dir=target.parent))
            os.rename(target, old / "index")
            os.rename(temp, target)
            shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(temp, target)
    _fsync_dir(target.parent)
