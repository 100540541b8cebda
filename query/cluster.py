"""``fastsubs-query --dask ADDRESS -i 'corpus/*.txt' -o out/``: whole input files as tasks
on a Dask cluster (``pip install '.[dask]'`` in the clone).

:func:`run_files` processes each input file as one task and writes ``out/<file name>``;
each output file is byte-identical to a single-machine run on that input file (with
``--format parquet``, ``out/<file name>`` is a dataset directory whose parts are those
of a single-machine run, published whole as there).  Each worker process opens the index
once (:func:`fastsubs.core.process_index`), from a path it can read.
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

from fastsubs.core import process_index
from fastsubs.errors import FastsubsError, missing_extra
from fastsubs.options import QueryOptions
from fastsubs.pipeline.chunks import process_chunk
from fastsubs.pipeline.formats import input_blocks
from fastsubs.pipeline.lines import numbered_chunks
from fastsubs.pipeline.parts import publish_part
from fastsubs.pipeline.textio import compressor, open_binary
from fastsubs.query.output_files import PARTIAL_SUFFIX, written_atomically
from fastsubs.query.output_lock import output_locked
from fastsubs.stats import SearchStats


def _process_file(job: tuple[str, str], index_path: str, options: QueryOptions) -> SearchStats:
    """One input file's output, written by one run at a time, as every ``-o`` is
    (:mod:`fastsubs.query.output_lock`, on the worker that writes it)."""
    with output_locked(job[1], warn=print):  # (a note in the worker's log)
        if options.format == "parquet":
            return _process_file_into_a_dataset(job, index_path, options)
        return _process_file_as_text(job, index_path, options)


def _process_file_as_text(job: tuple[str, str], index_path: str, options: QueryOptions) -> SearchStats:
    """One input file's output, written as fastsubs-query writes it (a compressed one in the
    same members), with a bad record an error as there; published whole, as every ``-o``
    (a task that fails leaves no file)."""
    source, target = job
    totals = SearchStats()
    compress = compressor(target)
    with open_binary(source) as stream, written_atomically(target) as out:
        index = process_index(index_path)
        for chunk in numbered_chunks(stream, source):
            result = process_chunk(index, chunk, options, source, compress)
            out.write(result.data)
            totals.add(result.stats)
            if result.error is not None:
                raise result.error
        if compress is not None and out.tell() == 0:  # no output at all: still a valid file
            out.write(compress(b""))
    return totals


def _process_file_into_a_dataset(job: tuple[str, str], index_path: str, options: QueryOptions) -> SearchStats:
    """One input file's Parquet dataset: its parts written into ``<target>.partial/`` as a
    single-machine run writes them, which becomes ``<target>`` once whole."""
    from fastsubs.pipeline.parquet import PartFiles

    source, target = job
    totals = SearchStats()
    building = f"{target}{PARTIAL_SUFFIX}"
    shutil.rmtree(building, ignore_errors=True)  # an earlier attempt's
    os.mkdir(building)
    parts = PartFiles(building, options)
    with open_binary(source) as stream:
        index = process_index(index_path)
        for chunk in numbered_chunks(stream, source, input_blocks(options)):
            result = process_chunk(index, chunk, options, source, parts=parts)
            assert result.part is not None
            publish_part(result.part, building)
            totals.add(result.stats)
            if result.error is not None:
                raise result.error
    shutil.rmtree(target, ignore_errors=True)
    os.rename(building, target)
    return totals


def run_files(scheduler: str, index_path: str, pattern: str, output_dir: Path, options: QueryOptions) -> SearchStats:
    """Process every file matching ``pattern`` on the cluster at ``scheduler``; one output file each."""
    try:
        import dask.bag as db
        from distributed import Client
    except ImportError as error:
        raise missing_extra("--dask needs Dask", "dask", str(error)) from None
    if options.format == "parquet":
        from fastsubs.pipeline.parquet import require_pyarrow

        require_pyarrow()
    sources = sorted(glob.glob(pattern))
    if not sources:
        raise FastsubsError(f"{pattern}: no input file matches")
    names = [os.path.basename(s) for s in sources]
    if len(set(names)) != len(names):
        raise FastsubsError(f"{pattern}: input files must have distinct names (they name the outputs)")
    with Client(scheduler) as client:  # first: a run that cannot reach its cluster makes nothing
        made = not output_dir.exists()
        output_dir.mkdir(parents=True, exist_ok=True)
        jobs = [(os.path.abspath(s), str(output_dir.resolve() / n)) for s, n in zip(sources, names)]
        bag = db.from_sequence(jobs, npartitions=len(jobs))
        try:
            results = client.compute(bag.map(_process_file, os.path.abspath(index_path), options)).result()
        except BaseException:
            if made and not any(output_dir.iterdir()):  # nothing written: leave nothing
                output_dir.rmdir()
            raise
    totals = SearchStats()
    for stats in results:
        totals.add(stats)
    return totals
