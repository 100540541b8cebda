"""Does the test suite catch bugs in the search?  Plant one at a time and see.

Each mutation below changes one line of ``query/_kernel.c`` the way a plausible bug
would (a rank off by one, the paper's wrong bound, ...).  For each, this script

1. copies the repository (the working tree's tracked and untracked, not ignored, files,
   or a commit with ``--ref``) into a temporary directory, beside a link to the shared
   data folder, so the repository itself is never touched;
2. applies the mutation there, compiles the copy's kernel and lays the package out in a
   folder put first on ``PYTHONPATH`` (checking that Python then imports *that* build);
3. runs the default test suite of the copy against it, and reports which tests failed.

A mutation the suite does not catch is a hole in the safety net; a mutation whose line
is no longer in the kernel is reported as such (update the table after a rewrite).

    .venv/bin/python tests/mutations.py                 # every mutation, default suite
    .venv/bin/python tests/mutations.py --only tie-order-reversed -- tests/test_exactness.py
    .venv/bin/python tests/mutations.py --baseline      # also run the unmutated copy first

Exit status 0 when every mutation applied and was caught (and the baseline passed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KERNEL = "query/_kernel.c"


@dataclass(frozen=True)
class Mutation:
    """Replace the one line of the kernel containing ``old`` by the same line with ``new``."""

    name: str
    why: str
    old: str
    new: str


MUTATIONS = [
    Mutation("rank-map-off-by-one",
             "locate() through a rank map counts the word's own bit: every big-pattern position is one too far",
             "popcount64(block.bits & (bit - 1))", "popcount64(block.bits & ((bit << 1) - 1))"),
    Mutation("two-level-map-off-by-one",
             "locate() through a two-level map counts the word's own Block: sparse big patterns read the next Block",
             "super.first + popcount64(super.present & ((1ull << j) - 1))",
             "super.first + popcount64(super.present & ((2ull << j) - 1))"),
    Mutation("bound-without-positive-backoff",
             "beta(A x B) bounded by 0, the paper's bound, wrong for positive back-off weights (ALGORITHM.md)",
             "sc->beta_sup = k->pats[sc->beta].beta_sup;", "sc->beta_sup = 0.0;"),
    Mutation("unigram-backoff-bound-zero",
             "the unigram back-off of x bounded by 0 instead of the largest stored one",
             "sc->beta_sup = k->unigram_beta_sup;", "sc->beta_sup = 0.0;"),
    Mutation("drop-threshold-ignores-count",
             "a batch drops words below the best score so far, not below the count-th best",
             "double threshold = n_top == top_size ? k->top[0] : -INFINITY;",
             "double threshold = n_top ? k->top[0] : -INFINITY;"),
    Mutation("tie-order-reversed",
             "equal scores listed highest word id first",
             "(a->score == b->score && a->word < b->word)", "(a->score == b->score && a->word > b->word)"),
    Mutation("p-rule-counts-excluded-words",
             "with --exclude, the -p rule's V still counts the excluded words",
             "(double)(candidates - n_listed)", "(double)(k->vocab_size - n_listed)"),
    Mutation("excluded-words-stay-flagged",
             "the flags of excluded words are not cleared: later searches never list them",
             "k->flags[excluded[i]] = 0;", "k->flags[excluded[i]] |= 0;"),
]


def mutate(source: str, mutation: Mutation) -> str:
    """The kernel with the mutation applied; ValueError unless ``old`` is on exactly one line."""
    lines = source.split("\n")
    hits = [i for i, line in enumerate(lines) if mutation.old in line]
    if len(hits) != 1:
        raise ValueError(f"{mutation.name}: {mutation.old!r} is on {len(hits)} lines of {KERNEL}, not one")
    lines[hits[0]] = lines[hits[0]].replace(mutation.old, mutation.new)
    return "\n".join(lines)


def copy_repository(target: Path, ref: str | None) -> None:
    """The working tree's files (tracked and untracked, not ignored), or commit ``ref``."""
    target.mkdir(parents=True)
    if ref is not None:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
        return
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True).stdout
    for name in filter(None, listed.decode("utf-8", "surrogateescape").split("\0")):
        source = REPO / name
        if source.is_file():  # listed but deleted in the working tree: not copied
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def install(copy: Path, site: Path) -> None:
    """Compile the copy's kernel and lay the package out in ``site`` as an installation
    would (``fastsubs``, with ``indexer`` and ``query`` inside); check that Python then
    imports that build, not the repository's."""
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], check=True, cwd=copy,
                   capture_output=True)
    shutil.rmtree(site, ignore_errors=True)
    shutil.copytree(copy / "fastsubs", site / "fastsubs")
    for package in ("indexer", "query"):
        shutil.copytree(copy / package, site / "fastsubs" / package)
    for built in (copy / "query").glob("_kernel*.so"):
        built.unlink()  # the next mutation compiles its own
    where = subprocess.run([sys.executable, "-c", "import fastsubs.query._kernel as k; print(k.__file__)"],
                           check=True, capture_output=True, text=True, env=environment(site), cwd=copy).stdout
    if not Path(where.strip()).is_relative_to(site):
        raise RuntimeError(f"the tests would import {where.strip()}, not the build in {site}")


