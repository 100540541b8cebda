"""The search of two or more builds of fastsubs, interleaved: is a change faster, and by how much?

Usage::

    python -m fastsubs.bench.versions \\
        --build 0.3.0=/tmp/pkg-030:/tmp/v030-kn4-64k.fsidx --build now=:kn4-64k.fsidx \\
        --held-out dev300.txt --corpus corpus3000.txt --ks 1,10,100,1000,p0.9 --rounds 5

A build is ``NAME=PACKAGES:INDEX``.  PACKAGES is a folder that holds an installed fastsubs,
made from a worktree of its commit (docs/performance.md, "Comparing builds")::

    git worktree add /tmp/wt-030 4f39c5f
    (cd /tmp/wt-030 && pip install --no-deps --no-build-isolation . --target /tmp/pkg-030)

or nothing, for the fastsubs this Python imports.  INDEX is an index that build reads (each
version reads its own format: build it with that build's ``fastsubs.indexer``).

Each figure is the CPU time (user and system) of a fresh process with PACKAGES first on its
``PYTHONPATH``:

* per K of ``--ks`` (``pP`` for ``-p P``): ``batch()`` over the held-out lines once, then
  again, timed: a warm pass, the reader's cache holding what the lines need;
* ``first``: a whole ``fastsubs-query -n FIRST_N`` over the corpus lines, from its start:
  a first pass, nothing cached, the command line's start-up and output included.

Rounds interleave the builds, each round starting with the next one, so that the machine's
drift (this project's 2-core VM moves by 10% within an hour) falls on every build alike.
Prints each row's medians and each build's time as a fraction of the first build's (the
issues' "N×" speed-ups are its inverse).  Compare figures within one run only.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: A warm pass in a child: argv index, text, spec; prints the second pass's CPU seconds.
WARM_PASS = """
import sys, time
import fastsubs
index_path, text, spec = sys.argv[1:4]
lines = open(text, encoding="utf-8").read().splitlines()
n, p = (None, float(spec[1:])) if spec.startswith("p") else (int(spec), None)
with fastsubs.open_index(index_path) as index:
    index.batch(lines, n=n, p=p)
    start = time.process_time()
    index.batch(lines, n=n, p=p)
    print(time.process_time() - start)
"""

#: The command line of the build on the child's path (every version has this entry).
QUERY = "from fastsubs.query.cli import main; main()"

#: What a build says it is: its version and commit, as ``--version`` prints them.
DESCRIBE = "import fastsubs.origin as origin; print(origin.describe())"


@dataclass(frozen=True)
class Build:
    name: str
    packages: str  # '' for the fastsubs this Python imports
    index: Path

    def environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        if self.packages:
            environment["PYTHONPATH"] = os.pathsep.join(filter(None, [self.packages, environment.get("PYTHONPATH")]))
        return environment


def parse_build(text: str) -> Build:
    """``NAME=PACKAGES:INDEX`` (PACKAGES may be empty)."""
    name, separator, rest = text.partition("=")
    packages, colon, index = rest.partition(":")
    if not (name and separator and colon and index):
        raise argparse.ArgumentTypeError(f"a build is NAME=PACKAGES:INDEX (PACKAGES may be empty), got {text!r}")
    return Build(name, packages, Path(index))


def child_cpu(command: list[str], build: Build, stdin_path: Path | None = None) -> tuple[float, str]:
    """Runs ``command`` for ``build`` from ``/`` (Python puts the folder it starts in first on
    its path: in a clone's root, the clone's ``fastsubs/`` would be imported instead of
    PACKAGES's); returns the CPU seconds it took and what it printed, unless it read
    ``stdin_path`` (a first pass: its output, tens of MB, goes to /dev/null)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(stdin_path or os.devnull, "rb") as stdin:
        result = subprocess.run(command, env=build.environment(), stdin=stdin, cwd="/", check=False,
                                stdout=subprocess.DEVNULL if stdin_path else subprocess.PIPE, stderr=subprocess.PIPE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"{build.name}: exited {result.returncode}: {result.stderr.decode(errors='replace').strip()[-500:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return cpu, (result.stdout or b"").decode()


def measure(build: Build, row: str, held_out: Path, corpus: Path, first_n: int) -> float:
    """One figure of ``row`` (a K, ``pP``, or ``first``) for ``build``, in CPU seconds."""
    if row == "first":
        return child_cpu([sys.executable, "-c", QUERY, str(build.index), "-n", str(first_n)], build, corpus)[0]
    return float(child_cpu([sys.executable, "-c", WARM_PASS, str(build.index), str(held_out), row], build)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", type=parse_build, action="append", required=True, dest="builds",
                        help="NAME=PACKAGES:INDEX, twice or more; the first is the others' reference")
    parser.add_argument("--held-out", type=Path, required=True, help="lines for the warm passes")
    parser.add_argument("--corpus", type=Path, required=True, help="lines for the first pass")
    parser.add_argument("--ks", default="10,100", help="comma-separated K (pP for -p P) of the warm rows")
    parser.add_argument("--first-n", type=int, default=100, help="-n of the first pass (0: no first-pass row)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    builds: list[Build] = args.builds
    if len({b.name for b in builds}) != len(builds) or len(builds) < 2:
        parser.error("give two or more builds, each its own NAME")
    for path in [args.held_out, args.corpus, *(b.index for b in builds), *(Path(b.packages) for b in builds
                                                                           if b.packages)]:
        if not path.exists():
            parser.error(f"{path}: no such file or folder")
    builds = [Build(b.name, str(Path(b.packages).resolve()) if b.packages else "", b.index.resolve()) for b in builds]
    held_out, corpus = args.held_out.resolve(), args.corpus.resolve()
    for build in builds:
        said = child_cpu([sys.executable, "-c", DESCRIBE], build)[1].strip()
        print(f"{build.name}: fastsubs {said}, {build.index}", flush=True)
    rows = [k.strip() for k in args.ks.split(",") if k.strip()] + (["first"] if args.first_n else [])
    times: dict[tuple[str, str], list[float]] = {(row, b.name): [] for row in rows for b in builds}
    for round_ in range(args.rounds):
        order = builds[round_ % len(builds):] + builds[:round_ % len(builds)]
        for row in rows:
            for build in order:
                times[row, build.name].append(measure(build, row, held_out, corpus, args.first_n))
    lines_of = {path: len(path.read_bytes().splitlines()) for path in (held_out, corpus)}
    for row in rows:
        what = (f"first pass, fastsubs-query -n {args.first_n} over {lines_of[corpus]:,} lines" if row == "first"
                else f"warm batch(), {'-p ' + row[1:] if row.startswith('p') else 'K = ' + row}, "
                     f"{lines_of[held_out]:,} lines")
        reference = statistics.median(times[row, builds[0].name])
        figures = []
        for build in builds:
            median = statistics.median(times[row, build.name])
            figures.append(f"{build.name} {median:.3f} s ({median / reference:.3f})")
        print(f"{what}: " + ", ".join(figures) + f"  [medians of {args.rounds}]", flush=True)


if __name__ == "__main__":
    main()
