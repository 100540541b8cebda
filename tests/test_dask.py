"""Dask: a real LocalCluster with two worker processes; output identical to the serial run.
A run stopped by a signal: a scheduler and a worker started as the docs start them
(``dask scheduler``, ``dask worker``), processes of their own."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fastsubs
from conftest import BIN, REPO, demo_text, python_block, run_cli
from test_long_runs import holding, one_line, same_output

distributed = pytest.importorskip("distributed")
dask_bag = pytest.importorskip("dask.bag")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as local:
        yield local


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    lines = demo_text(45).split(b"\n")
    folder = tmp_path / "corpus"
    folder.mkdir()
    for part in range(3):
        (folder / f"part{part}.txt").write_bytes(b"\n".join(lines[part * 15:(part + 1) * 15]) + b"\n")
    (folder / "odd.txt").write_bytes(b"\xff bytes that are not UTF-8\n\nlast line without newline")
    (folder / "empty.txt").write_bytes(b"")
    return folder


def test_cli_on_a_cluster_equals_the_serial_run(cluster, corpus: Path, demo_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_cli("fastsubs-query", demo_index, "-n", "10", "--dask", cluster.scheduler_address,
            "-i", f"{corpus}/*.txt", "-o", out)
    for source in sorted(corpus.iterdir()):
        serial = run_cli("fastsubs-query", demo_index, "-n", "10", "-i", source).stdout
        assert (out / source.name).read_bytes() == serial, source.name


def test_bag_of_sentences_maps_to_the_serial_output(cluster, corpus: Path, demo_index: Path) -> None:
    from distributed import Client

    from fastsubs.dask import substitutes_bag

    lines = dask_bag.read_text(f"{corpus}/part*.txt", errors="surrogateescape")
    with Client(cluster) as client:
        rendered = client.compute(substitutes_bag(lines, demo_index, fastsubs.QueryOptions(n=5))).result()
    serial = b"".join(run_cli("fastsubs-query", demo_index, "-n", "5", "-i", source).stdout
                      for source in sorted(corpus.glob("part*.txt")))
    assert "".join(line + "\n" for line in rendered).encode() == serial


def test_missing_inputs_are_one_clear_line(cluster, demo_index: Path, tmp_path: Path) -> None:
    result = run_cli("fastsubs-query", demo_index, "--dask", cluster.scheduler_address,
                     "-i", f"{tmp_path}/nothing/*.txt", "-o", tmp_path / "out", check=False)
    assert result.returncode == 1 and b"no input file matches" in result.stderr
    assert result.stderr.count(b"\n") == 1


def test_notes_on_the_options_are_those_of_a_serial_run(cluster, tiny_index: Path, tmp_path: Path) -> None:
    """-n above the vocabulary and an excluded word the model lacks: the same lines on stderr."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_bytes(b"the cat\n")
    options = ["-n", "1000", "--exclude", "no-such-word"]
    on_cluster = run_cli("fastsubs-query", tiny_index, *options, "--dask", cluster.scheduler_address,
                         "-i", f"{tmp_path}/in/*.txt", "-o", tmp_path / "out")
    serial = run_cli("fastsubs-query", tiny_index, *options, "-i", tmp_path / "in" / "a.txt")
    said = [[line for line in run.stderr.decode().splitlines() if line.startswith("fastsubs-query: ")]
            for run in (on_cluster, serial)]  # not what Dask may log
    assert "note: -n 1,000 is more than" in serial.stderr.decode() and "'no-such-word'" in serial.stderr.decode()
    assert said[0] == said[1] and len(said[1]) == 2 and (tmp_path / "out" / "a.txt").read_bytes() == serial.stdout


