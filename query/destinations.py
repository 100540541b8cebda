"""Where a run's output goes: stdout as it comes, or ``-o OUT`` atomically and resumably.

``-o OUT`` writes ``OUT.partial`` beside OUT and renames it onto OUT only once the whole
input is done, so OUT never holds a shortened result.  ``OUT.partial.json`` records how
far the partial output is good for: the input lines whose output it holds completely,
its byte length then, and a SHA-256 of those input lines; plus what the output belongs
to (the index's model, the options).  It is rewritten atomically, about every
COMMIT_SECONDS and when a run stops, only after the output it describes was flushed to
disk, so after any kind of death (SIGKILL, power loss) it describes a prefix of what is
on disk: ``--resume`` cuts the files back to it, checks that the input starts with the
same lines, and goes on with the next line.

A compressed OUT is written as a series of gzip members (bz2, xz streams), each ended
after the input line that brings it to MEMBER_BYTES of uncompressed output: points
that depend only on the output, not on timing or workers.  The member being written
cannot be resumed from its compressed bytes, so its uncompressed text is kept beside
it in ``OUT.partial.tail`` (at most about MEMBER_BYTES); a resumed run compresses that
text again into a new member and goes on.  Compressing is deterministic and does not
depend on how the text was cut into writes, so a resumed run ends with the same bytes
as an uninterrupted one.

When OUT is published, ``OUT.json`` (:mod:`fastsubs.query.provenance`) is written just
before it, so OUT never appears without the record of what produced it.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from fastsubs.cli_support import signals_held
from fastsubs.errors import OutputError, ResumeError
from fastsubs.limits import DEFAULT_COUNT
from fastsubs.query.provenance import SUFFIX as PROVENANCE_SUFFIX
from fastsubs.query.provenance import finished_record
from fastsubs.textio import compressing_writer, compression, open_binary

#: Appended to OUT for the file being written, and for the record of how far it got.
PARTIAL_SUFFIX = ".partial"
STATE_SUFFIX = ".partial.json"
TAIL_SUFFIX = ".partial.tail"
STATE_FORMAT = "fastsubs-partial-output"
STATE_VERSION = 1
#: Uncompressed output per gzip member (bz2/xz stream), also the most that OUT.partial.tail holds.
MEMBER_BYTES = 1 << 20
#: Progress is recorded at most this often (each record costs a few fsyncs).
COMMIT_SECONDS = 1.0


def run_identity(record: dict[str, Any]) -> dict[str, Any]:
    """What a partial output belongs to, beyond its input: of the run's record
    (:func:`fastsubs.query.provenance.run_record`), the parts its output depends on: the
    model compiled into the index (its SHA-256), the output options (any dataclass:
    every field counts) and the fastsubs version; not the index's path, nor the worker
    count.  OUT.partial.json keeps it, and ``--resume`` compares it."""
    index = record["index"]
    return {
        "index": {"model_sha256": index["model"]["sha256"], "format_version": index["format_version"],
                  "vocab_size": index["vocab_size"]},
        "options": json.loads(json.dumps(record["options"])),
        "fastsubs": record["fastsubs"],
    }


@contextmanager
def _naming(path: str) -> Iterator[None]:
    """Turn an OSError while writing into an OutputError that names ``path``."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        raise OutputError(path, error.strerror or str(error)) from None


class StreamOutput:
    """Output written as it comes, a chunk at a time: stdout, or an ``-o`` that is no
    regular file (``/dev/null``).

    A chunk's lines go out in one write: stdout's binary stream is unbuffered where
    PYTHONUNBUFFERED is set (as on this project's machines), and a system call per line
    was ~2% of a run, all of it in the process that writes (the busiest one of a
    ``--workers`` run).
    """

    def __init__(self, stream: BinaryIO, name: str, owned: bool = False) -> None:
        self.stream = stream
        self.name = name
        self.owned = owned  # opened here (a device given as -o), so closed here
        self._chunk: list[bytes] = []

    def write(self, line: bytes, text: bytes) -> None:
        self._chunk.append(text)

    def checkpoint(self) -> None:
        """Writes the chunk (a stream cannot be resumed: nothing to record)."""
        if self._chunk:
            text = b"".join(self._chunk)
            self._chunk.clear()
            with _naming(self.name):
                self.stream.write(text)

    def finish(self) -> None:
        self.checkpoint()
        with _naming(self.name):
            self.stream.flush()
            if self.owned:
                self.stream.close()

    def abandon(self, error: BaseException) -> None:
        """Pass on what was written (every record before a bad one, say), as :meth:`finish`
        does, but quietly: the run is failing anyway, with ``error``."""
        with suppress(OSError, OutputError):
            self.finish()


