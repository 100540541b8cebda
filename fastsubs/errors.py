"""The exceptions fastsubs raises on bad input: each carries a one-line message a user can act on.

Command-line tools print ``str(error)`` and exit non-zero; no traceback reaches a user
for input they got wrong.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class FastsubsError(Exception):
    """Base of every error caused by input (a model, an index, a query text)."""


class ModelFormatError(FastsubsError):
    """An ARPA file that cannot be read: names the file, the line and what was expected."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")

    def __reduce__(self) -> tuple[type, tuple[str, int | None, str]]:
        """Pickled with its parts (a build's job process sends it to the building process)."""
        return type(self), (self.path, self.line, self.message)


class IndexFileError(FastsubsError):
    """Base of errors about an index directory (not an index, damaged, too new)."""


class NotAnIndexError(IndexFileError):
    """The path holds no fastsubs index (or one whose build never finished)."""


class IndexVersionError(IndexFileError):
    """The index was written by a newer (or older, incompatible) format version."""


class DamagedIndexError(IndexFileError):
    """The index is an index, but its contents are inconsistent (truncated, bytes flipped)."""


class BuildCheckError(FastsubsError):
    """A finished build does not hold the whole model: a fault of the builder, so nothing is published."""


class TargetNotAnIndexError(FastsubsError):
    """A build's target holds something other than a fastsubs index: it is never replaced."""

    def __init__(self, path: object, what: str) -> None:
        self.path = path
        super().__init__(f"{path}: {what}; a build replaces only a fastsubs index, so nothing was changed")


class IndexExistsError(FastsubsError):
    """Building would overwrite an existing index and ``force`` was not given.

    ``flag`` is how the caller says "force": ``force=True`` in Python, ``--force`` on the command line.
    ``appeared``: the index was not there when the build started (another build published it
    meanwhile), which the message says, so that the user knows whose index it is.
    """

    def __init__(self, path: object, flag: str = "force=True", appeared: bool = False) -> None:
        self.path = path
        self.appeared = appeared
        there = "appeared there while this build ran (another build's?)" if appeared else "is already there"
        super().__init__(f"{path}: an index {there}; pass {flag} to replace it")


class QueryInputError(FastsubsError):
    """A query input record that cannot be read: names the input and the line."""

    def __init__(self, source: str, line: int, message: str) -> None:
        self.source = source
        self.line = line
        self.message = message
        super().__init__(f"{source}:{line}: {message}")

    def __reduce__(self) -> tuple[type, tuple[str, int, str]]:
        # Raised in worker processes too: pickled with its own arguments, not the formatted line.
        return type(self), (self.source, self.line, self.message)


class ArgumentError(FastsubsError, ValueError):
    """A Python API argument out of its range (``n``, ``p``, a position).

    Also a ValueError, which is what such calls raised before and what callers may catch.
    """


class OutputError(FastsubsError):
    """Writing the output failed (a full disk, an unwritable path): names the file."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: cannot write the output ({reason})")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """(Sent whole from a worker process, which is where a dataset's parts are written.)"""
        return type(self), (self.path, self.reason)


def add_note(error: BaseException, note: str) -> None:
    """``error.add_note(note)`` on any Python this supports (the method is 3.11's): the
    note goes where the tools' error line reads it (``__notes__``)."""
    error.__notes__ = [*getattr(error, "__notes__", ()), note]


class TemporaryFileError(FastsubsError):
    """A run's temporary files cannot be written (a full ``$TMPDIR``): names their directory
    and says how to give the run another."""

    def __init__(self, directory: str, reason: str) -> None:
        self.directory = directory
        self.reason = reason
        super().__init__(f"{directory}: cannot write the run's temporary files ({reason}); set TMPDIR to a "
                         "directory with room for the long lines of the input and their output")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:
        """(Sent whole from a worker process, which writes a long line's output there.)"""
        return type(self), (self.directory, self.reason)


@contextmanager
def temporary_errors_named(directory: str) -> Iterator[None]:
    """Turn an OSError while writing a temporary file in ``directory`` into a
    TemporaryFileError that names it."""
    try:
        yield
    except OSError as error:
        raise TemporaryFileError(directory, error.strerror or str(error)) from None


def missing_extra(what: str, extra: str, detail: str = "") -> FastsubsError:
    """The error for a feature whose optional dependencies (the package's ``extra``) are not
    installed, with the command that installs them: fastsubs is installed from its clone,
    not from a package index, so the package's name with the extra would find nothing."""
    return FastsubsError(f"{what}: run in the fastsubs clone: pip install '.[{extra}]'"
                         + (f" ({detail})" if detail else ""))


class ResumeError(FastsubsError):
    """``--resume`` found a partial output it cannot continue (another input, index or options)."""


@contextmanager
def errors_named(path: str) -> Iterator[None]:
    """Turn an OSError while writing into an OutputError that names ``path``."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        raise OutputError(path, error.strerror or str(error)) from None
