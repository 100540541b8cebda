"""A build replaces only a fastsubs index, and a stopped build leaves nothing behind.

``--force`` once deleted whatever sat at the target: a user's directory, a file, a
directory named ``data.mdb`` beside a copied tag.  Now a build replaces only what a build
made (an index of this version or an earlier one, an index whose build never wrote its
metadata), each of its files a regular file, and refuses anything else with one line
naming the path, with or without ``--force``, leaving it untouched; an empty directory it
builds into, ``--force`` or not.  Without ``--force``, a build never replaces an index
that another build published while it ran.  A build stopped by SIGTERM or SIGINT removes
its temporary directory and exits 143 / 130 with one line.
"""

from __future__ import annotations

import gzip
import os
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

import fastsubs
from conftest import BIN, DEMO_MODEL, TEST_DATA, FedFifo, children, run_cli
from fastsubs import format as fmt
from fastsubs.core import Core
from fastsubs.errors import IndexExistsError, IndexVersionError, TargetNotAnIndexError
from fastsubs.indexer.publish import TAG_NAME, TAG_TEXT, TEMP_PREFIX
from generated_models import write_model

TINY = TEST_DATA / "tiny.arpa"
#: data.mdb of tiny.arpa's index as the builders of index formats 1, 2 and 3 wrote it (README.md there).
OLD_INDEXES = TEST_DATA / "old-indexes"


def snapshot(path: Path) -> dict[str, bytes | str]:
    """Everything at ``path``: file contents by relative name, link targets as strings, the
    type of anything else (a FIFO is never read)."""
    def state(p: Path) -> bytes | str:
        if p.is_symlink():
            return f"-> {os.readlink(p)}"
        mode = p.lstat().st_mode
        return p.read_bytes() if stat.S_ISREG(mode) else f"type {stat.S_IFMT(mode):o}"

    if not path.is_dir() or path.is_symlink():
        return {".": state(path)}
    return {str(p.relative_to(path)): state(p) for p in sorted(path.rglob("*"))}


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, result.stderr.decode()
    return lines[0]


def a_users_directory(tmp_path: Path) -> Path:
    target = tmp_path / "results"
    (target / "sub").mkdir(parents=True)
    (target / "thesis.tex").write_text("three years of work")
    (target / "sub" / "data.csv").write_text("1,2,3")
    return target


def a_file(tmp_path: Path) -> Path:
    target = tmp_path / "notes.txt"
    target.write_text("do not delete")
    return target


def a_symlink(tmp_path: Path) -> Path:
    real = tmp_path / "real.fsidx"
    fastsubs.build_index(TINY, real)
    target = tmp_path / "link.fsidx"
    target.symlink_to(real)
    return target


def another_programs_lmdb(tmp_path: Path) -> Path:
    target = tmp_path / "store"
    env = lmdb.open(str(target), max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(b"user", b"record", db=env.open_db(b"mine", txn=txn))
    env.close()
    return target


def an_index_with_a_users_file(tmp_path: Path) -> Path:
    target = tmp_path / "model.fsidx"
    fastsubs.build_index(TINY, target)
    (target / "README").write_text("my notes on this index")
    return target


def a_directory_named_data_mdb(tmp_path: Path) -> Path:
    """A user's directory named data.mdb, beside a tag copied from an index: the names an
    index has, but not its files (--force once deleted it with the thesis in it)."""
    target = tmp_path / "results"
    (target / "data.mdb").mkdir(parents=True)
    (target / "data.mdb" / "thesis.tex").write_text("three years of work")
    (target / TAG_NAME).write_bytes(TAG_TEXT)
    return target


def a_directory_named_lock_mdb(tmp_path: Path) -> Path:
    """An index, its tag and all, with a user's directory named lock.mdb in it."""
    target = tmp_path / "model.fsidx"
    fastsubs.build_index(TINY, target)
    (target / "lock.mdb").mkdir()
    (target / "lock.mdb" / "thesis.tex").write_text("three years of work")
    return target


def a_fifo_as_the_tag(tmp_path: Path) -> Path:
    """An index whose tag is a FIFO: reading it would wait for a writer forever."""
    target = tmp_path / "model.fsidx"
    fastsubs.build_index(TINY, target)
    (target / TAG_NAME).unlink()
    os.mkfifo(target / TAG_NAME)
    return target


def a_symlink_as_data_mdb(tmp_path: Path) -> Path:
    """A tagged directory whose data.mdb is a link to a user's file."""
    (tmp_path / "notes.txt").write_text("do not delete")
    target = tmp_path / "model.fsidx"
    target.mkdir()
    (target / TAG_NAME).write_bytes(TAG_TEXT)
    (target / "data.mdb").symlink_to(tmp_path / "notes.txt")
    return target


@pytest.mark.parametrize("make, says", [
    (a_users_directory, "files other than an index's (sub, thesis.tex)"),
    (a_file, "is a file"),
    (a_symlink, "is a symbolic link"),
    (another_programs_lmdb, "not a fastsubs index"),
    (an_index_with_a_users_file, "files other than an index's (README)"),
    (a_directory_named_data_mdb, "holds a directory named data.mdb, where an index has a file"),
    (a_directory_named_lock_mdb, "holds a directory named lock.mdb, where an index has a file"),
    (a_fifo_as_the_tag, f"holds a FIFO named {TAG_NAME}, where an index has a file"),
    (a_symlink_as_data_mdb, "holds a symbolic link named data.mdb, where an index has a file"),
])
def test_a_build_never_replaces_what_is_not_an_index(tmp_path: Path, make, says: str) -> None:
    target = make(tmp_path)
    before = snapshot(target)
    result = run_cli("fastsubs-index", "build", TINY, "-o", target, "-q", "--force", check=False, timeout=60)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith(f"fastsubs-index: error: {target}: ") and says in line, line
    assert snapshot(target) == before
    for force in (False, True):
        with pytest.raises(TargetNotAnIndexError, match=says.replace("(", r"\(").replace(")", r"\)")):
            fastsubs.build_index(TINY, target, force=force)
        assert snapshot(target) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]


