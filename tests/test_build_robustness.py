"""Builds that die, builds beside readers, builds onto a full or read-only disk.

All with the real ``fastsubs-index build`` in subprocesses, real LMDB files and real
signals: whatever happens to a build, the target path holds a complete index (the old
one or the new one, never a mixture or nothing), leftovers of dead builds are cleaned
up by the next build, and a reader never sees a query fail.
"""

from __future__ import annotations

import json
import os
import pty
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import fastsubs
from conftest import BIN, DEMO_MODEL, TEST_DATA, run_cli, shared
from fastsubs.indexer.publish import TEMP_PREFIX

SENTENCE = "the function returns a list of values"


def answer(target: Path) -> tuple[int, list[list[tuple[str, float]]]]:
    """The index's vocabulary size (which model it is) and its substitutes for SENTENCE."""
    with fastsubs.open_index(target) as index:
        return index.vocab_size, [[(s.word, s.logprob) for s in subs] for subs in index.sentence(SENTENCE, n=10)]


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(TEMP_PREFIX))


@pytest.fixture(scope="module")
def old_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, tuple[int, list]]:
    """kn4-small compiled once: the 'previous complete index' the tests build over."""
    target = tmp_path_factory.mktemp("old") / "old.fsidx"
    fastsubs.build_index(shared("kn4-small.arpa.gz"), target)
    return target, answer(target)


def copy_of(old_index: tuple[Path, tuple[int, list]], directory: Path) -> Path:
    target = directory / "model.fsidx"
    shutil.copytree(old_index[0], target)
    return target


# --- builds killed with SIGKILL --------------------------------------------------------

#: When to kill: the marker the build prints before that stretch (None: its start), and
#: the share of what is left of the build to spread the kill over. What is left is timed
#: on a build of the same model just before, so builds are really killed (not finished
#: first) however fast this machine builds: the demo model builds in under a second.
MOMENTS = {
    "any time": (None, 0.9),
    "writing": (b"read 4-gram model", 0.9),
    "writing a bigram model now": (b"read 2-gram model", 0.0),
    "publishing": (b"4-grams with the slot at 4", 0.9),
}