def test_a_cluster_out_of_reach_is_one_line_and_leaves_nothing(tiny_index: Path, tmp_path: Path) -> None:
    """Nothing listens at the scheduler's address: the run ends at Dask's connect timeout
    (shortened here through Dask's own setting) with one line naming the address, and
    makes no -o directory (an empty one would look like a run that found no input)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_bytes(b"the cat\n")
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    result = subprocess.run([str(BIN / "fastsubs-query"), str(tiny_index), "--dask", address,
                             "-i", f"{tmp_path}/in/*.txt", "-o", str(tmp_path / "out" / "subs")],
                            capture_output=True, timeout=120,
                            env={**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "1s"})
    assert result.returncode == 1
    [line] = result.stderr.decode().splitlines()
    assert line.startswith("fastsubs-query: error: ") and address in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_bag_files_are_byte_identical_to_the_cli(cluster, corpus: Path, demo_index: Path, tmp_path: Path) -> None:
    """Any bytes, an empty line, an empty file, a last line without newline; text and JSON lines."""
    from distributed import Client

    from fastsubs.dask import substitutes_bag, to_textfiles

    sources = sorted(corpus.iterdir())
    for name, options, flags in [("text", fastsubs.QueryOptions(n=5, exclude=["the"]), ["-n", "5", "--exclude", "the"]),
                                 ("jsonl", fastsubs.QueryOptions(p=0.5, format="jsonl", sample=3, seed=2),
                                  ["-p", "0.5", "--format", "jsonl", "--sample", "3", "--seed", "2"])]:
        lines = dask_bag.read_text([str(s) for s in sources], encoding="utf-8", errors="surrogateescape")
        with Client(cluster):
            written = to_textfiles(substitutes_bag(lines, demo_index, options), f"{tmp_path}/{name}/*.txt")
        assert len(written) == len(sources)
        for source, path in zip(sources, sorted(written, key=lambda p: int(Path(p).stem))):
            serial = run_cli("fastsubs-query", demo_index, *flags, "-i", source).stdout
            assert Path(path).read_bytes() == serial, (name, source.name)


def stats_of(stderr: bytes) -> tuple[int, int, int]:
    """Positions, candidates evaluated and substitutes listed, from the line of --stats."""
    found = re.search(rb"positions (\d+)  candidates evaluated (\d+) .* substitutes listed (\d+)", stderr)
    assert found, stderr
    return int(found[1]), int(found[2]), int(found[3])


def test_threads_of_a_worker_search_at_once_and_count_their_own_work(demo_index: Path, tmp_path: Path) -> None:
    """One worker process with four threads runs four files at once on one open index:
    each output is the serial run's, and --stats adds up the serial runs' work (each
    thread counts its own searches, not what the others search meanwhile)."""
    lines = demo_text(600).split(b"\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for part in range(4):
        (corpus / f"part{part}.txt").write_bytes(b"\n".join(lines[part * 150:(part + 1) * 150]) + b"\n")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=4, processes=True,
                                  dashboard_address=":0") as threaded:
        result = run_cli("fastsubs-query", demo_index, "-n", "10", "--stats", "--dask", threaded.scheduler_address,
                         "-i", f"{corpus}/*.txt", "-o", tmp_path / "out")
    expected = [0, 0, 0]
    for source in sorted(corpus.iterdir()):
        serial = run_cli("fastsubs-query", demo_index, "-n", "10", "--stats", "-i", source)
        assert (tmp_path / "out" / source.name).read_bytes() == serial.stdout, source.name
        expected = [total + part for total, part in zip(expected, stats_of(serial.stderr))]
    assert list(stats_of(result.stderr)) == expected


def test_the_documented_dask_example_runs_as_written(corpus: Path, demo_index: Path, tmp_path: Path) -> None:
    """The block of docs/dask.md, pasted into a file and run in a directory holding corpus/
    and model.fsidx: one file per input file, each what the CLI writes for it."""
    script = tmp_path / "pipeline.py"
    script.write_text(python_block(REPO / "docs" / "dask.md"))
    (tmp_path / "model.fsidx").symlink_to(demo_index)
    assert corpus == tmp_path / "corpus"
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, timeout=300,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    written = sorted((tmp_path / "subs").iterdir(), key=lambda p: int(p.name.split(".")[0]))
    sources = sorted(corpus.iterdir())
    assert len(written) == len(sources)
    for source, path in zip(sources, written):
        serial = run_cli("fastsubs-query", demo_index, "-n", "100", "--exclude", "</s>", "--exclude", "<unk>",
                         "-i", source).stdout
        assert path.read_bytes() == serial, source.name


def cli_dataset_rows(index: Path, source: Path, flags: list[str], out: Path) -> list[dict]:
    """The rows fastsubs-query's own dataset holds for ``source``."""
    import pyarrow.parquet as pq

    run_cli("fastsubs-query", index, *flags, "--format", "parquet", "-i", source, "-o", out)
    return pq.read_table(out).to_pylist()


