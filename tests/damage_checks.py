"""Single-byte damage to an index, and what its readers make of it: no byte of an index may
crash a reader.

Each flip (one byte XOR a value) is made in a working copy of the index and undone after
its checks.  A flip is checked in one of two ways:

- ``cli``: the tools as a user runs them, a process each: ``fastsubs-query`` over the
  sentences, ``fastsubs-index info``, ``fastsubs-index verify``;
- ``api``: the same three through the Python API, run in a child process (this file run as
  a script) that checks flip after flip: fast, and a crash is still seen as one (the child
  dies by the signal; the parent notes which flip and which check killed it and starts
  another child).

Each check ends in one outcome: ``identical`` (the undamaged index's output), ``error`` (exit
status 1 and one line, verify's problem lines and its summary; what was written before it
the undamaged index's output), ``wrong`` (another output), ``signal`` (killed by a signal),
``hung`` (still running after TIMEOUT seconds), ``traceback`` or ``bad error`` (any other
ending).  Only ``identical`` and ``error`` are sound.

Run as a script, it sweeps an index and writes the table (docs/index-format.md's figures of
damage)::

    python tests/damage_checks.py sweep INDEX --sentences FILE --random 3000 --targeted --jobs 2 --table out.tsv
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lmdb_layout import Layout, walk

BIN = Path(sys.executable).parent
CHECKS = ("query", "info", "verify")
SOUND = ("identical", "error")
OUTCOMES = ("identical", "error", "wrong", "signal", "hung", "traceback", "bad error")
#: Results a flip is allowed to take, at most (a hung reader is a failure too).
TIMEOUT = 120


@dataclass(frozen=True)
class Flip:
    """Byte ``offset`` of data.mdb XOR ``xor``; ``what`` the structure it lies in."""

    offset: int
    xor: int
    what: str


@dataclass
class Result:
    flip: Flip
    outcomes: dict[str, str]    # check -> outcome
    messages: dict[str, str]    # check -> its error line (or what went wrong)


# ---------------------------------------------------------------- what to flip

def structural_flips(layout: Layout, pages: Iterable[int] | None = None, nodes: int | None = None) -> list[Flip]:
    """Every byte of LMDB's structures on the meta pages and on ``pages`` (page numbers;
    all pages when None), XOR 0xFF; page numbers also XOR 0x01 and 0x80.  Of a page of
    more than ``nodes`` nodes, its first and last nodes and others evenly spaced."""
    chosen = None if pages is None else set(pages)
    flips = []
    for page in layout.pages:
        if page.kind != "meta" and chosen is not None and page.pgno not in chosen:
            continue
        kept = page.nodes
        if nodes is not None and len(kept) > nodes:
            kept = [kept[round(i * (len(kept) - 1) / (nodes - 1))] for i in range(nodes)]
        for field in page.header + [f for node in kept for f in node]:
            for at in range(field.offset, field.offset + field.size):
                byte = at - field.offset
                what = f"{field.what} (byte {byte})"
                flips.append(Flip(at, 0xFF, what))
                if field.page_number and byte < 4:  # the low bytes: still a page number near it
                    flips += [Flip(at, 0x01, what), Flip(at, 0x80, what)]
    return flips


def sample_pages(layout: Layout, per_kind: int, seed: int) -> list[int]:
    """Page numbers of a sample of each kind of page of each database: the first and last
    of it, and others drawn at random, ``per_kind`` in all."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str], list[int]] = {}
    for page in layout.pages:
        if page.kind != "meta":
            groups.setdefault((page.db, page.kind), []).append(page.pgno)
    chosen = []
    for _, numbers in sorted(groups.items()):
        ends = sorted({numbers[0], numbers[-1]})
        rest = [n for n in numbers if n not in ends]
        chosen += ends[:per_kind] + rng.sample(rest, min(len(rest), max(0, per_kind - len(ends))))
    return chosen


def value_flips(layout: Layout, db: str, key: bytes, count: int | None, seed: int) -> list[Flip]:
    """Bytes of the value of ``key`` in ``db``: all of them (``count`` None) or ``count`` at random."""
    at, size = layout.values[(db, key)]
    offsets = range(at, at + size) if count is None else random.Random(seed).sample(range(at, at + size), count)
    return [Flip(offset, 0xFF, f"{db} {key.decode()} (byte {offset - at})") for offset in offsets]


def random_flips(index: Path, count: int, seed: int) -> list[Flip]:
    """``count`` offsets anywhere in data.mdb, XOR 0xFF."""
    size = (index / "data.mdb").stat().st_size
    rng = random.Random(seed)
    return [Flip(rng.randrange(size), 0xFF, "anywhere") for _ in range(count)]


