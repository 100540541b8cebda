"""Where a run's output goes: stdout as it comes, or ``-o OUT`` atomically and resumably.

Output arrives a chunk of input lines at a time (:mod:`fastsubs.pipeline.lines`), finished by
the process that searched it: text, or for a compressed OUT one complete gzip member (bz2,
xz stream) per chunk.  Chunk boundaries depend on the input alone, so OUT's bytes are the
same for any number of workers.

``-o OUT`` writes ``OUT.partial`` beside OUT and renames it onto OUT only once the whole
input is done, so OUT never holds a shortened result.  ``OUT.partial.json`` records how
far the partial output is good for: the input lines whose output it holds completely (up
to the end of a whole block of CHUNK_LINES) with a SHA-256 of those input lines, what the
output holds for them (its byte length and a SHA-256 of those bytes; a dataset's parts,
each by name with its size and SHA-256), and what the output belongs to (the index's
model, the options, the compressor).  It is rewritten atomically, about every
COMMIT_SECONDS (a dataset's after each whole part) and when a run stops, only after the
output it describes was flushed to disk, so after any kind of death (SIGKILL, power loss)
it describes a prefix of what is on disk.  ``--resume`` trusts none of it unchecked: it
checks that the input starts with the same lines and that the output holds what the
record says (reading it back once), refuses in one line what does not match, cuts the
file back to the record (members are whole there; a dataset's unrecorded parts are
removed by name), and goes on with the next block, which an uninterrupted run would have
started there too: a resumed run ends with the same bytes as an uninterrupted one.

When OUT is published, ``OUT.json`` (:mod:`fastsubs.query.provenance`) is written just
before it, so OUT never appears without the record of what produced it.

One record (:class:`PartialOutput`) serves two sinks: :class:`ByteFile` (text, a
compressed stream, JSON lines) and :class:`PartDirectory` (a Parquet dataset, whose parts
are written by the processes that search, under a temporary name, and published into
``OUT.partial/`` in input order; the whole directory becomes OUT at the end, so a reader
of OUT never sees a dataset missing parts).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

from fastsubs.errors import OutputError, ResumeError, add_note, errors_named
from fastsubs.pipeline.lines import TEXT_BLOCKS, Blocks
from fastsubs.pipeline.long_lines import Line, line_pieces
from fastsubs.pipeline.parts import PART_NAME, PART_TEMPORARY_PREFIX, is_part, publish_part
from fastsubs.pipeline.processes import signals_held
from fastsubs.pipeline.textio import Compressor, file_sha256
from fastsubs.query.provenance import FLAGS, finished_record
from fastsubs.query.provenance import SUFFIX as PROVENANCE_SUFFIX

#: Appended to OUT for the file being written, and for the record of how far it got.
PARTIAL_SUFFIX = ".partial"
STATE_SUFFIX = ".partial.json"
#: Appended to a dataset's OUT for the earlier dataset it replaces, while it is removed.
REPLACED_SUFFIX = ".replaced"
STATE_FORMAT = "fastsubs-partial-output"
STATE_VERSION = 3
#: Progress is recorded at most this often (each record costs a few fsyncs).
COMMIT_SECONDS = 1.0


def run_identity(record: dict[str, Any]) -> dict[str, Any]:
    """What a partial output belongs to, beyond its input: of the run's record
    (:func:`fastsubs.query.provenance.run_record`), the parts its output depends on: the
    model compiled into the index (its SHA-256), the output options (any dataclass:
    every field counts), the compressor and the fastsubs version; not the index's path, nor
    the worker count."""
    index = record["index"]
    return {
        "index": {"model_sha256": index["model"]["sha256"], "format_version": index["format_version"],
                  "vocab_size": index["vocab_size"]},
        "options": json.loads(json.dumps(record["options"])),
        "compression": record["compression"],
        "fastsubs": record["fastsubs"],
    }


class StreamOutput:
    """Output written as it comes, a chunk at a time: stdout, or an ``-o`` that is no
    regular file (``/dev/null``).  A chunk goes out in one write (stdout's binary stream is
    unbuffered where PYTHONUNBUFFERED is set, and a system call per line was ~2% of a run)."""

    def __init__(self, stream: BinaryIO, name: str, owned: bool = False) -> None:
        self.stream = stream
        self.name = name
        self.owned = owned  # opened here (a device given as -o), so closed here

    def write(self, lines: list[Line], data: bytes, complete: bool, part: str | None = None) -> None:
        """The output ``data`` of input ``lines`` (a stream cannot be resumed: nothing to record)."""
        with errors_named(self.name):
            self.stream.write(data)

    def finish(self) -> None:
        with errors_named(self.name):
            self.stream.flush()
            if self.owned:
                self.stream.close()

    def abandon(self, error: BaseException) -> None:
        """Pass on what was written (every line before a bad one, say), as :meth:`finish`
        does, but quietly: the run is failing anyway, with ``error``."""
        with suppress(OSError, OutputError):
            self.finish()


class PartialOutput:
    """``-o OUT``: a sink's partial output (:class:`ByteFile` OUT.partial, or
    :class:`PartDirectory` OUT.partial/), its progress in OUT.partial.json, published as
    OUT at the end.  The record says how many input lines are done (with a SHA-256 of
    them) and what the sink holds for them (with a SHA-256 of that): ``--resume`` checks
    both before it keeps anything."""

    def __init__(self, target: Path, run_record: dict[str, Any], source: str, warn: Callable[[str], None],
                 sink: ByteFile | PartDirectory, workers: int = 1, blocks: Blocks = TEXT_BLOCKS) -> None:
        self.target = target
        self.sink = sink
        self.blocks = blocks  # how the input is cut: a resumed run starts at one of its blocks
        self.run_record = run_record  # for OUT.json (fastsubs.query.provenance), written with OUT
        self.workers = workers  # ... whose command line names them
        self.identity = run_identity(run_record)  # for OUT.partial.json
        self.partial = sink.path
        self.state_path = f"{target}{STATE_SUFFIX}"
        self.source = source
        self.warn = warn
        self.lines = 0  # input lines whose output is written (not necessarily on disk yet)
        self.recorded_lines = 0  # … and whose output a --resume would keep
        self._digest = hashlib.sha256()  # of those input lines
        # (lines, the sink's mark, digest of the lines) at the last block boundary
        self._boundary: tuple[int, dict[str, Any], Any] = (0, {}, self._digest.copy())
        self._committed_at = time.monotonic()

    # --- starting ---------------------------------------------------------------------

    def start(self, resume: bool, done_lines: Callable[[int], Iterable[Line]]) -> int:
        """Open the partial output: anew, or (``resume``) continued where its record says,
        after checking that it belongs to this run, that the input starts with the lines it
        was made from (``done_lines(k)`` gives the input's first k lines) and that the sink
        holds what the record says.  Returns the number of input lines already done."""
        self.sink.check_target(self.target)
        state = self._load_state() if resume else None  # starting over reads nothing of it
        if resume and state is None:
            self.warn(f"fastsubs-query: note: no interrupted run to resume at {self.partial}; "
                      "starting from the first line")
        if not resume and self.sink.exists():
            self.warn(f"fastsubs-query: note: starting over; the partial output of an interrupted run "
                      f"at {self.partial} is replaced (--resume would continue it)")
        with errors_named(self.partial):
            if resume and state is not None:
                self._continue(state, done_lines)
            else:
                self.sink.create()
                self._boundary = (0, self.sink.mark(), self._digest.copy())
                self._commit()
        return self.lines

    def _load_state(self) -> dict[str, Any] | None:
        """The recorded progress, or None when there is no interrupted run to continue."""
        if not (self.sink.exists() and os.path.isfile(self.state_path)):
            return None
        try:
            with open(self.state_path, "rb") as stream:
                state = json.load(stream)
            if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
                raise ValueError("not a record of a fastsubs-query's partial output")
            if state.get("version") != STATE_VERSION:
                raise ValueError(f"written by another version of fastsubs-query, whose partial outputs this "
                                 f"one cannot continue: record version {state.get('version')}, this one's "
                                 f"{STATE_VERSION}")
            point = state["resume"]
            lines, _ = int(point["lines"]), str(point["input_sha256"])
            if lines < 0 or lines % self._resume_step():
                raise ValueError(f"{lines:,} lines is not a multiple of {self._resume_step()}")
            if point["output"].get("kind") != self.sink.kind:
                raise ValueError(f"it records a {point['output'].get('kind')}, not a {self.sink.kind}")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            raise ResumeError(f"{self.state_path}: cannot read the record of the interrupted run ({error}); "
                              "run without --resume to start over") from None
        return state

    def _resume_step(self) -> int:
        """What a recorded count of lines is a multiple of: a block's lines.  A dataset's
        record stops after each part, the input's last too, of whatever size the end of the
        input made it (a run killed between that record and the publish is resumed with
        nothing left to search): its parts, each checked in turn (:meth:`PartDirectory.reopen`),
        stand for its count."""
        return 1 if self.sink.kind == PartDirectory.kind else self.blocks.lines

    def _continue(self, state: dict[str, Any], done_lines: Callable[[int], Iterable[Line]]) -> None:
        self._check_identity(state["run"])
        point = state["resume"]
        lines = int(point["lines"])
        digest = hashlib.sha256()
        read = 0
        for line in done_lines(lines):
            for piece in line_pieces(line):
                digest.update(piece)
            read += 1
        if read < lines:
            raise ResumeError(f"{self.partial} holds the output of {lines:,} input lines, but {self.source} "
                              f"has only {read:,}: it belongs to another input; run without --resume to start over")
        if digest.hexdigest() != point["input_sha256"]:
            raise ResumeError(f"{self._not_its_input(lines)}; run without --resume to start over")
        try:
            self.sink.reopen(point["output"], lines)
        except (_Damaged, KeyError, TypeError, ValueError) as error:
            what = error if isinstance(error, _Damaged) else f"its record is damaged ({error!r})"
            raise ResumeError(f"{self.partial} is damaged: {what}; run without --resume to start over") from None
        self.lines = lines
        self._digest = digest
        self._boundary = (lines, self.sink.mark(), digest.copy())
        self._commit()

    def _not_its_input(self, lines: int) -> str:
        """Why the first ``lines`` lines of the input are not those the record names: the
        input is another, or the record was changed (which of the two, a SHA-256 cannot
        say, but for a record of no lines: every input starts with those)."""
        if not lines:
            return f"{self.partial} is damaged: its record says no input line is done, but not with the SHA-256 of none"
        return (f"{self.partial} belongs to another input, or its record was changed: the first {lines:,} lines of "
                f"{self.source} are not those it records")

    def _check_identity(self, recorded: dict[str, Any]) -> None:
        for part, what in (("index", "another index (another model)"), ("options", "other options"),
                           ("compression", "another compressor or compression level"),
                           ("fastsubs", "another fastsubs version")):
            if recorded.get(part) != self.identity[part]:
                detail = ""
                if part == "options":
                    old, new = recorded.get(part) or {}, self.identity[part]
                    detail = " (" + ", ".join(f"{FLAGS.get(k, k)} was {_shown(old.get(k))}"
                                              for k in new if old.get(k) != new[k]) + ")"
                raise ResumeError(f"{self.partial} was written with {what}{detail}; "
                                  "run without --resume to start over")

    # --- writing ------------------------------------------------------------------------

    def write(self, lines: list[Line], data: bytes, complete: bool, part: str | None = None) -> None:
        """The finished output ``data`` of input ``lines`` (a dataset's: ``part``, the path
        of its part file): a whole chunk when ``complete``, else the lines of a chunk before
        a bad record (written, to be seen, but not recorded).  Records the progress after a
        whole block, when it is due: a resumed run starts at a block, and cuts the rest into
        the chunks of an uninterrupted run, even of an input that has grown or been mended
        since (the blocks near an input's end are cut smaller, so what follows the last
        whole block is never recorded).  A dataset's progress is recorded after every part,
        of the tail too, so that its record never lags the parts published: resumed after a
        part of the tail, the rest of that block is cut as an uninterrupted run cut it (of
        the same input; of one grown since, the same rows in other parts)."""
        with errors_named(self.partial):
            self.sink.append(data, part, len(lines))
            if not complete:
                return
            for line in lines:
                for piece in line_pieces(line):
                    self._digest.update(piece)
            self.lines += len(lines)
            if part is not None:  # a dataset's part, whole: recorded at once
                self._boundary = (self.lines, self.sink.mark(), self._digest.copy())
                self._commit()
            elif len(lines) == self.blocks.lines:  # a whole block (chunks never cross one)
                self._boundary = (self.lines, self.sink.mark(), self._digest.copy())
                if time.monotonic() - self._committed_at >= COMMIT_SECONDS:
                    self._commit()

    def _commit(self) -> None:
        """Flush what the record will describe to disk, then record the last block boundary
        (atomically)."""
        lines, output, digest = self._boundary
        with signals_held():
            self.sink.sync()
            point = {"lines": lines, "input_sha256": digest.hexdigest(), "output": {"kind": self.sink.kind, **output}}
            state = {"format": STATE_FORMAT, "version": STATE_VERSION, "run": self.identity,
                     "input": self.source, "resume": point}
            _write_json(self.state_path, state)
        self.recorded_lines = lines
        self._committed_at = time.monotonic()

    # --- ending -------------------------------------------------------------------------

    def finish(self) -> None:
        """The whole input is done: the partial output becomes OUT, and the rest goes."""
        with signals_held():
            with errors_named(self.partial):
                self.sink.close()
            with errors_named(str(self.target)):
                # first: OUT never appears without its record
                _write_json(f"{self.target}{PROVENANCE_SUFFIX}", finished_record(
                    self.run_record, self.target, self.source, self.lines, self._digest.hexdigest(), self.workers))
                self.sink.publish(self.target)
                os.unlink(self.state_path)
                _sync_directory(str(self.target))

    def abandon(self, error: BaseException) -> None:
        """The run stops early (a signal, a bad record, damaged input, a full disk): record
        everything written so far up to the last block boundary, and say on ``error`` where
        it is kept."""
        if not self.sink.is_open():
            return
        try:
            self._commit()
        except OSError:
            pass  # a full disk, say: the last record still describes what is on disk
        finally:
            with suppress(OSError):
                self.sink.drop()
        if self.recorded_lines:
            add_note(error, f"{self.partial} keeps the output of the first {self.recorded_lines:,} input lines; "
                            "the same command with --resume continues it")


class _Damaged(Exception):
    """What a sink found wrong with the partial output its record describes (the message
    says what; PartialOutput says what to do)."""


class ByteFile:
    """OUT.partial as one file of bytes (text, a compressed stream of whole members, JSON
    lines).  Its record: the length kept so far and a SHA-256 of those bytes, kept as they
    are written (one pass over the data) and checked on resume by reading them back."""

    kind = "file"

    def __init__(self, path: str, compress: Compressor | None) -> None:
        self.path = path
        self.compress = compress
        self._raw: BinaryIO | None = None
        self._hash = hashlib.sha256()

    def check_target(self, target: Path) -> None:
        if os.path.isdir(target):
            raise OutputError(str(target), "it is a directory")

    def exists(self) -> bool:
        return os.path.isfile(self.path)

    def create(self) -> None:
        if os.path.isdir(self.path) and not os.path.islink(self.path):  # a dataset's partial output
            shutil.rmtree(self.path)
        self._raw = open(self.path, "wb")
        self._hash = hashlib.sha256()

    def reopen(self, recorded: dict[str, Any], lines: int) -> None:
        """Continue after the recorded bytes, once they are read back and found whole;
        whatever follows them (written after the record) is cut off.  (How many bytes
        ``lines`` input lines make is not known: the hash stands for them.)"""
        size, expected = int(recorded["bytes"]), str(recorded["sha256"])
        if size < 0:
            raise _Damaged(f"its record says {size} bytes")
        digest = hashlib.sha256()
        with open(self.path, "rb") as stream:
            left = size
            while left:
                block = stream.read(min(left, 1 << 20))
                if not block:
                    raise _Damaged(f"it is shorter than the {size:,} bytes its record says")
                digest.update(block)
                left -= len(block)
        if digest.hexdigest() != expected:
            raise _Damaged(f"its first {size:,} bytes are not those recorded (their SHA-256 differs)")
        self._raw = _reopened(self.path, size)
        self._hash = digest

    def append(self, data: bytes, part: str | None, lines: int) -> None:
        """The output of ``lines`` input lines (which the record counts on its own)."""
        assert self._raw is not None, "start() first"
        self._raw.write(data)
        self._hash.update(data)

    def mark(self) -> dict[str, Any]:
        """The record of everything appended so far."""
        assert self._raw is not None
        return {"bytes": self._raw.tell(), "sha256": self._hash.hexdigest()}

    def sync(self) -> None:
        assert self._raw is not None
        self._raw.flush()
        os.fsync(self._raw.fileno())

    def close(self) -> None:
        assert self._raw is not None
        if self.compress is not None and self._raw.tell() == 0:  # no output at all: still a valid file
            self._raw.write(self.compress(b""))
        self.sync()
        self._raw.close()

    def publish(self, target: Path) -> None:
        os.replace(self.path, target)

    def is_open(self) -> bool:
        return self._raw is not None and not self._raw.closed

    def drop(self) -> None:
        """Close what is written, as it is (the run is failing)."""
        assert self._raw is not None
        self._raw.close()


class PartDirectory:
    """OUT.partial as a directory of a Parquet dataset's parts, each written by the process
    that searched it under a temporary name and published here in input order.  Its record:
    each part kept so far by name, with its size and SHA-256 (hashed as it is published);
    on resume the recorded parts are checked and taken by name, and any other is removed.

    OUT may be absent, an empty directory or a dataset of part files (an earlier run's,
    replaced at the end), never another kind of directory: its files would be lost."""

    kind = "dataset"

    def __init__(self, path: str) -> None:
        self.path = path
        self._parts: list[tuple[str, int, int, str]] = []  # (name, input lines, size, sha256) of each part
        self._writing = False

    def check_target(self, target: Path) -> None:
        if os.path.lexists(target) and not os.path.isdir(target):
            raise OutputError(str(target), "it is not a directory; --format parquet writes a dataset directory")
        if os.path.isdir(target):
            foreign = [name for name in os.listdir(target) if not is_part(name)]
            if foreign:
                raise OutputError(str(target), f"it holds {foreign[0]!r}, which is not a part of a dataset: "
                                               "name a new or empty directory")

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def create(self) -> None:
        if os.path.isdir(self.path) and not os.path.islink(self.path):
            shutil.rmtree(self.path)
        elif os.path.lexists(self.path):  # another format's partial output
            os.unlink(self.path)
        os.mkdir(self.path)
        self._parts, self._writing = [], True

    def reopen(self, recorded: dict[str, Any], lines: int) -> None:
        """Keep the recorded parts, once they are found to be the parts of the first
        ``lines`` input lines (named by their first lines, one after another, none
        missing) and each is found whole; remove any other."""
        parts = [(str(name), int(count), int(size), str(digest)) for name, count, size, digest in recorded["parts"]]
        if not _one_after_another(parts, lines):
            raise _Damaged(f"its record does not list the parts of the first {lines:,} input lines")
        names = [name for name, _, _, _ in parts]
        for name, _, size, digest in parts:
            path = os.path.join(self.path, name)
            if not os.path.isfile(path):
                raise _Damaged(f"its part {name} is missing")
            if os.path.getsize(path) != size or file_sha256(path) != digest:
                raise _Damaged(f"its part {name} is not the part recorded (its size or SHA-256 differs)")
        for name in set(os.listdir(self.path)) - set(names):
            os.unlink(os.path.join(self.path, name))
        self._parts, self._writing = parts, True

    def append(self, data: bytes, part: str | None, lines: int) -> None:
        """The part at path ``part``, the rows of ``lines`` input lines."""
        assert self._writing and part is not None, "start() first, and parts only"
        name = os.path.basename(part).removeprefix(PART_TEMPORARY_PREFIX)
        self._parts.append((name, lines, os.path.getsize(part), file_sha256(part)))
        publish_part(part, self.path)

    def mark(self) -> dict[str, Any]:
        return {"parts": [list(entry) for entry in self._parts]}

    def sync(self) -> None:
        _sync_directory(os.path.join(self.path, "."))

    def close(self) -> None:
        self.sync()
        self._writing = False

    def publish(self, target: Path) -> None:
        """OUT.partial becomes OUT; an earlier dataset there is moved aside to OUT.replaced
        first, then removed (one left by a run killed meanwhile goes first: OUT has one
        writer at a time, so nothing else uses that name)."""
        replaced = f"{target}{REPLACED_SUFFIX}"
        shutil.rmtree(replaced, ignore_errors=True)
        if os.path.isdir(target):
            os.rename(target, replaced)
        os.rename(self.path, target)
        if os.path.isdir(replaced):
            shutil.rmtree(replaced)

    def is_open(self) -> bool:
        return self._writing

    def drop(self) -> None:
        self._writing = False


def _one_after_another(parts: list[tuple[str, int, int, str]], lines: int) -> bool:
    """Whether ``parts`` (name, input lines, ...) hold input lines 1 ... ``lines``, each
    named by its first line, in order, none missing."""
    first = 1  # the next part's first input line
    for name, count, _, _ in parts:
        if name != PART_NAME.format(first) or count < 1:
            return False
        first += count
    return first == lines + 1


def _shown(value: Any) -> str:
    """An option's recorded value as a message shows it (``--exclude``'s words joined)."""
    if value is None or value is False:
        return "not given"
    if value is True:
        return "given"
    if isinstance(value, list):
        return " ".join(map(str, value)) or "none"
    return str(value)


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


def destination(output_path: Path | None, run_record: dict[str, Any], source: str, warn: Callable[[str], None],
                stdout: BinaryIO, compress: Compressor | None, workers: int = 1,
                blocks: Blocks | None = None) -> StreamOutput | PartialOutput:
    """The output of a run of ``workers`` processes: stdout, OUT written atomically (with
    OUT.json made from ``run_record``, :func:`fastsubs.query.provenance.run_record`), or a
    device/pipe given as ``-o`` (which takes the chunks as they come, compressed or not as
    its name asks); with ``blocks`` (a Parquet dataset's: its parts), the directory OUT."""
    if blocks is not None:
        if output_path is None:
            raise OutputError("<stdout>", "--format parquet writes a dataset directory: name it with -o")
        parts = PartDirectory(f"{output_path}{PARTIAL_SUFFIX}")
        return PartialOutput(output_path, run_record, source, warn, parts, workers, blocks)
    if output_path is None:
        return StreamOutput(stdout, "<stdout>")
    if published_whole(output_path, dataset=False):
        file = ByteFile(f"{output_path}{PARTIAL_SUFFIX}", compress)
        return PartialOutput(output_path, run_record, source, warn, file, workers)
    with errors_named(str(output_path)):
        return StreamOutput(open(output_path, "wb"), str(output_path), owned=True)


def _publish_now(rename: Callable[[], None]) -> None:
    """How a file is published where nothing can forbid it: at once."""
    rename()


def published_whole(output_path: Path, dataset: bool) -> bool:
    """Whether ``-o OUT`` is written as OUT.partial and published whole at the end (and so
    has one writer at a time: :mod:`fastsubs.query.output_lock`): a dataset, a regular file
    or a name not yet taken (a directory too, which the text formats then refuse); not
    stdout, nor a device or a pipe given as ``-o``, which take the output as it comes."""
    if output_path is None:
        return False
    if dataset:
        return True
    try:
        mode = os.stat(output_path).st_mode
    except FileNotFoundError:
        return True
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


@contextmanager
def written_atomically(path: str, suffix: str = PARTIAL_SUFFIX,
                       publish: Callable[[Callable[[], None]], None] = _publish_now) -> Iterator[BinaryIO]:
    """A stream whose bytes replace ``path`` whole and durably once the block ends without
    an error: written as ``path`` + ``suffix``, which an error removes, so a reader never
    sees part of a file (``--dask``'s outputs, the records beside an output).  ``publish``
    is given the rename to make, and may refuse it by raising (a ``--dask`` task whose run
    was stopped: :class:`fastsubs.query.cluster.Publishing`)."""
    temporary = f"{path}{suffix}"
    try:
        with open(temporary, "wb") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        publish(functools.partial(os.replace, temporary, path))
    except BaseException:
        _remove(temporary)
        raise
    _sync_directory(path)


def _write_json(path: str, data: dict[str, Any]) -> None:
    """Replace ``path`` by ``data`` as JSON, atomically and durably."""
    with written_atomically(path, ".tmp") as stream:
        stream.write(json.dumps(data, indent=1).encode())


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