def environment(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Run in the copy, whose own ``fastsubs`` folder (without ``query``) must not shadow
    # the build: no current directory on sys.path, here and in every process the tests start.
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_suite(copy: Path, site: Path, pytest_args: list[str], timeout: float) -> tuple[str, list[str], float]:
    """(outcome, failed test ids, seconds) of the copy's default suite against ``site``."""
    start = time.monotonic()
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                                 "--hypothesis-profile", "no-shrink", *pytest_args],
                                cwd=copy, env=environment(site), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timed out", [], time.monotonic() - start
    seconds = time.monotonic() - start
    failed = sorted({m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", result.stdout, re.MULTILINE)})
    summary = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
    if result.returncode < 0:
        summary = f"crashed (signal {-result.returncode}); {summary}"
    return summary, failed, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", help="test this commit instead of the working tree")
    parser.add_argument("--only", action="append", choices=[m.name for m in MUTATIONS],
                        help="run only this mutation (repeatable)")
    parser.add_argument("--baseline", action="store_true", help="first run the unmutated copy")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per suite run")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest (default: the default suite)")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]

    caught_all = True
    with tempfile.TemporaryDirectory(prefix="fastsubs-mutations-") as tmp:
        copy, site = Path(tmp) / "fastsubs", Path(tmp) / "site"
        copy_repository(copy, args.ref)
        shared = REPO.parent / "shared"
        if shared.exists():  # the tests find ../shared/data beside the repository
            (Path(tmp) / "shared").symlink_to(shared)
        original = (copy / KERNEL).read_text()
        runs: list[tuple[str, Mutation | None]] = [("baseline", None)] if args.baseline else []
        runs += [(m.name, m) for m in chosen]
        for name, mutation in runs:
            try:
                (copy / KERNEL).write_text(original if mutation is None else mutate(original, mutation))
            except ValueError as error:
                print(f"{name}: DOES NOT APPLY: {error}", flush=True)
                caught_all = False
                continue
            try:
                install(copy, site)
            except (subprocess.CalledProcessError, RuntimeError) as error:
                print(f"{name}: does not build or install: {error}", flush=True)
                caught_all = False
                continue
            finally:
                (copy / KERNEL).write_text(original)
            summary, failed, seconds = run_suite(copy, site, args.pytest_args, args.timeout)
            failing = bool(failed) or re.search(r"\d+ (failed|errors?)\b", summary) is not None
            if mutation is None:
                ok = not failing and "passed" in summary
                print(f"baseline: {summary} ({seconds:.0f} s){'' if ok else ' -- NOT GREEN'}", flush=True)
                caught_all &= ok
                continue
            caught = failing or "crashed" in summary or summary == "timed out"
            caught_all &= caught
            print(f"{name}: {'caught' if caught else 'NOT CAUGHT'} -- {mutation.why}\n"
                  f"  {summary} ({seconds:.0f} s)", flush=True)
            for test in failed:
                print(f"  failed: {test}", flush=True)
    return 0 if caught_all else 1


if __name__ == "__main__":
    sys.exit(main())