def an_index(tmp_path: Path) -> Path:
    """An index of another model than the one built over it (so the test sees it replaced)."""
    model = tmp_path / "other.arpa"
    write_model(model, 40, [60], seed=1, hubs=1)
    target = tmp_path / "model.fsidx"
    fastsubs.build_index(model, target)
    return target


def an_empty_directory(tmp_path: Path) -> Path:
    target = tmp_path / "model.fsidx"
    target.mkdir()
    return target


def an_index_without_its_metadata(tmp_path: Path) -> Path:
    """What a build that wrote everything but its metadata would leave."""
    target = an_index(tmp_path)
    env = lmdb.open(str(target), max_dbs=64)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"meta", txn=txn), delete=True)
    env.close()
    return target


@pytest.mark.parametrize("make", [an_index, an_empty_directory, an_index_without_its_metadata])
def test_force_replaces_what_a_build_made(tmp_path: Path, make) -> None:
    target = make(tmp_path)
    run_cli("fastsubs-index", "build", TINY, "-o", target, "--force", "-q")
    with fastsubs.open_index(target) as index:
        assert index.vocab_size == unigram_count(TINY)
    assert sorted(p.name for p in target.iterdir()) == ["data.mdb", TAG_NAME]


def unigram_count(model: Path) -> int:
    """The header's unigram count of an uncompressed ARPA file, read without fastsubs."""
    return int(next(line for line in model.read_text().splitlines() if line.startswith("ngram 1=")).split("=")[1])


def test_an_existing_index_needs_force_which_each_interface_names_its_way(tmp_path: Path) -> None:
    target = tmp_path / "model.fsidx"
    fastsubs.build_index(TINY, target)
    before = snapshot(target)
    with pytest.raises(IndexExistsError, match=r"pass force=True to replace it"):
        fastsubs.build_index(TINY, target)
    line = one_line(run_cli("fastsubs-index", "build", TINY, "-o", target, "-q", check=False))
    assert line == f"fastsubs-index: error: {target}: an index is already there; pass --force to replace it"
    assert snapshot(target) == before


