"""``OUT.json``: what produced an output file, for a methods section to cite.

Written beside ``-o OUT`` just before OUT is published (atomically, by
:mod:`fastsubs.query.output_files`), it records the fastsubs version (and the commit of a build from a clone,
:mod:`fastsubs.origin`), the model compiled
into the index (its file name, size and SHA-256, from the index's metadata), the options
and the command line they make, the compressor of a compressed output (format, level and
library: they decide its bytes), and the input: its path, its line count and the SHA-256
of its (decompressed) text.  Nothing in it depends on timing or a resumed run, so a
resumed run writes the same record as an uninterrupted one of the same command; the
worker count is only in the command line it records (``--workers``).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import Any

from fastsubs import origin
from fastsubs.options import QueryOptions
from fastsubs.pipeline.textio import DEFAULT_LEVELS, Compressor

#: Appended to OUT for its record.
SUFFIX = ".json"
FORMAT = "fastsubs-output-provenance"
VERSION = 1

#: The flag of each option, in the order the command line lists them.
FLAGS = {"n": "-n", "p": "-p", "normalize": "-z", "targets": "-t", "skip_bad_records": "--skip-bad-records",
          "format": "--format", "no_eos": "--no-eos", "sample": "--sample", "seed": "--seed", "exclude": "--exclude"}


def command_arguments(options: QueryOptions) -> list[str]:
    """The ``fastsubs-query`` flags that ask for ``options`` (defaults left out)."""
    defaults = QueryOptions()
    arguments: list[str] = []
    for name, flag in FLAGS.items():
        value = getattr(options, name)
        if value is None or value == getattr(defaults, name) or (name == "seed" and options.sample is None):
            continue
        if isinstance(value, bool):
            arguments.append(flag)
        elif isinstance(value, tuple):
            for item in value:
                arguments += [flag, item]
        else:
            arguments += [flag, str(value)]
    return arguments


def run_record(index_path: str | os.PathLike[str], index_meta: dict[str, Any], options: QueryOptions,
               compress: Compressor | None = None) -> dict[str, Any]:
    """What is known of a run before it reads its input (``compress``: its output's compressor)."""
    source = index_meta.get("source", {})
    arguments = command_arguments(options)
    if compress is not None and compress.level != DEFAULT_LEVELS[compress.kind]:
        arguments += ["--compress-level", str(compress.level)]
    return {
        "format": FORMAT,
        "version": VERSION,
        "fastsubs": origin.VERSION,
        "index": {"path": os.path.abspath(index_path), "format_version": index_meta.get("format_version"),
                  "order": index_meta.get("order"), "vocab_size": index_meta.get("vocab_size"),
                  "model": {"name": source.get("name"), "size": source.get("size"), "sha256": source.get("sha256")}},
        "options": dataclasses.asdict(options),
        "compression": None if compress is None else dataclasses.asdict(compress),
        "arguments": arguments,
    }


def finished_record(run: dict[str, Any], output: str | os.PathLike[str], source: str, lines: int,
                    input_sha256: str, workers: int = 1) -> dict[str, Any]:
    """The record of a run that has read its whole input and writes ``output``, finished by
    ``workers`` processes: its ``command`` is that run's whole command line (``--workers``
    too, which the output does not depend on, so ``arguments`` leaves it out)."""
    input_path = source if source.startswith("<") else os.path.abspath(source)
    command = ["fastsubs-query", run["index"]["path"], *run["arguments"]]
    if workers != 1:
        command += ["--workers", str(workers)]
    if not source.startswith("<"):
        command += ["-i", input_path]
    command += ["-o", os.path.abspath(output)]
    # asked here, at the end, not as the run starts: in a clone it takes git a few processes
    return {**run, "fastsubs_commit": origin.commit(), "command": shlex.join(command),
            "input": {"path": input_path, "lines": lines, "sha256": input_sha256},
            "output": os.path.abspath(output)}