class TerminalBuild:
    """``fastsubs-index build MODEL --force`` over a target, its stderr a pseudo-terminal
    (a build prints its progress lines only there): what it printed so far is ``seen``."""

    def __init__(self, model: Path, target: Path) -> None:
        self.controller, terminal = pty.openpty()
        self.process = subprocess.Popen([str(BIN / "fastsubs-index"), "build", str(model), "-o", str(target),
                                         "--force"], stdout=subprocess.DEVNULL, stderr=terminal)
        os.close(terminal)
        self.seen = b""

    def read(self, wait: float) -> bool:
        """Read what the build printed within ``wait`` seconds; False once it closed stderr."""
        if not select.select([self.controller], [], [], wait)[0]:
            return True
        try:
            block = os.read(self.controller, 65536)
        except OSError:  # EIO: the build has ended
            return False
        self.seen += block
        return bool(block)

    def wait_for(self, marker: bytes, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.seen:
            assert self.read(0.01), f"the build ended before printing {marker!r}: {self.seen.decode()}"
            assert time.monotonic() < deadline, f"build never printed {marker!r}"

    def end(self) -> int:
        self.process.wait(timeout=60)
        while self.read(0):
            pass
        os.close(self.controller)
        return self.process.returncode


def time_build(model: Path, markers: list[bytes]) -> dict[bytes | None, float]:
    """Seconds a whole build of MODEL (into a scratch directory) still had to run after
    each marker appeared (None: after it started), so kills can be spread over them."""
    with tempfile.TemporaryDirectory() as scratch:
        build = TerminalBuild(model, Path(scratch) / "timing.fsidx")
        started, seen_at = time.monotonic(), {}
        while build.read(0.005):
            seen_at.update({m: time.monotonic() for m in markers if m not in seen_at and m in build.seen})
        assert build.end() == 0, build.seen.decode()
        ended = time.monotonic()
    assert set(seen_at) == set(markers), f"markers not printed: {build.seen.decode()}"
    return {None: ended - started, **{m: ended - at for m, at in seen_at.items()}}


def kill_builds(target: Path, moments: list[str], rng: random.Random, enough: int | None = None,
                model: Path | None = None) -> dict[str, int]:
    """Start ``build MODEL --force`` over ``target`` and SIGKILL it, once per moment
    (stopping early once ``enough`` builds were really killed, not finished first).
    MODEL is the demo model (a 4-gram model: the moments' markers name 4-grams) unless given.

    After every kill the target must still open and answer as the old index (or, had
    the build already published, as the new one).
    """
    demo = model or DEMO_MODEL
    spread = {MOMENTS[moment] for moment in moments if MOMENTS[moment][1] > 0}
    remaining = time_build(demo, [marker for marker, _ in spread if marker is not None]) if spread else {}
    old_size, old_answer = answer(target)
    new_answers = []
    stats = {"killed": 0, "finished first": 0, "leftover dirs seen": 0}
    for number, moment in enumerate(moments):
        if stats["killed"] == enough:
            break
        marker, share = MOMENTS[moment]
        build = TerminalBuild(demo, target)
        process = build.process
        try:
            if marker is not None:
                build.wait_for(marker)
            if share:
                time.sleep(rng.uniform(0, share * remaining[marker]))
            if process.poll() is None:
                process.kill()  # SIGKILL: no handler, no cleanup
        finally:
            build.end()
        if process.returncode == 0:
            stats["finished first"] += 1
        else:
            assert process.returncode == -9, build.seen.decode()
            stats["killed"] += 1
        stats["leftover dirs seen"] += len(leftovers(target.parent))
        size, got = answer(target)
        if size == old_size:
            assert got == old_answer, f"kill {number} ({moment}): the old index answers differently"
        else:
            new_answers.append(got)
            assert got == new_answers[0], f"kill {number} ({moment}): the new index answers differently"
    # A build that runs to the end cleans up what the killed ones left.
    run_cli("fastsubs-index", "build", demo, "-o", target, "--force", "-q")
    assert leftovers(target.parent) == []
    size, final = answer(target)
    assert size != old_size
    assert all(got == final for got in new_answers)
    return stats


def test_a_build_killed_while_writing_leaves_the_old_index(tmp_path: Path) -> None:
    """Quick variant: one build of a generated bigram model (about a second of reading,
    half a second of writing LMDB) over the tiny model's index, killed as soon as it
    starts writing (a live build: it has the whole index still to write)."""
    target = tmp_path / "target" / "model.fsidx"
    target.parent.mkdir()
    fastsubs.build_index(TEST_DATA / "tiny.arpa", target)
    stats = kill_builds(target, ["writing a bigram model now"], random.Random(15),
                        model=big_model(tmp_path / "big.arpa", words=8000, bigrams_per_word=60))
    assert stats["killed"] == 1 and stats["leftover dirs seen"] == 1, stats


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_many_killed_builds_leave_the_old_index(old_index: tuple[Path, tuple[int, list]], tmp_path: Path) -> None:
    rng = random.Random(15)
    moments = [rng.choice(["any time", "writing", "publishing"]) for _ in range(40)]  # the demo's moments
    stats = kill_builds(copy_of(old_index, tmp_path), moments, rng, enough=24)
    assert stats["killed"] >= 20, stats


def test_stale_temp_dirs_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    """Dead builds' temporary directories go, whatever their target; running builds' stay."""
    target = tmp_path / "model.fsidx"
    dead = tmp_path / f"{TEMP_PREFIX}model.fsidx-999999999-abc_123x"  # no such process
    unnamed = tmp_path / f"{TEMP_PREFIX}model.fsidx-old-abc_123x"  # not a name a build makes
    alive = tmp_path / f"{TEMP_PREFIX}model.fsidx-{os.getpid()}-abc_123x"  # this test: a running build
    other = tmp_path / f"{TEMP_PREFIX}model.fsidx-1-999999999-abc_123x"  # dead build of 'model.fsidx-1'
    other_alive = tmp_path / f"{TEMP_PREFIX}b-7-{os.getpid()}-x9_"  # running build of 'b-7'
    for directory in (dead, unnamed, alive, other, other_alive):
        directory.mkdir()
        (directory / "data.mdb").write_bytes(b"partial")
    run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", target, "-q")
    assert leftovers(tmp_path) == sorted([unnamed.name, alive.name, other_alive.name])
    assert answer(target)[0] == 6


# --- rebuilding while others query ------------------------------------------------------

QUERIER = r"""
import json, sys, time
from pathlib import Path
import fastsubs

mode, target, stop, sentence = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]

def answer(index):
    return [[(s.word, s.logprob) for s in subs] for subs in index.sentence(sentence, n=10)]

held = fastsubs.open_index(target) if mode == "hold" else None
print("ready", flush=True)
seen, failures, queries = {}, [], 0
while not stop.exists():
    queries += 1
    try:
        if held is not None:  # opened once, before the rebuilds: keeps reading the old files
            index = held
            got = answer(index)
            time.sleep(0.005)  # leave the CPU to the builds and the other reader
        else:  # opened afresh every time: sees each rebuild as soon as it is published
            with fastsubs.open_index(target) as index:
                got = answer(index)
        if seen.setdefault(index.vocab_size, got) != got:
            failures.append(f"query {queries}: another answer from the same model")
    except Exception as error:
        failures.append(f"query {queries}: {type(error).__name__}: {error}")
print(json.dumps({"queries": queries, "failures": failures[:20], "seen": seen}))
"""


def rebuild_under_queries(target: Path, new_model: Path, old_model: Path) -> None:
    """One process re-opens the index at ``target`` (built from ``old_model``) for every
    query, one keeps it open, while ``--force`` rebuilds it from ``new_model`` and then
    from ``old_model`` again: no query fails, the one that keeps it open sees only the
    old index, the other sees both."""
    old_size, old_answer = answer(target)
    stop = target.parent / "stop"
    queriers = {mode: subprocess.Popen([sys.executable, "-c", QUERIER, mode, str(target), str(stop), SENTENCE],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                for mode in ("reopen", "hold")}
    reports = {}
    try:
        for querier in queriers.values():
            assert querier.stdout is not None and querier.stdout.readline() == b"ready\n"
        run_cli("fastsubs-index", "build", new_model, "-o", target, "--force", "-q")
        new_size, new_answer = answer(target)
        run_cli("fastsubs-index", "build", old_model, "-o", target, "--force", "-q")
    finally:
        stop.touch()
        for mode, querier in queriers.items():
            out, err = querier.communicate(timeout=60)
            assert querier.returncode == 0, err.decode()
            reports[mode] = json.loads(out)
    as_json = lambda got: json.loads(json.dumps(got))  # noqa: E731  (tuples become lists)
    assert new_size != old_size
    for mode, report in reports.items():
        assert report["failures"] == [], (mode, report["failures"])
        assert report["queries"] >= 10, (mode, report["queries"])
    assert reports["hold"]["seen"] == {str(old_size): as_json(old_answer)}
    assert reports["reopen"]["seen"] == {str(old_size): as_json(old_answer), str(new_size): as_json(new_answer)}
    assert leftovers(target.parent) == []


def test_force_rebuild_while_other_processes_query(tmp_path: Path) -> None:
    """Quick variant: small models (builds of a second or less)."""
    target = tmp_path / "model.fsidx"
    fastsubs.build_index(TEST_DATA / "tiny.arpa", target)
    rebuild_under_queries(target, big_model(tmp_path / "big.arpa", words=500, bigrams_per_word=10),
                          TEST_DATA / "tiny.arpa")


@pytest.mark.slow
def test_force_rebuild_of_real_models_while_other_processes_query(old_index: tuple[Path, tuple[int, list]],
                                                                 tmp_path: Path) -> None:
    rebuild_under_queries(copy_of(old_index, tmp_path), DEMO_MODEL, shared("kn4-small.arpa.gz"))


@pytest.mark.slow
def test_rapid_swaps_never_fail_a_reopening_reader(tmp_path: Path) -> None:
    """Hundreds of publishes of two indexes of different sizes under a reader that re-opens.

    Narrows the window a --force rebuild opens for readers to the publish step alone
    (the rebuilds above publish twice; this publishes 400 times in a few seconds).
    """
    from fastsubs.indexer.publish import make_temp_dir, publish

    sources = [tmp_path / "big.fsidx", tmp_path / "tiny.fsidx"]
    fastsubs.build_index(big_model(tmp_path / "big.arpa", words=500, bigrams_per_word=10), sources[0])
    fastsubs.build_index(TEST_DATA / "tiny.arpa", sources[1])
    target = tmp_path / "model.fsidx"
    shutil.copytree(sources[0], target)
    stop = tmp_path / "stop"
    querier = subprocess.Popen([sys.executable, "-c", QUERIER, "reopen", str(target), str(stop), "the cat sat"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert querier.stdout is not None and querier.stdout.readline() == b"ready\n"
        for swap in range(400):
            temp = make_temp_dir(target)
            temp.rmdir()
            shutil.copytree(sources[swap % 2], temp)
            publish(temp, target, force=True)  # (a rebuild over the index: --force)
    finally:
        stop.touch()
        out, err = querier.communicate(timeout=60)
    assert querier.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["failures"] == [], report["failures"]
    assert len(report["seen"]) == 2


# --- full disk, read-only disk -----------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 MiB tmpfs (needs root to mount; skipped where mounting is not allowed)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def big_model(path: Path, words: int = 2000, bigrams_per_word: int = 30) -> Path:
    """A generated bigram model whose index needs a few MiB."""
    vocab = [f"w{i}" for i in range(words)]
    lines = ["\\data\\", f"ngram 1={words + 2}", f"ngram 2={words * bigrams_per_word}", "", "\\1-grams:",
             "-99\t<s>\t-0.5", "-1.5\t</s>"]
    lines += [f"-3.5\t{w}\t-0.25" for w in vocab]
    lines += ["", "\\2-grams:"]
    lines += [f"-1.25\t{vocab[i]} {vocab[(i * 7 + k * 13 + 1) % words]}"
              for i in range(words) for k in range(bigrams_per_word)]
    lines += ["", "\\end\\", ""]
    path.write_text("\n".join(lines))
    return path


def one_error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("fastsubs-index: error: ")
    return lines[0]


def test_full_disk_gives_one_line_and_leaves_nothing_half_written(small_disk: Path, tmp_path: Path) -> None:
    old = small_disk / "tiny.fsidx"
    run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", old, "-q")
    before = answer(old)
    model = big_model(tmp_path / "big.arpa")

    line = one_error_line(run_cli("fastsubs-index", "build", model, "-o", small_disk / "big.fsidx", "-q",
                                  check=False))
    assert line.startswith(f"fastsubs-index: error: {small_disk / 'big.fsidx'}: cannot write the index: "
                           "the disk is full"), line
    assert sorted(os.listdir(small_disk)) == ["tiny.fsidx"]

    line = one_error_line(run_cli("fastsubs-index", "build", model, "-o", old, "--force", "-q", check=False))
    assert "the disk is full" in line
    assert sorted(os.listdir(small_disk)) == ["tiny.fsidx"]
    assert answer(old) == before


def test_read_only_target_gives_one_line_and_keeps_the_old_index(small_disk: Path) -> None:
    old = small_disk / "tiny.fsidx"
    run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", old, "-q")
    before = answer(old)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    for target, extra in [(old, ["--force"]), (small_disk / "new.fsidx", []), (small_disk / "sub" / "x.fsidx", [])]:
        line = one_error_line(run_cli("fastsubs-index", "build", TEST_DATA / "tiny.arpa", "-o", target, "-q",
                                      *extra, check=False))
        assert line == f"fastsubs-index: error: {target}: cannot create the index there (Read-only file system)"
    assert sorted(os.listdir(small_disk)) == ["tiny.fsidx"]
    assert answer(old) == before