def test_a_bag_becomes_the_clis_dataset_one_part_per_partition(cluster, corpus: Path, demo_index: Path,
                                                               tmp_path: Path) -> None:
    """Dask's own writer, on the cluster: part i holds the rows of input file i (bytes that
    are not UTF-8, an empty line, an empty file too) as the CLI's dataset of that file
    holds them, in its schema."""
    pq = pytest.importorskip("pyarrow.parquet")
    from distributed import Client

    from fastsubs.dask import to_parquet
    from fastsubs.pipeline.parquet import schema

    sources = sorted(corpus.iterdir())
    options = fastsubs.QueryOptions(n=5, normalize=True, sample=2, seed=3, exclude=["the"])
    flags = ["-n", "5", "-z", "--sample", "2", "--seed", "3", "--exclude", "the"]
    lines = dask_bag.read_text([str(s) for s in sources], encoding="utf-8", errors="surrogateescape")
    with Client(cluster):
        to_parquet(lines, tmp_path / "bag.parquet", demo_index, options)
    parts = sorted((tmp_path / "bag.parquet").glob("*.parquet"), key=lambda p: int(p.name.split(".")[1]))
    assert len(parts) == len(sources)
    for number, (source, part) in enumerate(zip(sources, parts)):
        written = pq.read_table(part)
        assert written.schema.remove_metadata() == schema(options), part
        assert written.to_pylist() == cli_dataset_rows(demo_index, source, flags, tmp_path / f"cli{number}"), source


def test_a_series_of_lines_gives_the_same_frame(cluster, corpus: Path, demo_index: Path, tmp_path: Path) -> None:
    """A Dask DataFrame of one column of lines (one partition per file) gives the rows of a bag."""
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    from distributed import Client

    from fastsubs.dask import substitutes_frame

    sources = sorted(corpus.glob("part*.txt"))
    texts = [pd.DataFrame({"text": s.read_text().splitlines(keepends=True)}) for s in sources]
    frame = dd.concat([dd.from_pandas(text, npartitions=1) for text in texts])
    options = fastsubs.QueryOptions(n=3)
    with Client(cluster) as client:
        rows = client.compute(substitutes_frame(frame, demo_index, options)).result()
    expected = [row for number, source in enumerate(sources)
                for row in cli_dataset_rows(demo_index, source, ["-n", "3"], tmp_path / f"cli{number}")]
    assert pa.Table.from_pandas(rows, preserve_index=False).to_pylist() == expected