class PartialOutput:
    """``-o OUT``: OUT.partial (and OUT.partial.tail), their progress in OUT.partial.json,
    renamed onto OUT at the end."""

    def __init__(self, target: Path, run_record: dict[str, Any], source: str, warn: Callable[[str], None]) -> None:
        self.target = target
        self.run_record = run_record  # for OUT.json (fastsubs.query.provenance), written with OUT
        self.identity = run_identity(run_record)  # for OUT.partial.json
        self.partial = f"{target}{PARTIAL_SUFFIX}"
        self.tail_path = f"{target}{TAIL_SUFFIX}"
        self.state_path = f"{target}{STATE_SUFFIX}"
        self.source = source
        self.warn = warn
        self.compressed = compression(target) is not None
        self.lines = 0  # input lines whose output is written (not necessarily on disk yet)
        self.recorded_lines = 0  # … and whose output a --resume would keep
        self._digest = hashlib.sha256()  # of those input lines
        self._raw: BinaryIO | None = None
        self._tail: BinaryIO | None = None  # compressed outputs: the open member's text
        self._member: BinaryIO | None = None  # the open gzip member (bz2/xz stream), if any
        self._members_end = 0  # bytes of OUT.partial in complete members (compressed outputs)
        self._tail_bytes = 0  # text of the open member (compressed outputs)
        self._committed_at = time.monotonic()

    # --- starting ---------------------------------------------------------------------

    def start(self, resume: bool, done_lines: Callable[[int], Iterable[bytes]]) -> int:
        """Open OUT.partial: anew, or (``resume``) continued where its record says, after
        checking that it belongs to this run and that the input starts with the lines it
        was made from (``done_lines(k)`` gives the input's first k lines).  Returns the
        number of input lines already done."""
        if os.path.isdir(self.target):
            raise OutputError(str(self.target), "it is a directory")
        state = self._load_state()
        if resume and state is None:
            self.warn(f"fastsubs-query: note: no interrupted run to resume at {self.partial}; "
                      "starting from the first line")
        if not resume and os.path.exists(self.partial):
            self.warn(f"fastsubs-query: note: starting over; the partial output of an interrupted run "
                      f"at {self.partial} is replaced (--resume would continue it)")
        with _naming(self.partial):
            if resume and state is not None:
                self._continue(state, done_lines)
            else:
                self._raw = open(self.partial, "wb")
                if self.compressed:
                    self._tail = open(self.tail_path, "wb")
                self._commit()
        return self.lines

    def _load_state(self) -> dict[str, Any] | None:
        """The recorded progress, or None when there is no interrupted run to continue."""
        needed = [self.partial, self.state_path] + ([self.tail_path] if self.compressed else [])
        if not all(os.path.isfile(path) for path in needed):
            return None
        try:
            with open(self.state_path, "rb") as stream:
                state = json.load(stream)
            if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
                raise ValueError("not a record of fastsubs-query's partial output")
            point = state["resume"]
            int(point["lines"]), int(point["bytes"]), int(point["tail_bytes"]), str(point["input_sha256"])
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ResumeError(f"{self.state_path}: cannot read the record of the interrupted run ({error}); "
                              "run without --resume to start over") from None
        return state

    def _continue(self, state: dict[str, Any], done_lines: Callable[[int], Iterable[bytes]]) -> None:
        self._check_identity(state["run"])
        point = state["resume"]
        lines, size, tail_size = int(point["lines"]), int(point["bytes"]), int(point["tail_bytes"])
        if os.path.getsize(self.partial) < size or (self.compressed and os.path.getsize(self.tail_path) < tail_size):
            raise ResumeError(f"{self.partial} is shorter than its record says; run without --resume to start over")
        digest = hashlib.sha256()
        read = 0
        for line in done_lines(lines):
            digest.update(line)
            read += 1
        if read < lines:
            raise ResumeError(f"{self.partial} holds the output of {lines:,} input lines, but {self.source} "
                              f"has only {read:,}: it belongs to another input; run without --resume to start over")
        if digest.hexdigest() != point["input_sha256"]:
            raise ResumeError(f"{self.partial} belongs to another input: the first {lines:,} lines of "
                              f"{self.source} are not those it was made from; run without --resume to start over")
        self._raw = _reopened(self.partial, size)  # whatever came after the record may be cut short
        self._members_end = size
        if self.compressed:
            self._tail = _reopened(self.tail_path, tail_size)
            self._tail.seek(0)
            text = self._tail.read()
            self._tail_bytes = len(text)
            if text:
                self._member = self._new_member()
                self._member.write(text)
        self.lines = lines
        self._digest = digest
        self._commit()

    def _check_identity(self, recorded: dict[str, Any]) -> None:
        recorded = _with_the_count_used(recorded)
        for part, what in (("index", "index (another model)"), ("options", "options"),
                           ("fastsubs", "fastsubs version")):
            if recorded.get(part) != self.identity[part]:
                detail = ""
                if part == "options":
                    old, new = recorded.get(part) or {}, self.identity[part]
                    detail = " (" + ", ".join(k for k in new if old.get(k) != new[k]) + ")"
                raise ResumeError(f"{self.partial} was written with another {what}{detail}; "
                                  "run without --resume to start over")

    # --- writing ------------------------------------------------------------------------

    def write(self, line: bytes, text: bytes) -> None:
        """The complete output ``text`` of input ``line``."""
        assert self._raw is not None, "start() first"
        with _naming(self.partial):
            if not self.compressed:
                self._raw.write(text)
            elif text:
                assert self._tail is not None
                if self._member is None:
                    self._member = self._new_member()
                self._member.write(text)
                self._tail.write(text)
                self._tail_bytes += len(text)
            self._digest.update(line)
            self.lines += 1
            if self._tail_bytes >= MEMBER_BYTES:
                self._end_member()

    def checkpoint(self) -> None:
        """Between chunks: record the progress if it is due."""
        if time.monotonic() - self._committed_at >= COMMIT_SECONDS:
            with _naming(self.partial):
                self._commit()

    def _new_member(self) -> BinaryIO:
        member = compressing_writer(self._raw, self.target)  # type: ignore[arg-type]
        assert member is not None
        return member

    def _end_member(self) -> None:
        """Complete the open member; once it is on disk and recorded, its text is no longer kept."""
        assert self._member is not None and self._raw is not None and self._tail is not None
        self._member.close()
        self._member = None
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._members_end = self._raw.tell()
        self._tail_bytes = 0
        self._commit()  # before the text goes: a record must never promise more tail than there is
        self._tail.seek(0)
        self._tail.truncate()

    def _commit(self) -> None:
        """Flush what the record will describe to disk, then record it (atomically)."""
        assert self._raw is not None
        with signals_held():
            if self.compressed:
                assert self._tail is not None
                kept, size = self._tail, self._members_end
            else:
                kept = self._raw
                size = self._raw.tell()
            kept.flush()
            os.fsync(kept.fileno())
            point = {"lines": self.lines, "bytes": size, "tail_bytes": self._tail_bytes,
                     "input_sha256": self._digest.copy().hexdigest()}
            state = {"format": STATE_FORMAT, "version": STATE_VERSION, "run": self.identity,
                     "input": self.source, "resume": point}
            _write_json(self.state_path, state)
        self.recorded_lines = self.lines
        self._committed_at = time.monotonic()

    # --- ending -------------------------------------------------------------------------

    def finish(self) -> None:
        """The whole input is done: OUT.partial becomes OUT, and the rest goes."""
        assert self._raw is not None
        with signals_held():
            with _naming(self.partial):
                if self._member is not None:
                    self._member.close()
                if self.compressed and self._raw.tell() == 0:  # no output at all: still a valid file
                    self._new_member().close()
                self._raw.flush()
                os.fsync(self._raw.fileno())
                self._raw.close()
            with _naming(str(self.target)):
                # first: OUT never appears without its record
                _write_json(f"{self.target}{PROVENANCE_SUFFIX}", finished_record(
                    self.run_record, self.target, self.source, self.lines, self._digest.hexdigest()))
                os.replace(self.partial, self.target)
                os.unlink(self.state_path)
                if self._tail is not None:
                    self._tail.close()
                    os.unlink(self.tail_path)
                _sync_directory(str(self.target))

    def abandon(self, error: BaseException) -> None:
        """The run stops early (a signal, a bad record, damaged input, a full disk): record
        everything written so far, and say on ``error`` where it is kept."""
        if self._raw is None or self._raw.closed:
            return
        try:
            self._commit()
            if self._member is not None:
                # Completes OUT.partial as a file to look at; the record still ends at
                # the members before, and a resumed run compresses the tail again.
                self._member.close()
                self._raw.flush()
        except OSError:
            pass  # a full disk, say: the last record still describes what is on disk
        finally:
            # The open member first, also where the steps above failed before closing it
            # (a full disk): a gzip writer collected unclosed would flush into the closed
            # file (Python 3.12+ buffers its writes) and print a traceback.
            for stream in (self._member, self._raw, self._tail):
                try:
                    if stream is not None:
                        stream.close()
                except OSError:
                    pass
        if self.recorded_lines:
            # error.add_note() where Python has it (3.11+): the same list, which the error line reads
            error.__notes__ = [*getattr(error, "__notes__", ()),
                               f"{self.partial} keeps the output of the first {self.recorded_lines:,} input lines; "
                               "the same command with --resume continues it"]