# ---------------------------------------------------------------- one flip at a time

class WorkingCopy:
    """A copy of an index in which one flip at a time is made and undone."""

    def __init__(self, index: Path, folder: Path) -> None:
        self.path = folder / index.name
        shutil.copytree(index, self.path)
        self.data = self.path / "data.mdb"
        self.original = self.data.read_bytes()

    def poke(self, offset: int, byte: int) -> None:
        with open(self.data, "r+b") as stream:
            stream.seek(offset)
            stream.write(bytes([byte]))

    def flipped(self, flip: Flip) -> _Flipped:
        return _Flipped(self, flip)


class _Flipped:
    def __init__(self, copy: WorkingCopy, flip: Flip) -> None:
        self.copy, self.flip = copy, flip

    def __enter__(self) -> Path:
        self.copy.poke(self.flip.offset, self.copy.original[self.flip.offset] ^ self.flip.xor)
        return self.copy.path

    def __exit__(self, *exc: object) -> None:
        self.copy.poke(self.flip.offset, self.copy.original[self.flip.offset])


def judge(check: str, returncode: int | None, stdout: bytes, stderr: bytes, expected: bytes) -> tuple[str, str]:
    """The outcome of one check run, and its message."""
    text = stderr.decode(errors="replace")
    if returncode is None:
        return "hung", f"still running after {TIMEOUT} s"
    if returncode < 0:
        return "signal", f"killed by signal {-returncode}"
    if "Traceback" in text:
        return "traceback", text.strip().splitlines()[-1] if text.strip() else "traceback"
    if returncode == 0:
        return ("identical", "") if stdout == expected else ("wrong", "a different output")
    if not expected.startswith(stdout):  # what came before the error must be right
        return "wrong", f"a different output before the error: {text.strip()[:300]}"
    lines = text.splitlines()
    # verify lists each problem on a line of its own, then a summary
    one_line = len(lines) == 1 or (check == "verify" and lines and "DAMAGED" in lines[-1])
    if returncode == 1 and one_line and all(line.strip() for line in lines):
        return "error", lines[0]
    return "bad error", f"exit status {returncode}: {text.strip()[:300]}"