def test_a_failed_task_leaves_no_output_file(cluster, demo_index: Path, tmp_path: Path) -> None:
    """--dask publishes each output file whole: a file whose third record is bad, after
    two records already written, leaves neither its output nor a partial one."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "good.tsv").write_bytes(b"n\ti\t0\tthe cat sat\n")
    (inputs / "bad.tsv").write_bytes(b"n\ti\t0\tthe cat sat\nn\ti\t1\ta dog\nn\ti\tx\tthe\n")
    out = tmp_path / "out"
    result = run_cli("fastsubs-query", demo_index, "-t", "-n", "5", "--dask", cluster.scheduler_address,
                     "-i", f"{inputs}/*.tsv", "-o", out, check=False)
    assert result.returncode == 1 and b"bad.tsv:3:" in result.stderr
    assert not (out / "bad.tsv").exists() and not (out / "bad.tsv.partial").exists()


def wait_until(condition: Callable[[], bool], seconds: float, what: str) -> None:
    """Wait, polling, for ``condition`` to hold; fail saying ``what`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def scheduler_and_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A scheduler and a worker of two threads, started as docs/dask.md starts them (``dask
    scheduler``, ``dask worker``), each a process of its own: the scheduler's address."""
    folder = tmp_path_factory.mktemp("cluster")
    contact = folder / "scheduler.json"
    started = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--scheduler-file", str(contact), "--port", "0",
                                 "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        started.append(subprocess.Popen([str(BIN / "dask"), "worker", "--scheduler-file", str(contact),
                                         "--nthreads", "2", "--no-dashboard"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        wait_until(contact.exists, 120, "the scheduler wrote its address")
        with distributed.Client(scheduler_file=str(contact), timeout=120) as client:
            client.wait_for_workers(1, timeout=120)
            yield client.scheduler.address
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=60)


#: How soon a stopped run's tasks end: each checks between chunks, a second apart
#: (fastsubs.query.cluster.CHECK_INTERVAL), where a task that did not would search on for minutes.
TASKS_END_WITHIN = 60


@pytest.mark.timeout(600)
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_a_stopped_run_publishes_nothing_after_it_says_so(scheduler_and_worker: str, demo_index: Path,
                                                           tmp_path: Path, stop: signal.Signals) -> None:
    """A client stopped while both of its tasks search says so (143 or 130, one line; SIGKILL
    says nothing), and nothing appears in -o afterwards: each task stops at its next check,
    well before its file's end, removes its partial file and publishes nothing (a task
    used to search on and publish its file, 15 s to 8 minutes after the client had said
    "terminated").  The worker is free again for the next run."""
    corpus = tmp_path / "in"
    corpus.mkdir()
    text = demo_text(1500) * 60  # minutes of search per file
    for name in ("a.txt", "b.txt"):
        (corpus / name).write_bytes(text)
    out = tmp_path / "out"
    client = subprocess.Popen([str(BIN / "fastsubs-query"), str(demo_index), "-n", "100", "--dask",
                               scheduler_and_worker, "-i", f"{corpus}/*.txt", "-o", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    partials = [out / "a.txt.partial", out / "b.txt.partial"]

    def both_search() -> bool:
        assert client.poll() is None, client.communicate()[1].decode()
        return all(path.exists() and path.stat().st_size > 0 for path in partials)

    wait_until(both_search, 300, "both tasks wrote their first chunk")
    client.send_signal(stop)
    _, stderr = client.communicate(timeout=120)
    assert not (out / "a.txt").exists() and not (out / "b.txt").exists()  # as it said it stopped
    if stop == signal.SIGKILL:
        assert client.returncode == -stop
    else:
        assert client.returncode == 128 + stop, stderr.decode()
        said = "terminated" if stop == signal.SIGTERM else "interrupted"
        assert stderr.decode().splitlines()[-1] == f"fastsubs-query: {said}"
    # each task, stopped, removes its partial file, then its output's lock (OUT.lock) as it ends
    wait_until(lambda: not any(out.iterdir()), TASKS_END_WITHIN, "the tasks ended, leaving nothing")
    (corpus / "a.txt").write_bytes(b"the cat sat\n")
    (corpus / "b.txt").unlink()
    run_cli("fastsubs-query", demo_index, "-n", "5", "--dask", scheduler_and_worker, "-i", f"{corpus}/*.txt",
            "-o", out)
    serial = run_cli("fastsubs-query", demo_index, "-n", "5", "-i", corpus / "a.txt").stdout
    assert sorted(p.name for p in out.iterdir()) == ["a.txt"] and (out / "a.txt").read_bytes() == serial


def publishing_task(publishing: Any, target: str, ready: str, go: str) -> str:
    """A task that, once the Event ``go`` is set, publishes ``target`` through ``publishing``
    (its rename: writing the file); says whether it did.  Sets ``ready`` once running."""
    from distributed import Event

    from fastsubs.query.cluster import RunStopped

    Event(ready).set()
    assert Event(go).wait(120)
    try:
        publishing.publish(lambda: Path(target).write_text("published"))
    except RunStopped:
        return "refused"
    return "published"


@pytest.mark.parametrize("stopped", [False, True], ids=["running", "stopped"])
def test_a_task_publishes_only_while_its_run_is_running(cluster, tmp_path: Path, stopped: bool) -> None:
    """A task whose run's client has begun to stop (it sets the run's event first) refuses
    to publish, though its future was not cancelled yet; one whose run runs publishes."""
    from distributed import Client, Event

    from fastsubs.query.cluster import Publishing

    publishing = Publishing.for_new_run()
    ready, go, target = f"{publishing.name}-ready", f"{publishing.name}-go", tmp_path / "file.txt"
    with Client(cluster) as client:
        future = client.submit(publishing_task, publishing, str(target), ready, go, pure=False)
        assert Event(ready).wait(120)
        if stopped:
            Event(publishing.name).set()
        Event(go).set()
        assert future.result(timeout=120) == ("refused" if stopped else "published")
        publishing.close()
    assert target.exists() != stopped


def renaming_slowly(target: str, inside: str) -> Callable[[], None]:
    """A rename that says when it has begun (the Event ``inside``) and takes 2 s (a slow
    shared filesystem), then writes ``target``."""
    def rename() -> None:
        from distributed import Event

        Event(inside).set()
        time.sleep(2)
        Path(target).write_text("published")

    return rename


def test_a_stopping_client_waits_for_a_rename_under_way(cluster, tmp_path: Path) -> None:
    """A client that stops while a task renames its file returns only once the rename is
    done: nothing is published after the client says it stopped."""
    from distributed import Client, Event

    from fastsubs.query.cluster import Publishing

    publishing = Publishing.for_new_run()
    inside, target = f"{publishing.name}-inside", tmp_path / "file.txt"
    with Client(cluster) as client:
        future = client.submit(lambda: publishing.publish(renaming_slowly(str(target), inside)), pure=False)
        assert Event(inside).wait(120)
        stopped = Exception()
        publishing.stop(client, [future], stopped)
        assert target.exists() and not getattr(stopped, "__notes__", [])


@pytest.mark.parametrize("args", [[], ["-f", "parquet"]], ids=["text", "parquet"])
def test_a_file_another_run_is_writing_is_refused(cluster, corpus: Path, demo_index: Path, tmp_path: Path,
                                                  args: list[str]) -> None:
    """Each output file has one writer, on the worker that writes it: an output file that
    another fastsubs-query is writing (its input still coming) fails the --dask run with the
    one line a second single-machine run gets, and is left to its writer."""
    out = tmp_path / "out"
    out.mkdir()
    taken = out / "part1.txt"
    holder = subprocess.Popen([str(BIN / "fastsubs-query"), str(demo_index), "-n", "10", *args, "-o", str(taken)],
                              stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        holding(holder, taken)
        result = run_cli("fastsubs-query", demo_index, "-n", "10", *args, "--dask", cluster.scheduler_address,
                         "-i", f"{corpus}/*.txt", "-o", out, check=False)
        assert result.returncode == 1
        assert one_line(result.stderr) == (f"fastsubs-query: error: {taken}: cannot write the output (another "
                                           f"fastsubs-query, pid {holder.pid}, is writing it: wait for that run to "
                                           "end, or stop it)")
        holder.stdin.write((corpus / "part1.txt").read_bytes())  # type: ignore[union-attr]
    finally:
        holder.stdin.close()  # type: ignore[union-attr]
        holder.wait(timeout=300)
    assert holder.returncode == 0
    single = tmp_path / "single"
    run_cli("fastsubs-query", demo_index, "-n", "10", *args, "-i", corpus / "part1.txt", "-o", single)
    assert same_output(taken, single)