def test_an_empty_directory_is_built_into_without_force(tmp_path: Path) -> None:
    """An empty directory made for the index beforehand (a job script's ``mkdir -p``) holds
    no index to protect: the build goes there as to a new path, from the command line and
    from Python; once it holds the index, --force is needed again."""
    for number, build in enumerate([
            lambda target: run_cli("fastsubs-index", "build", TINY, "-o", target, "-q"),
            lambda target: fastsubs.build_index(TINY, target)]):
        target = tmp_path / f"made-{number}.fsidx"
        target.mkdir()
        build(target)
        with fastsubs.open_index(target) as index:
            assert index.vocab_size == unigram_count(TINY)
        with pytest.raises(IndexExistsError):
            fastsubs.build_index(TINY, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made-0.fsidx", "made-1.fsidx"]


def start_build(model: Path, target: Path, *options: str) -> subprocess.Popen[bytes]:
    """A build in a session of its own (its process group: the build and its jobs)."""
    return subprocess.Popen([str(BIN / "fastsubs-index"), "build", str(model), "-o", str(target), "-q", *options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


@pytest.fixture
def held_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FedFifo]:
    """The demo model through a FIFO, its last KiB held back until the test releases it: a
    build of it is still reading the model when the test acts (the demo model alone builds
    in under a second, and on a loaded machine a build once finished before its signal)."""
    data = DEMO_MODEL.read_bytes()
    with FedFifo(tmp_path_factory.mktemp("held") / DEMO_MODEL.name, data, held=1024) as fifo:
        yield fifo


def wait_for_temp_dir(build: subprocess.Popen[bytes], directory: Path, holding: str) -> Path:
    """The build's temporary directory (named with its process id), once ``holding`` is in
    it (the build is then well under way)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = [p for p in directory.iterdir() if p.name.startswith(TEMP_PREFIX) and f"-{build.pid}-" in p.name
                 and (p / holding).exists()]
        if found:
            return found[0]
        assert build.poll() is None, f"the build ended before it could be stopped: {build.stderr.read()!r}"
        time.sleep(0.01)
    raise AssertionError("the build never got there")


@pytest.mark.parametrize("stop, status, word", [(signal.SIGTERM, 143, "terminated"),
                                                (signal.SIGINT, 130, "interrupted")])
@pytest.mark.parametrize("moment", [
    "runs",  # reading the model
    pytest.param("data.mdb", marks=pytest.mark.slow),  # writing the index, some seconds later
])
@pytest.mark.parametrize("whom", ["build", "group"])
def test_a_stopped_build_removes_its_temporary_directory(tmp_path: Path, held_model: FedFifo, stop: signal.Signals,
                                                         status: int, word: str, moment: str, whom: str) -> None:
    """Stopped while it reads the model or writes the index, by a signal to the build alone
    or to its whole process group (a terminal's Ctrl-C, a batch system's SIGTERM, which its
    jobs get too): it ends at once, with its status and one line, leaving nothing."""
    target = tmp_path / "model.fsidx"
    build = start_build(held_model.path, target, "--jobs", "2")
    if moment != "runs":
        held_model.release()
    temp = wait_for_temp_dir(build, tmp_path, moment)
    assert build.poll() is None
    if whom == "build":
        build.send_signal(stop)
    else:
        os.killpg(build.pid, stop)
    _, stderr = build.communicate(timeout=60)
    assert build.returncode == status, stderr
    assert stderr.decode().splitlines() == [f"fastsubs-index: {word}"]
    assert not temp.exists()
    assert list(tmp_path.iterdir()) == []


def wait_for_fifo_open(pid: int) -> None:
    """Until the process waits in opening a FIFO for its writer (Linux's wait channel
    ``wait_for_partner``), or 10 s: where a kernel hides wait channels, the model is opened
    right after the runs' directory is made, so it is most likely there anyway."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/wchan").read_text() == "wait_for_partner":
                return
        except OSError:
            pass
        time.sleep(0.01)


@pytest.mark.parametrize("stop, status, word", [(signal.SIGTERM, 143, "terminated"),
                                                (signal.SIGINT, 130, "interrupted")])
def test_a_build_stopped_while_its_model_pipe_has_no_writer_yet(tmp_path: Path, stop: signal.Signals,
                                                                 status: int, word: str) -> None:
    """A model that is a FIFO whose writer has not started (a pipeline still starting up):
    the build waits in opening it. Stopped there, it ends as anywhere else, with its status
    and one line; its reader once half-made failed again in its finaliser, a traceback."""
    model = tmp_path / "held" / "model.arpa"
    model.parent.mkdir()
    os.mkfifo(model)
    build = start_build(model, tmp_path / "model.fsidx", "--jobs", "1")
    wait_for_temp_dir(build, tmp_path, "runs")
    wait_for_fifo_open(build.pid)
    build.send_signal(stop)
    _, stderr = build.communicate(timeout=60)
    assert build.returncode == status, stderr
    assert stderr.decode().splitlines() == [f"fastsubs-index: {word}"]
    assert [p.name for p in tmp_path.iterdir()] == ["held"]


def test_a_build_whose_job_process_is_killed_fails_at_once(tmp_path: Path, held_model: FedFifo) -> None:
    """A job process killed (out of memory, by hand) while the build reads the model: the
    build ends at once with one line saying so, and leaves nothing."""
    build = start_build(held_model.path, tmp_path / "model.fsidx", "--jobs", "2")
    wait_for_temp_dir(build, tmp_path, "runs")
    jobs = children(build.pid)
    assert len(jobs) == 2
    os.kill(jobs[0], signal.SIGKILL)
    _, stderr = build.communicate(timeout=60)
    assert build.returncode == 1
    assert stderr.decode().splitlines() == ["fastsubs-index: error: a build job's process died "
                                            "(killed, or out of memory?)"]
    assert list(tmp_path.iterdir()) == []


APPEARED = "an index appeared there while this build ran (another build's?); pass --force to replace it"


def another_build(target: Path) -> str:
    run_cli("fastsubs-index", "build", TINY, "-o", target, "-q")
    return APPEARED


def a_users_file(target: Path) -> str:
    target.write_text("do not delete")
    return "is a file, not a fastsubs index; a build replaces only a fastsubs index, so nothing was changed"


@pytest.mark.parametrize("meanwhile", [another_build, a_users_file])
def test_a_build_never_replaces_what_appeared_while_it_ran(tmp_path: Path, held_model: FedFifo, meanwhile) -> None:
    """A build into an absent target is held (its model's last bytes held back) while it
    reads its model; another build publishes there meanwhile (or a user writes a file
    there).  Let go, the first finds it when it publishes: it refuses in one line saying
    what is there, and leaves it and nothing of its own."""
    target = tmp_path / "model.fsidx"
    first = start_build(held_model.path, target, "--jobs", "1")
    wait_for_temp_dir(first, tmp_path, "runs")
    try:
        says = meanwhile(target)
        before = snapshot(target)
    finally:
        held_model.release()
    _, stderr = first.communicate(timeout=300)
    assert first.returncode == 1, stderr
    assert stderr.decode().splitlines() == [f"fastsubs-index: error: {target}: {says}"]
    assert snapshot(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.fsidx"]


@pytest.mark.parametrize("attempt", range(3))
def test_two_builds_into_one_absent_target_publish_one_index(tmp_path: Path, attempt: int) -> None:
    """Two builds started together into one absent target, without --force (a job retried
    while it still runs): one says it built the index, the other refuses in one line (the
    index appeared while it ran, or was there when it started), and the index is the
    first's (its model's name, two names of one model)."""
    target = tmp_path / "out" / "model.fsidx"
    models = [tmp_path / f"{name}.arpa.gz" for name in ("first", "second")]
    for model in models:
        model.symlink_to(DEMO_MODEL)
    builds = [subprocess.Popen([str(BIN / "fastsubs-index"), "build", str(model), "-o", str(target), "--jobs", "1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for model in models]
    said = [build.communicate(timeout=300)[1].decode().splitlines() for build in builds]
    statuses = [build.returncode for build in builds]
    assert sorted(statuses) == [0, 1], said
    winner, loser = statuses.index(0), statuses.index(1)
    assert len(said[winner]) == 1 and said[winner][0].startswith(f"built {target}: "), said
    assert said[loser] in ([f"fastsubs-index: error: {target}: {APPEARED}"],
                           [f"fastsubs-index: error: {target}: an index is already there; pass --force to replace it"])
    with Core(target) as index:
        assert index.meta["source"]["name"] == models[winner].name
    assert sorted(p.name for p in target.parent.iterdir()) == ["model.fsidx"]


def test_a_build_removes_what_dead_builds_of_other_targets_left(tmp_path: Path, held_model: FedFifo) -> None:
    """A build killed with SIGKILL cannot clean up: the next build beside it does, whatever its target."""
    build = start_build(held_model.path, tmp_path / "first.fsidx")
    left = wait_for_temp_dir(build, tmp_path, "runs")
    build.kill()
    build.communicate(timeout=60)
    assert build.returncode == -signal.SIGKILL and left.exists()
    run_cli("fastsubs-index", "build", TINY, "-o", tmp_path / "second.fsidx", "-q")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["second.fsidx"]


def _damaged(target: Path, how: str) -> None:
    data = target / "data.mdb"
    size = data.stat().st_size
    if how.startswith("truncated-"):
        os.truncate(data, min(int(how.removeprefix("truncated-")), size - 1))
    elif how.startswith("cut-"):
        os.truncate(data, size * int(how.removeprefix("cut-")) // 8)
    elif how.startswith("flipped-"):
        offset = int(how.removeprefix("flipped-"))
        with open(data, "r+b") as stream:
            stream.seek(offset)
            byte = stream.read(1)
            stream.seek(offset)
            stream.write(bytes([byte[0] ^ 0xFF]))
    elif how == "missing":
        data.unlink()
    elif how == "emptied":
        os.truncate(data, 0)


DAMAGES = ["truncated-0", "truncated-4096", "truncated-8192", "truncated-12288", "truncated-16384",
           *(f"cut-{eighths}" for eighths in range(1, 8)), "flipped-16", "flipped-20", "flipped-4112",
           "flipped-4096", "flipped-8200", "flipped-12300", "missing", "emptied"]


@pytest.mark.parametrize("how", DAMAGES)
def test_force_replaces_a_damaged_index_without_reading_it(tmp_path: Path, how: str) -> None:
    """A published index carries its tag: --force replaces it however its data.mdb was
    damaged or truncated, never reading it (LMDB's own reader dies by SIGBUS past a
    truncated file's end)."""
    target = an_index(tmp_path)
    _damaged(target, how)
    result = run_cli("fastsubs-index", "build", TINY, "-o", target, "--force", "-q", check=False)
    assert result.returncode == 0, result.stderr.decode()
    with fastsubs.open_index(target) as index:
        assert index.vocab_size == unigram_count(TINY)


@pytest.mark.parametrize("how", ["truncated-8192", "cut-1", "cut-4", "emptied"])
def test_an_untagged_damaged_index_is_refused_in_one_line_saying_what_to_do(tmp_path: Path, how: str) -> None:
    """Without its tag (an index published before builds wrote one), a directory is an
    index only if it opens as one: a damaged one is refused, left as it is, with the way out."""
    target = an_index(tmp_path)
    (target / TAG_NAME).unlink()
    _damaged(target, how)
    before = snapshot(target)
    result = run_cli("fastsubs-index", "build", TINY, "-o", target, "--force", "-q", check=False)
    assert result.returncode == 1
    line = one_line(result)
    assert line.startswith(f"fastsubs-index: error: {target}: ") and "remove it (rm -r) and build again" in line
    assert snapshot(target) == before


def test_an_untagged_index_that_opens_is_replaced(tmp_path: Path) -> None:
    target = an_index(tmp_path)
    (target / TAG_NAME).unlink()
    run_cli("fastsubs-index", "build", TINY, "-o", target, "--force", "-q")
    with fastsubs.open_index(target) as index:
        assert index.vocab_size == unigram_count(TINY)
    assert (target / TAG_NAME).is_file()


def an_index_of_format(version: int, tmp_path: Path) -> Path:
    """An intact index of an earlier version, as its build left it (data.mdb alone, no tag)."""
    target = tmp_path / "model.fsidx"
    target.mkdir()
    (target / "data.mdb").write_bytes(gzip.decompress((OLD_INDEXES / f"format-{version}.data.mdb.gz").read_bytes()))
    return target


@pytest.mark.parametrize("version", [1, 2, 3])
def test_force_replaces_an_index_of_an_earlier_version_as_the_upgrade_says(tmp_path: Path, version: int) -> None:
    """An index of 0.1.0 (formats 1 and 2) or 0.2.0 (format 3), as their builders wrote it:
    the query says to rebuild it; a build without --force says to pass it; with --force
    (CHANGES.md: ``fastsubs-index build MODEL --force``) it is replaced."""
    target = an_index_of_format(version, tmp_path)
    with pytest.raises(IndexVersionError):
        fastsubs.open_index(target)
    query = run_cli("fastsubs-query", target, "-n", "2", input=b"the cat\n", check=False)
    assert query.returncode == 1
    assert one_line(query) == (f"fastsubs-query: error: {target}: index format version {version} is older than "
                               f"this fastsubs reads ({fmt.FORMAT_VERSION}); rebuild it with this version")
    before = snapshot(target)
    line = one_line(run_cli("fastsubs-index", "build", TINY, "-o", target, "-q", check=False))
    assert line == f"fastsubs-index: error: {target}: an index is already there; pass --force to replace it"
    assert snapshot(target) == before
    run_cli("fastsubs-index", "build", TINY, "-o", target, "--force", "-q")
    with fastsubs.open_index(target) as index:
        assert index.vocab_size == unigram_count(TINY)
    assert sorted(p.name for p in target.iterdir()) == ["data.mdb", TAG_NAME]


def test_a_tag_with_other_text_is_no_tag(tmp_path: Path) -> None:
    target = another_programs_lmdb(tmp_path)
    (target / TAG_NAME).write_bytes(b"something else\n")
    result = run_cli("fastsubs-index", "build", TINY, "-o", target, "--force", "-q", check=False)
    assert result.returncode == 1 and "not a fastsubs index" in one_line(result)