def run_cli(check: str, index: Path, sentences: bytes) -> tuple[int | None, bytes, bytes]:
    command = {"query": ["fastsubs-query", str(index), "-n", "20"],
               "info": ["fastsubs-index", "info", "--json", str(index)],
               "verify": ["fastsubs-index", "verify", str(index)]}[check]
    try:
        done = subprocess.run([str(BIN / command[0]), *command[1:]], input=sentences if check == "query" else None,
                              capture_output=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, b"", b""
    # the index's name in messages is the working copy's: the same for every flip
    return done.returncode, done.stdout, done.stderr


class CliChecker:
    """The three tools as processes, on one working copy."""

    def __init__(self, index: Path, folder: Path, sentences: bytes) -> None:
        self.copy = WorkingCopy(index, folder)
        self.sentences = sentences
        self.expected = {}
        for check in CHECKS:
            code, out, err = run_cli(check, self.copy.path, sentences)
            assert code == 0, f"{check} of the undamaged index failed: {err.decode()}"
            self.expected[check] = out

    def check(self, flip: Flip) -> Result:
        result = Result(flip, {}, {})
        with self.copy.flipped(flip) as index:
            for check in CHECKS:
                code, out, err = run_cli(check, index, self.sentences)
                result.outcomes[check], result.messages[check] = judge(check, code, out, err, self.expected[check])
        return result

    def close(self) -> None:
        pass


class ApiChecker:
    """The three checks through the Python API, in a child process that outlives many flips."""

    def __init__(self, index: Path, folder: Path, sentences: bytes) -> None:
        self.copy = WorkingCopy(index, folder)
        self.sentences_file = folder / "sentences.txt"
        self.sentences_file.write_bytes(sentences)
        self.child: subprocess.Popen[str] | None = None
        self.expected = self._ask()
        assert all(outcome == "answer" for outcome, _ in self.expected.values()), self.expected

    def _start(self) -> subprocess.Popen[str]:
        if self.child is None:
            # this folder on the child's path, where PYTHONSAFEPATH keeps a script's own off
            # (tests/mutations.py sets it), for its import of lmdb_layout
            path = os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")]))
            self.child = subprocess.Popen([sys.executable, __file__, "child", str(self.copy.path),
                                           str(self.sentences_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": path})
        return self.child

    def _ask(self, first: int = 0) -> dict[str, tuple[str, str]]:
        """Each check's ("answer", digest) or ("error", message) or ("exception", text), from
        CHECKS[first] on; a check the child died in is ("signal", "hung" or "died", ...), and
        the last one answered."""
        child = self._start()
        assert child.stdin is not None and child.stdout is not None
        answers: dict[str, tuple[str, str]] = {}
        hung = threading.Event()

        def stop() -> None:
            hung.set()
            child.kill()

        watchdog = threading.Timer(TIMEOUT, stop)
        watchdog.start()
        try:
            child.stdin.write(f"{first}\n")
            child.stdin.flush()
            for check in CHECKS[first:]:
                line = child.stdout.readline()
                if not line:
                    break
                got = json.loads(line)
                answers[check] = (got["outcome"], got["detail"])
        except BrokenPipeError:
            pass
        finally:
            watchdog.cancel()
        if len(answers) < len(CHECKS) - first:
            code = child.wait(timeout=TIMEOUT)
            errors = child.stderr.read() if child.stderr else ""
            self.child = None
            dead = CHECKS[first + len(answers)]
            answers[dead] = ("hung", f"still running after {TIMEOUT} s") if hung.is_set() else \
                ("signal", f"killed by signal {-code}") if code < 0 else \
                ("died", f"exit status {code}: {errors.strip()[-300:]}")
        return answers

    def check(self, flip: Flip) -> Result:
        result = Result(flip, {}, {})
        answers: dict[str, tuple[str, str]] = {}
        with self.copy.flipped(flip):
            while len(answers) < len(CHECKS):  # a new child goes on after a check that killed one
                answers.update(self._ask(len(answers)))
        for check in CHECKS:
            outcome, detail = answers[check]
            if outcome == "answer":
                result.outcomes[check] = "identical" if detail == self.expected[check][1] else "wrong"
            elif outcome == "error":
                result.outcomes[check] = "error" if "\n" not in detail.strip() else "bad error"
            elif outcome in ("signal", "hung"):
                result.outcomes[check] = outcome
            else:
                result.outcomes[check] = "traceback"
            result.messages[check] = detail if outcome != "answer" else ""
        return result

    def close(self) -> None:
        if self.child is not None:
            assert self.child.stdin is not None
            self.child.stdin.close()
            self.child.wait(timeout=TIMEOUT)
            self.child = None


def child(index: Path, sentences_file: Path) -> None:
    """The API side of ApiChecker: for each line on stdin (the first check's number), the
    checks of ``index`` as it is now from that one on, a JSON line each on stdout."""
    import fastsubs
    from fastsubs.core import Core
    from fastsubs.indexer.verify import verify_index

    sentences = [line.split() for line in sentences_file.read_text().splitlines()]

    def query() -> str:
        with fastsubs.open_index(index) as opened:
            return repr([[(s.word, s.logprob) for s in subs] for tokens in sentences
                         for subs in opened.sentence(tokens, n=20)])

    def info() -> str:
        with Core(index) as opened:
            return json.dumps(opened.meta, sort_keys=True, default=repr)

    def verify() -> str:
        report = verify_index(index)
        if report.problems:
            raise fastsubs.DamagedIndexError("; ".join(report.problems))
        return f"{report.records} {report.patterns}"

    actions = {"query": query, "info": info, "verify": verify}
    for line in sys.stdin:
        for name in CHECKS[int(line):]:
            action = actions[name]
            try:
                found = {"outcome": "answer", "detail": hashlib.sha1(action().encode()).hexdigest()}
            except fastsubs.FastsubsError as error:
                found = {"outcome": "error", "detail": str(error)}
            except Exception as error:  # a bug: the sweep reports it
                found = {"outcome": "exception", "detail": f"{type(error).__name__}: {error}"}
            print(json.dumps({"check": name, **found}), flush=True)


# ---------------------------------------------------------------- sweeps

def sweep(index: Path, flips: list[Flip], sentences: bytes, folder: Path, mode: str = "cli",
          jobs: int = 1, progress: bool = False) -> list[Result]:
    """Every flip checked (``jobs`` working copies at a time); results in the flips' order."""
    kind = CliChecker if mode == "cli" else ApiChecker
    checkers = [kind(index, Path(tempfile.mkdtemp(dir=folder)), sentences) for _ in range(jobs)]
    shares = [flips[j::jobs] for j in range(jobs)]

    def share(j: int) -> list[Result]:
        results = []
        for number, flip in enumerate(shares[j], start=1):
            results.append(checkers[j].check(flip))
            if progress and number % 200 == 0:
                print(f"({number * jobs:,} of {len(flips):,} flips checked)", file=sys.stderr, flush=True)
        return results

    try:
        with ThreadPoolExecutor(jobs) as pool:
            done = list(pool.map(share, range(jobs)))
    finally:
        for checker in checkers:
            checker.close()
    results: list[Result] = []
    for i in range(len(flips)):
        results.append(done[i % jobs][i // jobs])
    return results


def tally(results: list[Result]) -> dict[str, Counter[str]]:
    return {check: Counter(r.outcomes[check] for r in results if check in r.outcomes) for check in CHECKS}


def summary(results: list[Result], title: str) -> str:
    """A markdown table: per check, how many flips ended in each outcome."""
    counts = tally(results)
    seen = [o for o in (*OUTCOMES, "died") if any(counts[c][o] for c in CHECKS)]
    lines = [f"{title}: {len(results)} flips", "", "| check | " + " | ".join(seen) + " |",
             "|---|" + "---:|" * len(seen)]
    lines += [f"| {check} | " + " | ".join(f"{counts[check][o]:,}" for o in seen) + " |" for check in CHECKS]
    return "\n".join(lines)


def write_table(results: list[Result], path: Path) -> None:
    """One row per flip: offset, xor, what, then each check's outcome and message."""
    with open(path, "w") as table:
        table.write("offset\txor\twhat\t" + "\t".join(f"{c}\t{c} message" for c in CHECKS) + "\n")
        for r in results:
            cells = [str(r.flip.offset), f"0x{r.flip.xor:02x}", r.flip.what]
            for check in CHECKS:
                cells += [r.outcomes.get(check, ""), r.messages.get(check, "").replace("\t", " ").replace("\n", " ")]
            table.write("\t".join(cells) + "\n")


def unsound(results: list[Result]) -> Iterator[str]:
    """A line for each check that did not end in an identical answer or one clear error, and
    for each flip that verify passes while the query refuses it (verify reads every page and
    record, so what a search would find, it finds)."""
    for r in results:
        for check, outcome in r.outcomes.items():
            if outcome not in SOUND:
                yield f"{r.flip.what} @{r.flip.offset} ^0x{r.flip.xor:02x}: {check}: {outcome}: {r.messages[check]}"
        if r.outcomes.get("query") == "error" and r.outcomes.get("verify") == "identical":
            yield (f"{r.flip.what} @{r.flip.offset} ^0x{r.flip.xor:02x}: verify says OK, the query refuses: "
                   f"{r.messages['query']}")


def targeted_flips(layout: Layout, per_kind: int, seed: int, nodes: int | None = None,
                   header_bytes: int | None = None) -> list[Flip]:
    """The structural bytes of the meta pages and of a sample of pages (of ``nodes`` of
    their nodes at most), and the fastsubs header (whole, or ``header_bytes`` of it), a few
    bytes of each array and of the metadata."""
    flips = structural_flips(layout, sample_pages(layout, per_kind, seed), nodes)
    flips += value_flips(layout, "meta", b"header", header_bytes, seed)
    flips += value_flips(layout, "meta", b"meta", 8, seed)
    for db, key in sorted(layout.values):
        if db == "arrays":
            flips += value_flips(layout, db, key, 4, seed)
    return flips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("sweep", help="sweep an index, print the outcomes, write the table")
    run.add_argument("index", type=Path)
    run.add_argument("--sentences", type=Path, required=True, help="the query's input")
    run.add_argument("--random", type=int, default=0, help="flips at random offsets")
    run.add_argument("--targeted", action="store_true", help="the structures of sampled pages")
    run.add_argument("--pages", type=int, default=3, help="pages sampled of each kind of each database")
    run.add_argument("--nodes", type=int, default=None, help="nodes of each page sampled, at most")
    run.add_argument("--mode", choices=("cli", "api"), default="cli")
    run.add_argument("--jobs", type=int, default=1)
    run.add_argument("--seed", type=int, default=34)
    run.add_argument("--table", type=Path, help="a TSV of every flip's outcomes")
    kid = commands.add_parser("child", help="(the API checker's child process)")
    kid.add_argument("index", type=Path)
    kid.add_argument("sentences", type=Path)
    args = parser.parse_args()
    if args.command == "child":
        child(args.index, args.sentences)
        return
    sentences = args.sentences.read_bytes()
    with tempfile.TemporaryDirectory() as folder:
        reports = []
        everything: list[Result] = []
        plans = []
        if args.random:
            plans.append(("random offsets", random_flips(args.index, args.random, args.seed)))
        if args.targeted:
            plans.append(("targeted", targeted_flips(walk(args.index), args.pages, args.seed, args.nodes)))
        for title, flips in plans:
            results = sweep(args.index, flips, sentences, Path(folder), args.mode, args.jobs, progress=True)
            reports.append(summary(results, f"{title} ({args.mode})"))
            everything += results
            print(reports[-1] + "\n", flush=True)
        if args.table:
            write_table(everything, args.table)
        for line in list(unsound(everything))[:40]:
            print(line)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
