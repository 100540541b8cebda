"""Dask: a real LocalCluster with two worker processes; output identical to the serial run."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, shared

distributed = pytest.importorskip("distributed")
dask_bag = pytest.importorskip("dask.bag")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as local:
        yield local


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    lines = shared("heldout-dev.txt").read_bytes().split(b"\n")
    folder = tmp_path / "corpus"
    folder.mkdir()
    for part in range(3):
        (folder / f"part{part}.txt").write_bytes(b"\n".join(lines[part * 15:(part + 1) * 15]) + b"\n")
    (folder / "odd.txt").write_bytes(b"\xff bytes that are not UTF-8\n\nlast line without newline")
    return folder


def test_cli_on_a_cluster_equals_the_serial_run(cluster, corpus: Path, small_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_cli("fastsubs-query", small_index, "-n", "10", "--dask", cluster.scheduler_address,
            "-i", f"{corpus}/*.txt", "-o", out)
    for source in sorted(corpus.iterdir()):
        serial = run_cli("fastsubs-query", small_index, "-n", "10", "-i", source).stdout
        assert (out / source.name).read_bytes() == serial, source.name


def test_bag_of_sentences_maps_to_the_serial_output(cluster, corpus: Path, small_index: Path) -> None:
    from distributed import Client

    from fastsubs.query.dask_jobs import substitutes_bag
    from fastsubs.query.records import OutputOptions
    from fastsubs.query.search import Limits

    lines = dask_bag.read_text(f"{corpus}/part*.txt", errors="surrogateescape")
    with Client(cluster) as client:
        rendered = client.compute(substitutes_bag(lines, small_index, OutputOptions(Limits(5)))).result()
    serial = b"".join(run_cli("fastsubs-query", small_index, "-n", "5", "-i", source).stdout
                      for source in sorted(corpus.glob("part*.txt")))
    assert "".join(rendered).encode() == serial


def test_missing_inputs_are_one_clear_line(cluster, small_index: Path, tmp_path: Path) -> None:
    result = run_cli("fastsubs-query", small_index, "--dask", cluster.scheduler_address,
                     "-i", f"{tmp_path}/nothing/*.txt", "-o", tmp_path / "out", check=False)
    assert result.returncode == 1 and b"no input file matches" in result.stderr
    assert result.stderr.count(b"\n") == 1