def _with_the_count_used(identity: dict[str, Any]) -> dict[str, Any]:
    """A recorded run identity with ``n`` the count its search used: partial outputs written
    before the options recorded it have ``n`` null where neither -n nor -p was given (100)."""
    options = identity.get("options")
    if isinstance(options, dict) and options.get("n") is None and options.get("p") is None:
        return {**identity, "options": {**options, "n": DEFAULT_COUNT}}
    return identity


def _reopened(path: str, size: int) -> BinaryIO:
    """``path`` opened for writing at ``size``, anything after it cut off."""
    stream = open(path, "r+b")
    stream.truncate(size)
    stream.seek(size)
    return stream


def refuse_the_input_as_output(output_path: Path | None, input_path: Path | None, stdin: BinaryIO) -> None:
    """OutputError when ``-o`` names the input itself (the same file, a hard link, a
    symbolic link to it; ``-i`` or stdin redirected from it), before anything is written:
    the finished output would be renamed onto it, and the input would be gone.

    Files are compared by device and inode (``os.path.samefile``), so the names need not
    match and a compressed input is the same file as itself; only a regular file can be
    replaced this way (``-i /dev/stdin -o /dev/stdout`` on a terminal is fine).
    """
    if output_path is None:
        return
    try:
        output = os.stat(output_path)
        source = os.stat(input_path) if input_path is not None else os.fstat(stdin.fileno())
    except (OSError, ValueError):
        return  # no such output yet (or no input to compare): it cannot be the input
    if stat.S_ISREG(output.st_mode) and os.path.samestat(output, source):
        which = f"the input file {input_path}" if input_path is not None else "the file stdin reads"
        raise OutputError(str(output_path), f"it is {which}; the output would replace it: name another file")


def destination(output_path: Path | None, run_record: dict[str, Any], source: str,
                warn: Callable[[str], None], stdout: BinaryIO) -> StreamOutput | PartialOutput:
    """The output of a run: stdout, OUT written atomically (with OUT.json made from
    ``run_record``, :func:`fastsubs.query.provenance.run_record`), or a device/pipe given as ``-o``."""
    if output_path is None:
        return StreamOutput(stdout, "<stdout>")
    try:
        mode = os.stat(output_path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return PartialOutput(output_path, run_record, source, warn)
    with _naming(str(output_path)):
        return StreamOutput(open_binary(output_path, "wb"), str(output_path), owned=True)


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Replace ``path`` by ``data`` as JSON, atomically and durably."""
    temporary = f"{path}.tmp"
    try:
        with open(temporary, "w") as stream:
            json.dump(data, stream, indent=1)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        _remove(temporary)
        raise
    _sync_directory(path)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _sync_directory(path: str) -> None:
    """fsync the directory holding ``path``, so a rename or a new file in it survives a crash."""
    descriptor = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
