"""Putting a finished index in place atomically, so a reader never sees half of one.

A build writes into a temporary directory beside the target.  Publishing swaps it
in with one ``rename``: onto a missing target (or an empty directory) with
``rename(2)``, which never replaces a directory that holds anything, so a build
without ``--force`` cannot replace an index another build published while it ran;
with ``--force``, onto an existing index with ``renameat2(RENAME_EXCHANGE)`` (Linux),
so the target path always names either the old complete index or the new one.
Processes that already opened the old index keep reading it (its files stay alive
while mapped) until they finish.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

from fastsubs.errors import FastsubsError, IndexExistsError, IndexVersionError, TargetNotAnIndexError

TEMP_PREFIX = ".fastsubs-build-"
#: The file a build writes beside data.mdb as it publishes an index: what tells ``--force``
#: that a directory is a fastsubs index it may replace, without reading data.mdb (which
#: may be truncated or damaged; LMDB's own reader would crash on it).
TAG_NAME = "fastsubs-index.tag"
TAG_TEXT = b"fastsubs index: made by fastsubs-index build; build --force may replace this directory\n"
#: All an index directory may hold: LMDB's files and the tag.
_INDEX_FILES = frozenset({"data.mdb", "lock.mdb", TAG_NAME})
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
#: What ``rename(2)`` of a directory says when the target holds something (a directory
#: with anything in it, a file, a symbolic link): it replaced nothing.
_TAKEN = frozenset({errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR})
#: What a path holds that is no regular file, in words, by the test of its mode.
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
#: What tempfile.mkdtemp appends: letters, digits and "_", never "-".
_RANDOM_PART = r"[a-z0-9_]+"


def make_temp_dir(target: Path) -> Path:
    """A fresh temporary directory beside ``target`` (same filesystem, so rename works).

    Its name carries this process's id (``.fastsubs-build-NAME-PID-random``) from the
    moment it exists, so :func:`remove_stale_temp_dirs` in another build never mistakes
    it for the leftover of a dead one.
    """
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{target.name}-{os.getpid()}-", dir=parent))


def remove_stale_temp_dirs(directory: Path) -> None:
    """Delete the temporary directories that builds which died left in ``directory``.

    Whatever their target: a build killed on its way to ``a.fsidx`` leaves
    ``.fastsubs-build-a.fsidx-PID-random``, which the next build of ``b.fsidx`` beside
    it removes.  A directory counts as stale when the process id in its name is gone
    (or is this process: a build that failed earlier in it); running builds keep theirs.
    The name is read from the right (the random part never holds "-"), so any target
    name, ``NAME-1`` included, parses.
    """
    pattern = re.compile(re.escape(TEMP_PREFIX) + r".+-(\d+)-" + _RANDOM_PART)
    try:
        candidates = list(directory.iterdir())
    except OSError:
        return
    for candidate in candidates:
        match = pattern.fullmatch(candidate.name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        remove_tree(candidate)


def check_replaceable(target: Path) -> None:
    """Refuse (TargetNotAnIndexError) unless what is at ``target`` is a fastsubs index a build may replace.

    Replacing deletes what was there, so only what a build made qualifies: a directory
    holding nothing but an index's files (each a regular file: a directory, FIFO, device
    or link by one of their names is a user's, and reading a FIFO would block) and the
    tag a build writes as it publishes (:data:`TAG_NAME`), however damaged or truncated
    its data.mdb; an index published before builds wrote the tag, if it opens as one or
    as an index of another format (through the kernel's checked reader, which never
    reads past a file's end); or an empty directory.  A file, a symbolic link, a
    directory with anything else in it, an LMDB environment of another program or an
    untagged index too damaged to open is never touched, whatever the flags.
    """
    if target.is_symlink():
        raise TargetNotAnIndexError(target, "is a symbolic link (build into the directory it points to)")
    if not target.is_dir():
        raise TargetNotAnIndexError(target, f"is {_kind(target)}, not a fastsubs index")
    entries = {entry.name: entry for entry in os.scandir(target)}
    if not entries:
        return
    others = sorted(set(entries) - _INDEX_FILES)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise TargetNotAnIndexError(target, f"is a directory holding files other than an index's ({shown})")
    for name in sorted(entries):
        if not entries[name].is_file(follow_symlinks=False):
            raise TargetNotAnIndexError(target, f"holds {_kind(target / name)} named {name}, where an index "
                                                f"has a file")
    if _is_tagged(target):
        return
    problem = _untagged_problem(target) if "data.mdb" in entries else "it holds no data.mdb"
    if problem is not None:
        raise TargetNotAnIndexError(target, f"holds an LMDB environment that is not a fastsubs index, or one too "
                                            f"damaged to recognize without its {TAG_NAME} ({problem}): if it is "
                                            f"an index you no longer want, remove it (rm -r) and build again")


def _kind(path: Path) -> str:
    """What ``path`` is, in words, for a refusal: "a directory", "a FIFO", ..., "a file"."""
    mode = os.lstat(path).st_mode
    return next((kind for test, kind in _KINDS if test(mode)), "a file")


def write_tag(directory: Path) -> None:
    """Mark ``directory`` (a finished, checked index about to be published) as a fastsubs index."""
    with open(directory / TAG_NAME, "wb") as stream:
        stream.write(TAG_TEXT)
        stream.flush()
        os.fsync(stream.fileno())


def _is_tagged(directory: Path) -> bool:
    """Whether ``directory`` holds the tag a build writes: a regular file of :data:`TAG_TEXT`.

    Opened without following a link and without waiting (a FIFO put there since the
    directory was listed would block a plain open until someone writes to it), and
    read only if it is a regular file."""
    try:
        fd = os.open(directory / TAG_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as stream:
        return stat.S_ISREG(os.fstat(fd).st_mode) and stream.read(len(TAG_TEXT) + 1) == TAG_TEXT


def is_empty_directory(path: Path) -> bool:
    """Whether ``path`` is a directory (not a link to one) holding nothing."""
    return path.is_dir() and not path.is_symlink() and next(path.iterdir(), None) is None


def _untagged_problem(directory: Path) -> str | None:
    """None when ``directory`` opens as a fastsubs index through the kernel's checked
    reader (an index published before builds wrote the tag), or is refused by it as an
    index of another format (IndexVersionError: the kernel found a fastsubs header or
    metadata that names its version; an intact index of 0.1.0 or 0.2.0, which CHANGES.md
    says to rebuild with ``--force``), else why not."""
    from fastsubs.core import Core

    try:
        with Core(directory):
            return None
    except IndexVersionError:
        return None
    except FastsubsError as error:
        return str(error).removeprefix(f"{directory}: ")


def remove_tree(path: Path) -> None:
    """Remove ``path`` whatever it is (directory, file, symlink); errors are ignored."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


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


def _give_default_permissions(directory: Path) -> None:
    """Give the index directory the permissions a new directory gets (mkdtemp makes it 0700).

    Indexes are shared: other users' processes and cluster workers must be able to read
    them, as they could any directory this user creates.
    """
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(directory, 0o777 & ~umask)


def publish(temp: Path, target: Path, force: bool) -> None:
    """Move the complete index in ``temp`` to ``target``.

    ``rename(2)`` of a directory replaces nothing but a missing target or an empty
    directory, in one step: an index that another build published since this one
    started is never replaced without ``force`` (IndexExistsError).  What is there now
    is checked again (it may have changed since the build started: a user's file is
    named as such), and with ``force`` swapped out."""
    _give_default_permissions(temp)
    _fsync_dir(temp)
    try:
        os.rename(temp, target)
    except OSError as error:
        if error.errno not in _TAKEN:
            raise
        check_replaceable(target)
        if not force:
            raise IndexExistsError(target, appeared=True) from None
        _replace(temp, target)
    _fsync_dir(target.parent)


def _replace(temp: Path, target: Path) -> None:
    """Swap the index in ``temp`` in for the one at ``target``, and delete the old one."""
    if _exchange(temp, target):
        remove_tree(temp)  # now the old index; readers that opened it keep their mapping
        return
    # No atomic exchange here: for a moment the target is missing (never half-written).
    old = make_temp_dir(target)
    os.rename(target, old / "index")
    os.rename(temp, target)
    remove_tree(old)
