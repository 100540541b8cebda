"""Does the test suite catch bugs in the kernel?  Plant one at a time and see.

Each mutation below changes one line of one file of the kernel (``query/kernel/``: the
record store, the terms, the search) the way a plausible bug would (a rank off by one,
the paper's wrong bound, a cache slot reused while a search holds it, ...).  For each,
this script

1. copies the repository (the working tree's tracked and untracked, not ignored, files,
   or a commit with ``--ref``) into a temporary directory, beside a link to the shared
   data folder, so the repository itself is never touched;
2. applies the mutation to its file there, compiles the copy's kernel as ``setup.py``
   does (every source it names: ``query/kernel/*.c`` and the vendored LMDB) and lays the
   package out in a folder put first on ``PYTHONPATH`` (checking that Python then
   imports *that* build);
3. runs the default test suite of the copy against it, and reports which tests failed.

A mutation the suite does not catch is a hole in the safety net; a mutation whose line
is no longer in its file is reported as such (update the table after a rewrite).

    .venv/bin/python tests/mutations.py -- -n 2         # every mutation, default suite, 2 processes
    .venv/bin/python tests/mutations.py --only tie-order-reversed -- tests/test_exactness.py
    .venv/bin/python tests/mutations.py --baseline      # also run the unmutated copy first

Exit status 0 when every mutation applied and was caught (and the baseline passed).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STORE, TERMS, SEARCH = "query/kernel/store.c", "query/kernel/terms.c", "query/kernel/search.c"


@dataclass(frozen=True)
class Mutation:
    """Replace the one line of ``file`` containing ``old`` by the same line with ``new``."""

    name: str
    file: str
    why: str
    old: str
    new: str


MUTATIONS = [
    # store.c: reading records, the cache slots, rank maps and sorted prefixes
    Mutation("checksum-not-checked", STORE,
             "a record's checksum is computed but never compared: a flipped byte is read as an answer",
             "!= value[0]) {", "!= value[0] && 0) {"),
    Mutation("has-beta-for-every-order", STORE,
             "records of the highest order read as if they stored back-off weights",
             "rec->has_beta = order < s->order;", "rec->has_beta = order <= s->order;"),
    Mutation("cache-victim-in-use", STORE,
             "a full set's victim chosen among slots the current search uses: a record in use is overwritten",
             "slot_rec->used != r->search &&", ""),
    Mutation("cache-hit-not-pinned", STORE,
             "a cache hit is not marked used by the search: a later miss of the search may overwrite it",
             "slot_rec->used = r->search;", "(void)slot_rec;"),
    Mutation("kept-freed-in-use", STORE,
             "making room frees the rank maps and prefixes of patterns the current search uses",
             "->owner->used != r->search", "->owner"),
    Mutation("flat-map-32-bit-shift", STORE,
             "a flat rank map built with a 32-bit shift: words 32-63 of a Block set the wrong bits",
             "map[ids[i] >> 6].bits |= 1ull << (ids[i] & 63);", "map[ids[i] >> 6].bits |= 1u << (ids[i] & 63);"),
    Mutation("shared-map-taken-uncounted", STORE,
             "a reader takes another thread's rank map without counting itself: freed while it is read",
             "        found->refs++;", "        (void)found;"),
    Mutation("reader-seed-skipped", STORE,
             "a new thread's searcher starts empty: it reads again every record another thread has read",
             "        if (!have->hash)", "        if (have)"),
    Mutation("sorted-prefix-alpha-by-id", STORE,
             "a kept sorted prefix copies the alphas in id order, not through by_score",
             "k->sorted_alpha[i] = alpha[at];", "k->sorted_alpha[i] = alpha[i];"),
    # terms.c: the back-off chains of a position
    Mutation("terms-one-too-few", TERMS,
             "a position's terms stop one word early: the last word x is in the context of is not scored",
             "int last = target + order < n ? target + order : n;",
             "int last = target + order - 1 < n ? target + order - 1 : n;"),
    Mutation("predicting-term-skips-longest-step", TERMS,
             "the term predicting x starts from the second longest history",
             "for (int k = 0; k < n; k++)", "for (int k = 1; k < n; k++)"),
    Mutation("context-term-skips-longest-step", TERMS,
             "a term with x in the context starts from the second longest n-gram",
             "for (int k = 0; k <= n_left; k++)", "for (int k = 1; k <= n_left; k++)"),
    Mutation("context-term-unigram-backoff-zero", TERMS,
             "the last step of a context term backs off by 0, not by the unigram back-off of x",
             "step->beta_kind = BETA_UNIGRAM;", "step->beta_kind = BETA_CONST;"),
    Mutation("logprob-backoff-not-added", TERMS,
             "the probability of a word once x has left its context leaves out the back-off weights",
             "total += beta;", "total += 0.0;"),
    Mutation("unknown-word-without-backoff", TERMS,
             "an unknown word's probability leaves out the back-off weights of its context",
             "*result = total + UNKNOWN_WORD_LOGPROB;", "*result = UNKNOWN_WORD_LOGPROB;"),
    # search.c: locating words, the bound, batches, ties, the cap, -p and --exclude
    Mutation("rank-map-off-by-one", SEARCH,
             "locate() through a rank map counts the word's own bit: every big-pattern position is one too far",
             "popcount64(block.bits & (bit - 1))", "popcount64(block.bits & ((bit << 1) - 1))"),
    Mutation("two-level-map-off-by-one", SEARCH,
             "locate() through a two-level map counts the word's own Block: sparse big patterns read the next Block",
             "super.first + popcount64(super.present & ((1ull << j) - 1))",
             "super.first + popcount64(super.present & ((2ull << j) - 1))"),
    Mutation("member-bits-overwrite", SEARCH,
             "marking a small pattern's words overwrites their flags: <s> and the other patterns' bits are lost",
             "k->flags[p->ids[j]] |= p->member;", "k->flags[p->ids[j]] = p->member;"),
    Mutation("absent-beta-reads-position-0", SEARCH,
             "a word absent from a step's back-off pattern takes the weight stored at position 0, not 0",
             "beta = pos < 0 ? 0.0 : stored;", "beta = stored;"),
    Mutation("bound-without-positive-backoff", SEARCH,
             "beta(A x B) bounded by 0, the paper's bound, wrong for positive back-off weights (ALGORITHM.md)",
             "sc->beta_sup = k->pats[sc->beta].beta_sup;", "sc->beta_sup = 0.0;"),
    Mutation("unigram-backoff-bound-zero", SEARCH,
             "the unigram back-off of x bounded by 0 instead of the largest stored one",
             "sc->beta_sup = s->unigram_beta_sup;", "sc->beta_sup = 0.0;"),
    Mutation("bound-keep-without-offset", SEARCH,
             "a term keeps its largest alternative while its list's sup beats the runner-up without the offset",
             "keep = second - offset;", "keep = second;"),
    Mutation("batch-bound-taken-late", SEARCH,
             "a batch's term bounds taken after each recomputation, not from before its first word was read",
             "if (n == 0)  /* bounds", "if (n >= 0)  /* bounds"),
    Mutation("drop-threshold-ignores-count", SEARCH,
             "a batch drops words below the best score so far, not below the count-th best",
             "double threshold = n_top == top_size ? k->top[0] : -INFINITY;",
             "double threshold = n_top ? k->top[0] : -INFINITY;"),
    Mutation("drop-cut-skips-next-term", SEARCH,
             "a word is dropped after term t without the bound of term t + 1 on what is still to come",
             "for (int u = t + 1; u < n_terms; u++)", "for (int u = t + 2; u < n_terms; u++)"),
    Mutation("tie-order-reversed", SEARCH,
             "equal scores listed highest word id first",
             "(a->score == b->score && a->word < b->word)", "(a->score == b->score && a->word > b->word)"),
    Mutation("cap-counts-every-word", SEARCH,
             "the cap lists V words when the model has no <s>, not V - 1 as the original",
             "count = candidates - 1;", "count = candidates;"),
    Mutation("p-rule-counts-excluded-words", SEARCH,
             "with --exclude, the -p rule's V still counts the excluded words",
             "(double)(candidates - n_listed)", "(double)(vocab_size - n_listed)"),
    Mutation("excluded-words-stay-flagged", SEARCH,
             "the flags of excluded words are not cleared: later searches never list them",
             "k->flags[excluded[i]] = 0;", "k->flags[excluded[i]] |= 0;"),
    Mutation("bos-flag-cleared", SEARCH,
             "clearing the flags after a search clears <s>'s too: a later search may list <s>",
             "k->flags[k->reader.store->bos] = SEEN;", "k->flags[k->reader.store->bos] = 0;"),
]
# Left out, as no output can tell them from the kernel (equivalent mutants):
# - the cap ignoring excluded words (count > vocab_size - 1): the search then reads every
#   word not excluded and lists them all, which is what the cap allows;
# - a cache hit that ignores the key length or compares fewer key bytes: a hit also needs
#   the 64-bit hash of the whole key to match, so it takes a hash collision to differ;
# - FLAT_MAP_RATIO the wrong way round (dense patterns given two-level maps, sparse ones
#   flat maps): both maps give the same positions; only memory and time change;
# - the C truncation check one page short ((last_pgno) x psize): the Python side checks the
#   file's size against the same pages before any search (query/opening.py), so only the
#   kernel's C test (tests/test_kernel_sanitizers.py, slow suite) can tell.


def mutate(source: str, mutation: Mutation) -> str:
    """The file with the mutation applied; ValueError unless ``old`` is on exactly one line."""
    lines = source.split("\n")
    hits = [i for i, line in enumerate(lines) if mutation.old in line]
    if len(hits) != 1:
        raise ValueError(f"{mutation.name}: {mutation.old!r} is on {len(hits)} lines of {mutation.file}, not one")
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
    """Compile the copy's kernel with its ``setup.py`` (every source it names, the
    vendored LMDB included, so a change to any of them or to a header is built) and lay
    the package out in ``site`` as an installation would (``fastsubs``, with ``indexer``
    and ``query`` inside); check that Python then imports that build, not the
    repository's."""
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
    # In a session of its own: on a timeout the whole group goes (pytest-xdist's workers
    # and the programs the tests started, e.g. a search that loops forever), not pytest alone.
    suite = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider",
                              "--hypothesis-profile", "no-shrink", *pytest_args], cwd=copy, env=environment(site),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        stdout, _ = suite.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(suite.pid, signal.SIGKILL)
        suite.communicate()
        return "timed out", [], time.monotonic() - start
    seconds = time.monotonic() - start
    failed = sorted({m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", stdout, re.MULTILINE)})
    summary = (stdout.strip().splitlines() or ["(no output)"])[-1]
    if suite.returncode < 0:
        summary = f"crashed (signal {-suite.returncode}); {summary}"
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
        originals = {name: (copy / name).read_text() for name in sorted({m.file for m in chosen})}
        runs: list[tuple[str, Mutation | None]] = [("baseline", None)] if args.baseline else []
        runs += [(m.name, m) for m in chosen]
        for name, mutation in runs:
            if mutation is not None:
                try:
                    (copy / mutation.file).write_text(mutate(originals[mutation.file], mutation))
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
                if mutation is not None:
                    (copy / mutation.file).write_text(originals[mutation.file])
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
