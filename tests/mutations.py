"""Does the test suite catch bugs in the kernel and the code around it?  Plant one at a time and see.

Each mutation below changes one line of one file of the C kernel (``kernel/``: the index
format's header and records in store.c, the reader's cache in cache.c, the open index's
engine in engine.c, the terms and the search, the output formats in render.c and sample.c, the -t
records in chunk.c, the checks of the vendored LMDB) or of the Python around it (the
resume record and its sinks in query/output_files.py, the output's lock, the thread that
reads the input, long lines and -t records, temporary directories, the Parquet writer,
build --force in indexer/, ``--dask``'s tasks publishing only for a running client in
query/cluster.py, the library's layering, API surface and bytes lines) the way a plausible bug would (a rank
off by one, the paper's wrong bound, a cache slot reused while a search holds it, a
front-coded key decoded from its start, a checksum computed but not compared, ...).  For each, this script

1. copies the repository (the working tree's tracked and untracked, not ignored, files,
   or a commit with ``--ref``) into a temporary directory, beside a link to the shared
   data folder, so the repository itself is never touched;
2. applies the mutation to its file there (a mutation of the vendored LMDB's checks to the
   patch that holds them too, written anew as docs/development.md's "Updating the vendored
   LMDB" says: the vendored files stay their base plus their patches, so that
   tests/test_vendored_lmdb.py passes and the other tests say whether they see the bug)
   and installs the copy into a folder put first
   on ``PYTHONPATH`` (``pip install --target``: its ``setup.py`` compiles every source it
   names, ``kernel/*.c`` with the vendored ``kernel/lmdb`` and ``kernel/ryu`` into
   ``fastsubs._kernel`` and the indexer's ``fastsubs.indexer._native``, and lays the
   package out as a wheel has it, ``indexer/``, ``query/`` and ``bench/`` inside
   ``fastsubs``), checking that Python then imports *that* build;
3. runs the default test suite of the copy against it (the mutation still in the copy's
   file, for the tests that compile the kernel's sources themselves: tests/c_programs.py),
   and reports which tests failed.

A mutation the suite does not catch is a hole in the safety net; a mutation whose line
is no longer in its file is reported as such (update the table after a rewrite).  With
``--baseline``, the unmutated copy runs first, and a mutation counts as caught only by
tests that passed there (a test failing anyway, e.g. on work in progress in the working
tree, catches nothing).

    .venv/bin/python tests/mutations.py --baseline -- -n 2   # every mutation, default suite, 2 processes
    .venv/bin/python tests/mutations.py --only tie-order-reversed -- tests/test_exactness.py
    .venv/bin/python tests/mutations.py --list                # the table: name, file, why

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
#: The kernel's files the mutations change (compiled by setup.py into ``fastsubs._kernel``).
FORMAT, STORE, CACHE, ENGINE = "kernel/format.h", "kernel/store.c", "kernel/cache.c", "kernel/engine.c"
CACHE_H = "kernel/cache.h"
RECORDS, VERIFY, CODEC = "kernel/records.c", "kernel/verify.c", "kernel/codec.c"
TERMS, SEARCH = "kernel/terms.c", "kernel/search.c"
LISTS, JOINT, SCORE, SEARCHER = "kernel/lists.c", "kernel/joint.c", "kernel/score.c", "kernel/searcher.h"
RENDER, SAMPLE, COMMON_H = "kernel/render.c", "kernel/sample.c", "kernel/common.h"
STORE_H, CODEC_H = "kernel/store.h", "kernel/codec.h"
CHUNK, LMDB = "kernel/chunk.c", "kernel/lmdb/mdb.c"
#: The vendored LMDB's own patch (kernel/lmdb/UPSTREAM), which holds every line of its checks.
LMDB_PATCH = "kernel/lmdb/patches/fastsubs.patch"
#: The Python side: the output files of a run (the resume record and its two sinks), the
#: Parquet writer, and the indexer's publishing of an index.
OUTPUT_FILES, PARQUET, PUBLISH, BUILD = "query/output_files.py", "fastsubs/pipeline/parquet.py", "indexer/publish.py", \
    "indexer/build.py"
LONG_LINES = "fastsubs/pipeline/long_lines.py"
#: --dask's runner: its tasks, and how they publish their files.
CLUSTER = "query/cluster.py"
#: ... and the run around them: its output's lock, the run itself, its worker processes.
OUTPUT_LOCK, RUN, WORKERS = "query/output_lock.py", "query/run.py", "fastsubs/pipeline/workers.py"


@dataclass(frozen=True)
class Mutation:
    """Replace the one line of ``file`` containing ``old`` by the same line with ``new``;
    ``patch`` (a file of the vendored LMDB's) is then written anew with the mutated line in
    it (:func:`write_patch`), as a change of the vendored LMDB is made."""

    name: str
    file: str
    why: str
    old: str
    new: str
    patch: str | None = None


MUTATIONS = [
    # store.c: the header, the records (format 4) and the patterns in them
    Mutation("truncation-check-one-page-short", STORE,
             "a data.mdb one page short of its last page passes as whole: a search then reads past its end",
             "unsigned long long needed = ((unsigned long long)info.me_last_pgno + 1) * stat_.ms_psize;",
             "unsigned long long needed = ((unsigned long long)info.me_last_pgno) * stat_.ms_psize;"),
    Mutation("read-ahead-off-for-every-index", STORE,
             "every index is read page by page, the small ones too: a cold first pass over kn4-64k takes 1.6x",
             "(reads_page_by_page(before.st_size) ? MDB_NORDAHEAD : 0), 0444);",
             "(reads_page_by_page(before.st_size) || 1 ? MDB_NORDAHEAD : 0), 0444);"),
    Mutation("header-checksum-not-checked", STORE,
             "the header's checksum is never compared: a flipped byte in a field is read as the index's shape",
             "common_checksum(NULL, 0, h, len - 4) != fields->checksum)", "0)"),
    Mutation("header-id-bytes-not-checked", STORE,
             "the header's id width is not checked against its vocabulary size: a forged width opens",
             " || fields->id_bytes != fs_id_bytes(vocab_size))", ")"),
    Mutation("header-bos-not-checked", STORE,
             "the header's id of <s> is not checked against the vocabulary's",
             "if (store_word_id(s, \"<s>\", 3) != s->bos || ", "if ("),
    Mutation("id-mask-sixteen-bits", STORE,
             "ids read through a 16-bit mask whatever the vocabulary: ids past 65,535 of a big vocabulary are cut",
             "s->id_mask = (uint32_t)((1ull << s->id_bits) - 1u);", "s->id_mask = 0xFFFFu;"),
    Mutation("id-bits-a-whole-number-of-bytes", FORMAT,
             "a pattern's ids packed in whole bytes past 65,536 words, not their fewest bits: 24 bits, not 19, "
             "for a vocabulary of 338,528 words (indexes of other builds read wrong)",
             "return bits <= 16u ? 16u : bits <= 25u ? bits : 32u;",
             "return bits <= 16u ? 16u : bits <= 24u ? 24u : 32u;"),
    Mutation("key-ids-little-endian", CODEC,
             "a pattern key's ids written little-endian: LMDB's key order is not the ids' order",
             "for (int b = (int)id_bytes - 1; b >= 0; b--)", "for (int b = 0; b < (int)id_bytes; b++)"),
    Mutation("checksum-not-checked", CODEC,
             "a record's checksum is computed but never compared: a flipped byte is read as an answer",
             "!= load_u32(value + FS_R_CHECKSUM))) {", "!= load_u32(value + FS_R_CHECKSUM) && 0)) {"),
    Mutation("record-has-beta-for-every-order", STORE_H,
             "records of the highest order decoded as if they stored back-off weights",
             "return order < s->order ? PATTERN_HAS_BETA : 0;",
             "return order <= s->order ? PATTERN_HAS_BETA : 0;"),
    Mutation("delta-carry-dropped", CODEC,
             "an entry's key delta added to the key before it without its carries: a key past a byte's end "
             "(00ff + 02) reads as another",
             "        carry = sum >> 8;", "        carry = 0;"),
    Mutation("entry-delta-planned-one-byte-short", CODEC,
             "the writer plans an entry's key delta a byte shorter than the difference: it writes the low bytes "
             "of the difference alone, and the key read is another",
             ".restarts = p->periodic, .delta = p->delta,", ".restarts = p->periodic, .delta = p->delta - 1,"),
    Mutation("open-block-closed-at-each-batch", CODEC,
             "the writer closes a slot's last block at the end of each batch of rows, as before the open block "
             "was carried: the records depend on where the sort's batches fall (--memory, --jobs)",
             "if (rows->more && r && b->records[r - 1].kind == FS_BLOCK) {",
             "if (0 && rows->more && r && b->records[r - 1].kind == FS_BLOCK) {"),
    Mutation("main-database-read-from-a-records-page-is-no-index", STORE,
             "a meta page's main database root flipped to a page of pattern records, which holds as many "
             "entries as the main database counts, is read as an environment without an index's databases: "
             "'not a fastsubs index' rather than damage",
             "                an_index_entry(&k, &v);", "                0;"),
    Mutation("big-block-decided-at-a-batch-end", CODEC,
             "the writer ends a big block with the batch's last patterns, when the next batch's could have "
             "taken it further: the records depend on where the sort's batches fall (--memory, --jobs)",
             "if (open && rows->more) {", "if (0 && open && rows->more) {"),
    Mutation("big-pattern-alone-in-overflow-pages", CODEC,
             "a pattern whose record goes to LMDB's overflow pages gets a PATTERN record of its own again: "
             "no big block fills the rest of its last page (0.9 bytes per n-gram of a 40M-n-gram model)",
             "codec_record_bytes(&alone, b->key_len, id_bits) > NODE_MAX;",
             "codec_record_bytes(&alone, b->key_len, id_bits) > NODE_MAX && 0;"),
    Mutation("wide-entry-count-read-as-a-byte", CODEC,
             "a block entry's count of 256 words or more is read as its escape byte, 0: the look-up refuses "
             "every big block",
             "        if (escaped_count && e->count == FS_ENTRY_WIDE_COUNT) {",
             "        if (0) {"),
    Mutation("run-phase-restarted-at-each-batch", CODEC,
             "a batch's first pattern is taken to start its run: the open block carried into it restarts "
             "and pairs its entries at other places than one batch would",
             "for (size_t g = 0, at = rows->run_phase % RUN_PHASES; g < n_groups; g++) {",
             "for (size_t g = 0, at = 0; g < n_groups; g++) {"),
    Mutation("restart-search-strict", RECORDS,
             "the restart search skips a restart whose key is the one looked up: that pattern reads as absent",
             "if (records_key_compare(restart_key, key, key_len) <= 0)",
             "if (records_key_compare(restart_key, key, key_len) < 0)"),
    Mutation("previous-key-not-checked", RECORDS,
             "a look-up does not check the previous record's key: landing past a lost record reads as absence",
             "if ((r.has_previous && records_key_compare(r.previous, key, key_len) >= 0) ||",
             "if ((r.has_previous && 0) ||"),
    Mutation("missing-end-read-as-absence", RECORDS,
             "a look-up past the last record (the END record lost) reads as no such pattern, not as damage",
             "common_fail(failure, FS_EDAMAGED, \"damaged index: patterns%d ends before its END record\", order);",
             "return 0;"),
    Mutation("pattern-beta-sup-without-zero", RECORDS,
             "a pattern's back-off bound is its largest stored weight, without the 0 of the words it lacks",
             "float sup = 0.0f;", "float sup = p->beta && p->count ? p->beta[0] : 0.0f;"),
    Mutation("verify-scores-not-checked", VERIFY,
             "verify takes a positive log-probability for a score",
             "if (!(p->alpha[i] <= 0.0f))", "if (!(p->alpha[i] == p->alpha[i]))"),
    Mutation("verify-refuses-minus-infinity", VERIFY,
             "verify calls a log-probability of -inf (log10 of 0, which KenLM writes) damage",
             "if (!(p->alpha[i] <= 0.0f))", "if (!(isfinite(p->alpha[i]) && p->alpha[i] <= 0.0f))"),
    # records.c: records_check_pattern, each of its checks removed (records forged in tests/test_forged_records.py)
    Mutation("pattern-id-past-vocabulary-not-checked", RECORDS,
             "a pattern's word id past the vocabulary is taken: the search indexes its per-word arrays with it",
             "if (id >= s->vocab_size)", "if (0)"),
    Mutation("pattern-ids-increasing-not-checked", RECORDS,
             "a pattern's ids are not checked to increase: its words are looked up by bisection all the same",
             "if ((int64_t)id <= previous)", "if (0)"),
    Mutation("pattern-position-range-not-checked", RECORDS,
             "a position by score past the pattern's words is taken: scores are read past its alphas",
             "if (at >= p->count) {  /* (no key or bit past the end is read) */", "if (0) {"),
    Mutation("pattern-position-repeat-not-checked", RECORDS,
             "a repeated position by score is not named as one (the tie check stops it, naming a tie out of order)",
             "found |= (seen[at / 64] >> (at % 64) & 1) * REPEATED;", "found |= 0;"),
    Mutation("joint-order-checked-without-seen-positions", RECORDS,
             "a joint order passed by the pass that keeps no record of the positions seen: its keys are its "
             "entries', not its positions', so a repeated position is named as a wrong key, not a repeat",
             "if (!in_order && first_unordered(p, order, keys, 0, NULL, &problem) == p->count)",
             "if (first_unordered(p, order, keys, 0, NULL, &problem) == p->count)"),
    Mutation("pattern-score-order-not-checked", RECORDS,
             "positions by score (or a joint order) that do not order the scores (keys) are taken: the search's bound "
             "is wrong",
             "if (i && !(before_key >= key))", "if (0)"),
    Mutation("pattern-tie-order-not-checked", RECORDS,
             "tied scores (keys) listed higher id first are taken: ties are listed out of the promised order",
             "if (i && before_key == key && before >= at)", "if (0)"),
    # records.c and cache.c: a pattern of one word outside the last slot reads its values in
    # the pattern of its n-gram's first words (format 6; forged in tests/test_forged_records.py)
    Mutation("values-missing-where-they-lie-read-anyway", RECORDS,
             "a pattern of one word whose n-gram the pattern holding its values lacks reads the entry before "
             "where it would be: a forged word gives an answer",
             "    if (at < 0) {", "    if (0) {"),
    Mutation("beta-code-where-values-lie-not-checked", RECORDS,
             "the beta code a pattern of one word reads in the pattern holding its values is not checked against "
             "its order's table: a forged code reads past it",
             "if (code >= s->beta_table_len[order]) {", "if (0) {"),
    Mutation("one-word-slot-beta-code-without-its-place", CACHE,
             "the cache keeps a pattern of one word's beta code as the code of its own data, not of its "
             "n-gram's place in the table: every such back-off weight is the table's first",
             "rec->one.beta_code = p.beta_table ? (uint32_t)(p.beta_table - s->beta_table[order]) +",
             "rec->one.beta_code = p.beta_table ? 0u +"),
    Mutation("record-remembered-before-its-checksum", RECORDS,
             "a reader remembers a record as summed before it sums it: a record that failed its checksum is read "
             "without one at the next look-up",
             "    int summed = checked && checked->values[place] == v.mv_data;",
             "    int summed = checked && (checked->values[place] == v.mv_data ||\n"
             "                             (checked->values[place] = v.mv_data, 0));"),
    Mutation("id-tail-not-checked-by-the-look-up", RECORDS,
             "a look-up takes a pattern whose id ends its record without the 3 bytes a reader may load past it "
             "(a forged record): the load reads past the record",
             "            if ((e.flags & PATTERN_VALUES_ELSEWHERE) && r.end - at.at < FS_ID_TAIL)",
             "            if (0)"),
    Mutation("verify-reads-any-slot", VERIFY,
             "verify takes a pattern key's slot byte as it is: a forged slot of 254 reads 254 words of a key of one "
             "and adds to a sum past its order's",
             "    if (key[0] >= (unsigned)order) {  /* (a forged key's slot: no slot of the order) */",
             "    if (0) {"),
    Mutation("verify-slot-sums-not-compared", VERIFY,
             "verify sums each slot's n-grams but never compares the sums: a pattern of one word whose n-gram is "
             "not where its values lie passes",
             "if (memcmp(&sums[slot], &sums[order - 1], sizeof(NgramSum))) {", "if (0) {"),
    Mutation("seeded-reader-without-one-word-values", CACHE,
             "a reader seeded for another thread copies a one-word slot without the values it keeps: that "
             "thread reads alpha 0",
             "copy->one = have->one;", "(void)have;"),
    # format.h: the format's rules, which the writer and the readers share (codec.c)
    Mutation("record-padding-without-id-tail", FORMAT,
             "a record that ends with an id is padded to a whole word alone: a reader's 4-byte load of that id "
             "reads past the record (past the map, at the end of the file)",
             "uint64_t tail = id_last ? FS_ID_TAIL : 0u;", "uint64_t tail = 0u;"),
    Mutation("position-bits-one-too-many", FORMAT,
             "a pattern's positions packed one bit wider than count - 1 needs where count is a power of two: "
             "indexes of other builds read wrong",
             "return count <= 1u ? 0u : 64u - (unsigned)__builtin_clzll(count - 1u);",
             "return count <= 1u ? 0u : 64u - (unsigned)__builtin_clzll(count);"),
    Mutation("position-width-one-byte", CODEC,
             "a pattern's positions by score read 8 bits wide whatever its count",
             "p->position_bits = at.position_bits;", "p->position_bits = count > 1 ? 8 : 0;"),
    Mutation("packed-bit-offset-in-byte-ignored", COMMON_H,
             "a packed position read from the first bit of the byte it starts in, not from its own bit",
             "return (uint32_t)(load_u64(array + (bit >> 3)) >> (bit & 7))",
             "return (uint32_t)(load_u64(array + (bit >> 3)) >> 0)"),
    Mutation("blocks-not-sized-to-fill-pages", CODEC,
             "the writer never fills the room a leaf page has left with a block: every one that does not fit "
             "beside the records before it starts a page, and pages are left part empty",
             "end = room >= BLOCK_MIN ? fitting_end(groups, total, n, i, room - block_head, key_len, "
             "rows->has_beta) : i;",
             "end = room >= NODE_MAX - NODE_HEADER - (int64_t)key_len - 3 ? "
             "fitting_end(groups, total, n, i, room - block_head, key_len, rows->has_beta) : i;"),
    # cache.c: the cache slots, rank maps and sorted prefixes
    Mutation("cached-beta-sup-zero", CACHE,
             "a cached pattern's back-off bound is 0 (the paper's), not the one its record gives",
             "rec->beta_sup = p.beta_sup;", "rec->beta_sup = 0.0f;"),
    Mutation("seed-drops-beta-sup", CACHE,
             "a new thread's searcher copies the records without their back-off bounds",
             "copy->beta_sup = have->beta_sup;", "copy->beta_sup = 0.0f;"),
    Mutation("cache-victim-in-use", CACHE,
             "a full set's victim chosen among slots the current search uses: a record in use is overwritten",
             "slot_rec->used != r->search &&", ""),
    Mutation("cache-hit-not-pinned", CACHE,
             "a cache hit is not marked used by the search: a later miss of the search may overwrite it",
             "slot_rec->used = r->search;", "(void)slot_rec;"),
    Mutation("kept-freed-in-use", CACHE,
             "making room frees the rank maps and prefixes of patterns the current search uses",
             "->owner->used != r->search", "->owner"),
    Mutation("flat-map-32-bit-shift", CACHE,
             "a flat rank map built with a 32-bit shift: words 32-63 of a RankBlock set the wrong bits",
             "map[id >> 6].bits |= 1ull << (id & 63);", "map[id >> 6].bits |= 1u << (id & 63);"),
    Mutation("two-level-map-first-block-moved", CACHE,
             "a two-level map's RankSuper points at its last RankBlock, not its first",
             "if (!super->present)", "if (1)"),
    Mutation("shared-map-taken-uncounted", CACHE,
             "a reader takes another thread's rank map without counting itself: freed while it is read",
             "        found->refs++;", "        (void)found;"),
    Mutation("reader-seed-skipped", CACHE,
             "a new thread's searcher starts empty: it reads again every record another thread has read",
             "        if (!have->hash)", "        if (have)"),
    Mutation("sorted-prefix-alpha-by-id", CACHE,
             "a kept sorted prefix copies the alphas in id order, not through by_score",
             "k->sorted_alpha[i] = p.alpha[at];", "k->sorted_alpha[i] = p.alpha[i];"),
    # engine.c: the open index, its searchers, the tools' look-ups
    Mutation("close-frees-in-use", ENGINE,
             "closing the index frees its searchers and map while a search still uses them",
             "if (!ix->closed || ix->released || ix->uses)", "if (!ix->closed || ix->released)"),
    Mutation("thread-work-not-since-taken", ENGINE,
             "a thread's counters add a searcher's whole work each time it is given back, not its work since taken",
             "thread_work[i] += now[i] - searcher->taken[i];", "thread_work[i] += now[i];"),
    Mutation("lookup-misses-highest-order", ENGINE,
             "the tools' pattern look-up never reaches the patterns of the highest order",
             "n >= 1 && n + 1 <= s->order ?", "n >= 1 && n + 1 < s->order ?"),
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
             "betas[n_betas++] = found ? beta : 0.0;", "betas[n_betas++] = 0.0;"),
    Mutation("logprob-skips-unigram", TERMS,
             "the probability of a word once x has left its context never backs off to its unigram",
             "for (int start = 0; start <= n; start++)", "for (int start = 0; start < n; start++)"),
    Mutation("unknown-word-without-backoff", TERMS,
             "an unknown word's probability leaves out the back-off weights of its context",
             "while (n_betas)", "while (n_betas && value != UNKNOWN_WORD_LOGPROB)"),
    Mutation("logprob-summed-longest-first", TERMS,
             "a fixed chain's back-off weights summed longest context first, then the alpha: not the "
             "definition's nesting, so weights of very different sizes round to another score (model A)",
             "value = betas[--n_betas] + value;",
             "{ double sum = 0.0; for (int i = 0; i < n_betas; i++) sum += betas[i]; value = sum + value; "
             "n_betas = 0; }"),
    Mutation("ngram-map-read-flat", CACHE,
             "a fixed n-gram found through its pattern's rank map reads a two-level map as a flat one",
             "return map_rank(rec->kept->map->map, rec->kept->map->supers, word);",
             "return map_rank(rec->kept->map->map, NULL, word);"),
    Mutation("ngram-map-of-a-one-word-slot", CACHE,
             "a fixed n-gram's look-up takes a one-word slot's alpha and beta code for its rank map",
             "if (rec->count > 1 && rec->kept && rec->kept->map)",
             "if (rec->kept && rec->kept->map)"),
    # the search (searcher.h, cache.h, lists.c, score.c, search.c): locating words, the bound, batches, ties, the cap,
    # -p and --exclude
    Mutation("rank-map-off-by-one", CACHE_H,
             "a look-up through a rank map counts the word's own bit: every big-pattern position is one too far",
             "below = bits & ((1ull << (word & 63)) - 1);", "below = bits & ((2ull << (word & 63)) - 1);"),
    Mutation("rank-map-finds-absent-words", CACHE_H,
             "a look-up through a rank map gives a word its block does not hold the position it would have",
             "return ((int32_t)(block->rank + popcount64(below)) & held) | ~held;",
             "return (int32_t)(block->rank + popcount64(below));"),
    Mutation("two-level-map-off-by-one", CACHE_H,
             "a look-up through a two-level map counts the word's own RankBlock: sparse big patterns read the next "
             "RankBlock",
             "super.first + popcount64(super.present & ((1ull << j) - 1))",
             "super.first + popcount64(super.present & ((2ull << j) - 1))"),
    Mutation("two-level-map-absent-block-read", CACHE_H,
             "a word whose RankBlock a two-level map lacks reads the next block the map has, not the empty one",
             "(super.first + popcount64(super.present & ((1ull << j) - 1))) & (0 - (super.present >> j & 1));",
             "(super.first + popcount64(super.present & ((1ull << j) - 1)));"),
    Mutation("read-loop-takes-seen-words", SEARCH,
             "a word read again from another list joins the batch again: it is scored and listed twice",
             "unsigned fresh = (word < vocab_size) & !(searcher->flags[known] & SEEN);",
             "unsigned fresh = (word < vocab_size);"),
    Mutation("member-bits-overwrite", LISTS,
             "marking a small pattern's words overwrites their flags: <s> and the other patterns' bits are lost",
             "searcher->flags[pattern_id(searcher->reader.store, &p->data, (uint32_t)j)] |= p->member;",
             "searcher->flags[pattern_id(searcher->reader.store, &p->data, (uint32_t)j)] = p->member;"),
    Mutation("absent-beta-reads-position-0", SCORE,
             "a word absent from a step's back-off pattern takes the weight stored at position 0, not 0",
             "beta = select_double(absent, 0.0, (double)step->beta_table[code]);",
             "beta = (double)step->beta_table[code];"),
    Mutation("held-list-misses-position-0", SCORE,
             "a word at position 0 of a pattern is not listed among those it holds: it backs off instead of "
             "taking its alpha",
             "return n_held + (at >= 0);", "return n_held + (at > 0);"),
    Mutation("select-swapped", SCORE,
             "the masked select takes the other side: a word in a step's pattern backs off, one absent takes its alpha",
             "(bits_a & mask) | (bits_b & ~mask)", "(bits_a & ~mask) | (bits_b & mask)"),
    Mutation("bound-without-positive-backoff", LISTS,
             "beta(A x B) bounded by 0, the paper's bound, wrong for positive back-off weights (docs/algorithm.md)",
             "sc->beta_sup = searcher->pats[sc->beta].beta_sup;", "sc->beta_sup = 0.0;"),
    Mutation("unigram-backoff-bound-zero", LISTS,
             "the unigram back-off of x bounded by 0 instead of the largest stored one",
             "sc->beta_sup = s->unigram_beta_sup;", "sc->beta_sup = 0.0;"),
    Mutation("bound-summed-longest-first", SEARCHER,
             "an alternative's bound summed as its beta sups longest first, then the list's sup: the score "
             "nests them the other way, and the bound can round below a score it must stay above (model C)",
             "inner = steps[--n].beta_sup + inner;",
             "{ double offset = 0.0; for (int i = 0; i < n; i++) offset += steps[i].beta_sup; "
             "inner = offset + inner; n = 0; }"),
    Mutation("bound-runner-up-not-checked", SEARCH,
             "a term's bound keeps the alternative that was largest, also once it has fallen below another",
             "if (term->arg == NONE || best < term->runner_up) {", "if (term->arg == NONE) {"),
    Mutation("joint-slack-removed", JOINT,
             "the joint sum taken as the bound without the slack that covers the rounding of both chains",
             "-INFINITY : pair + searcher->joint_slack;", "-INFINITY : pair;"),
    Mutation("joint-pairs-drop-term-1-pattern", JOINT,
             "words in a pattern of term 0 bounded as if none of them were in '_ d' too",
             "double value = alone + (by_d ? in_d : t1->other);", "double value = alone + t1->other;"),
    Mutation("pair-list-skips-unread-words", LISTS,
             "a pair list skips the words of its order as if all were read: those of P in '_ d' lose their bound",
             "while (list->scan < o->len && searcher->flags[o->words[list->scan]] & SEEN)",
             "while (list->scan < o->len && searcher->flags[o->words[list->scan]] | SEEN)"),
    Mutation("pair-scan-skips-an-entry-between-steps", LISTS,
             "a pair order's scan of '_ d''s order resumes one entry past where its last step ended",
             "    o->scanned = end;", "    o->scanned = end + 1 < d->count ? end + 1 : end;"),
    Mutation("pair-direct-order-drops-last-word", LISTS,
             "a small P's pair order made whole without P's last word (by id)",
             "for (uint32_t i = 0; i < filter->count; i++) {", "for (uint32_t i = 0; i + 1 < filter->count; i++) {"),
    Mutation("pair-scan-map-bit-off-by-one", LISTS,
             "a big P's pair order tests the bit of the next word in P's rank map",
             "return map_block(f->map, f->supers, word)->bits >> (word & 63) & 1;",
             "return map_block(f->map, f->supers, word)->bits >> ((word + 1) & 63) & 1;"),
    Mutation("pair-scan-member-bit-of-another-pattern", LISTS,
             "a pair scan tests P's words by the bit below P's own membership bit (another pattern's, or SEEN): "
             "P's words in '_ d' go missing from its pair order (a vocabulary past 2^20 words, where a P the scan "
             "tests has such a bit)",
             "        return f->flags[word] & f->member;", "        return f->flags[word] & (f->member >> 1);"),
    Mutation("pair-order-copy-loses-words", LISTS,
             "a pair order that the budget cannot grow goes on in the searcher's own without the words it had",
             "to->len = from->len;", "to->len = 0;"),
    Mutation("pair-order-room-for-every-entry-tested", LISTS,
             "a kept pair order grows by room for a whole scan step, not by the words the step found: the "
             "orders fill the reader's budget and push out its rank maps and sorted prefixes",
             "order_room(searcher, list, o->len + found);", "order_room(searcher, list, o->len + found + PAIR_SCAN);"),
    Mutation("joint-plan-term-0-base-not-required", JOINT,
             "the joint plan takes term 0's last alternative for its unigram base unchecked: terms made otherwise "
             "(a change to terms.c or lists.c) would get a bound that leaves words out, without a sign",
             "require(t0->base_unigram && last && last->list == searcher->unigram_list && last->n_longer == t0->n,",
             "require(1,"),
    Mutation("joint-plan-term-1-base-not-required", JOINT,
             "the joint plan takes term 1's base for a constant unchecked: a unigram base would be read as a step",
             "require(!t1->base_unigram,", "require(1,"),
    Mutation("joint-key-read-one-entry-late", LISTS,
             "the joint list's sup is the key after its next entry: one step too low for that entry",
             "list->own_alphas[i] = pattern_joint_key(s, list->pattern, at);",
             "list->own_alphas[i] = pattern_joint_key(s, list->pattern, joint_at(list->pattern, "
             "(uint32_t)(list->depth + i + (list->depth + i + 1 < list->length))));"),
    Mutation("joint-key-not-rounded-up", FORMAT,
             "joint keys rounded to nearest, not up (ordered, checked and read so): a key below its word's sum "
             "lets the joint bound pass over the word",
             "uint32_t bits, up = (double)key < exact;", "uint32_t bits, up = 0;"),
    Mutation("joint-order-taken-on-trust", RECORDS,
             "a joint order read without checking that it sorts its words' keys: a word listed late is a wrong "
             "answer, and verify says OK",
             "if (!what[0] && p->joint && p->count > 1) {", "if (0) {"),
    Mutation("joint-order-checked-against-the-alphas-alone", RECORDS,
             "the check of a joint order computes keys without the unigram alphas: it passes orders that are not "
             "by joint key (and refuses the sound ones)",
             "keys[at] = pattern_joint_key(s, p, at);", "keys[at] = p->alpha[at];"),
    Mutation("joint-word-past-unigrams-not-checked", CODEC,
             "the writer reads a joint key's unigram alpha for any word id: past the unigrams it reads out of bounds",
             "if (p->ids[i] >= rows->n_unigrams) {", "if (0) {"),
    Mutation("joint-flag-on-any-record", CODEC,
             "a joint flag accepted on a BLOCK record: the reader looks for a joint order where entries lie",
             "int joint_ok = !r->has_joint ||", "int joint_ok = 1 ||"),
    Mutation("joint-threshold-not-verified", VERIFY,
             "verify does not hold the builder to the header's joint threshold",
             "if (wants_joint(s, order, key, p.count) != (p.joint != NULL))", "if (0)"),
    Mutation("pattern-value-bound-not-checked", RECORDS,
             "a pattern's values beyond the header's value bound pass: the joint slack is then too small",
             "if (beyond_bound(p->alpha[i], bound))", "if (0)"),
    Mutation("pattern-value-bound-rounded-up", RECORDS,
             "the header's value bound taken as the nearest float, not the largest within it: a value a hair "
             "beyond a bound between two floats passes",
             "bound = nextafterf(bound, 0.0f);", "(void)0;"),
    Mutation("unigram-value-bound-not-checked", STORE,
             "a unigram's value beyond the header's value bound passes at open",
             "if (!within_value_bound(s, beta) || !within_value_bound(s, s->unigram_alpha[i]))", "if (0)"),
    # format 5's back-off weights: codes into each order's table (tests/test_forged_records.py,
    # tests/test_damaged_index.py forge each)
    Mutation("beta-width-not-checked", CODEC,
             "a beta width the format has not (3, 12, 64 bits) is read: codes straddle bytes or are cut",
             "if (!fs_beta_width_ok(beta_width) || (!(flags & PATTERN_HAS_BETA) && beta_width) ||",
             "if ((!(flags & PATTERN_HAS_BETA) && beta_width) ||"),
    Mutation("beta-code-past-table-not-checked", RECORDS,
             "a beta code past its order's back-off table is taken: the search reads past the table",
             "if (code >= table_len)", "if (0)"),
    Mutation("beta-table-values-not-checked", STORE,
             "a back-off table's value that is no number, or past the value bound, passes at open",
             "if (!isfinite(beta) || !within_value_bound(s, beta))", "if (0)"),
    Mutation("beta-table-lengths-not-checked", STORE,
             "the header's cut of beta_values into the orders' tables is taken as it is",
             "if ((m == s->order) != (fields->beta_tables[m] == 0) && (m == s->order || s->counts[m]))", "if (0)"),
    # format 5's block entries: code nibbles in pairs, an escaped head where no code gives the fields
    Mutation("entry-count-escaped-one-late", CODEC,
             "a block entry of 16 words written with its count nibble escaped but no count byte after its key",
             "if (p->count > 15u)", "if (p->count > 16u)"),
    Mutation("entry-escaped-delta-not-read", CODEC,
             "a block entry's escaped delta length (a delta of 15 bytes or more) is not read from its byte",
             "e->delta = p < end ? *p++ : 0u;", "e->delta = FS_ENTRY_ESCAPED_DELTA;"),
    Mutation("entry-pair-code-from-the-low-nibble", CODEC,
             "the second entry of a pair takes the first's code (the code byte's low nibble), not its own",
             "c->code = *p++ >> 4;", "c->code = *p++ & 15u;"),
    Mutation("entry-code-width-ignored", FORMAT,
             "the writer gives an entry the first code of its delta and count whatever its beta width: the reader "
             "reads its beta codes at the code's width",
             "if ((e.delta ? e.delta : key_len) == delta && e.count == count && e.width == width)",
             "if ((e.delta ? e.delta : key_len) == delta && e.count == count)"),
    Mutation("restart-key-code-not-checked", CODEC,
             "a restart whose code gives a delta, not a whole key, is read as a key by the look-up's binary search "
             "and as a group's start by verify's walk",
             "        if ((given.delta ? given.delta : len) != len)", "        if (0)"),
    Mutation("rows-out-of-key-order-written", CODEC,
             "a batch not sorted by pattern key is written: a key below the one before wraps around as a delta",
             "if (memcmp(b->keys + g * b->key_len, b->keys + (g - 1) * b->key_len, b->key_len) <= 0) {", "if (0) {"),
    Mutation("beta-code-bit-offset-in-nibble", CODEC_H,
             "a beta code of 1, 2 or 4 bits read from the wrong bits of its byte past its first nibble",
             "return (uint32_t)(codes[bit >> 3] >> (bit & 7)) & ((1u << width) - 1u);",
             "return (uint32_t)(codes[bit >> 3] >> (bit & 3)) & ((1u << width) - 1u);"),
    Mutation("beta-code-width-bits-swapped", FORMAT,
             "the narrowest beta width misjudged: a code of 2 bits written in 1",
             "if (!((uint64_t)largest >> FS_BETA_WIDTH_LIST[i]))",
             "if (!((uint64_t)largest >> (FS_BETA_WIDTH_LIST[i] + 1)))"),
    Mutation("beta-code-of-24-bits-read-in-16", CODEC_H,
             "a beta code of 3 bytes read without its third: a code past 65,535 is read as another",
             "return load_u24(codes + 3 * (size_t)i);", "return load_u16(codes + 3 * (size_t)i);"),
    Mutation("beta-width-24-read-as-32", SCORE,
             "the search reads codes of 24 bits 4 bytes apart: every code past a pattern's first is another's",
             ": from == FROM_CODES_24 ? 24", ": from == FROM_CODES_24 ? 32"),
    Mutation("one-heap-final-on-a-tie", SEARCH,
             "-n's heap listed once its worst word ties the bound: an unread word with a lower id could tie it",
             "(n_pending == count && searcher->pending[0].score > limit))) {",
             "(n_pending == count && searcher->pending[0].score >= limit))) {"),
    Mutation("one-heap-sifts-down-the-better-child", SEARCH,
             "-n's heap moves up the better child, not the worse: its root is no longer the worst word",
             "child += child + 1 < n && before(&heap[child], &heap[child + 1]);",
             "child += child + 1 < n && before(&heap[child + 1], &heap[child]);"),
    Mutation("heap-hole-takes-the-child-below", SEARCH,
             "a heap's hole moves up the child that belongs below the other (both heaps' pops)",
             "child += child + 1 < size && above(&heap[child + 1], &heap[child], worst_first);",
             "child += child + 1 < size && above(&heap[child], &heap[child + 1], worst_first);"),
    Mutation("popped-heap-hole-goes-the-other-way", SEARCH,
             "a pop moves its hole down the children each heap ranks below the other, as the other heap would",
             "int64_t hole = hole_to_bottom(heap, size, worst_first);",
             "int64_t hole = hole_to_bottom(heap, size, !worst_first);"),
    Mutation("pending-heap-pops-as-the-best-heap", SEARCH,
             "-p's pending heap pops as -n's heap would: its hole down the worse children, its leaf above the "
             "parents it ranks after",
             "return pop_root(heap, n, 0);", "return pop_root(heap, n, 1);"),
    Mutation("sorted-answer-pops-as-the-pending-heap", SEARCH,
             "-n's answer sorted out of its heap popping it as the pending heap would",
             "out[i] = pop_root(heap, n, 1);", "out[i] = pop_root(heap, n, 0);"),
    Mutation("popped-leaf-left-at-the-bottom", SEARCH,
             "a pop's last leaf stays where the root's hole ends, not climbing to its place (both heaps)",
             "climb(heap, hole, heap[size], worst_first);", "heap[hole] = heap[size];"),
    Mutation("heap-climb-stops-below-the-root", SEARCH,
             "a word climbing to its place in a heap is never compared with the root (both heaps)",
             "for (; i > 0 && above(&e, &heap[(i - 1) / 2], worst_first); i = (i - 1) / 2)",
             "for (; i > 1 && above(&e, &heap[(i - 1) / 2], worst_first); i = (i - 1) / 2)"),
    Mutation("pending-heap-push-climbs-as-in-the-best-heap", SEARCH,
             "-p's pending heap: a pushed word climbs above the parents it ranks after",
             "climb(heap, (*n)++, e, 0);", "climb(heap, (*n)++, e, 1);"),
    Mutation("best-heap-fills-as-the-pending-heap", SEARCH,
             "-n's heap, while it fills: a word climbs above the parents it ranks before",
             "climb(heap, (*n)++, e, 1);", "climb(heap, (*n)++, e, 0);"),
    Mutation("batch-bound-taken-late", SEARCH,
             "a batch's term bounds taken after each recomputation, not from before its first word was read",
             "if (n == 0)  /* bounds", "if (n >= 0)  /* bounds"),
    Mutation("drop-threshold-ignores-count", SEARCH,
             "a batch drops words below the worst of the best words so far, fewer than count of them (-n's heap)",
             "double threshold = one_heap ? (n_pending == count ? searcher->pending[0].score : -INFINITY)",
             "double threshold = one_heap ? (n_pending ? searcher->pending[0].score : -INFINITY)"),
    Mutation("drop-threshold-ignores-count-with-p", SEARCH,
             "with -p, a batch drops words below the best score so far, not below the count-th best",
             ": (n_top == top_size ? searcher->top[0] : -INFINITY);", ": (n_top ? searcher->top[0] : -INFINITY);"),
    Mutation("drop-cut-skips-next-term", SCORE,
             "a word is dropped after term t without the bound of term t + 1 on what is still to come",
             "for (int u = t + 1; u < n_terms; u++)", "for (int u = t + 2; u < n_terms; u++)"),
    Mutation("drop-cut-summed-last-term-first", SCORE,
             "a word's partial sum plus the later terms' bounds added last term first: the score adds the "
             "terms first to last, and the other order can round below a score that ties the threshold",
             "for (int u = t + 1; u < n_terms; u++)", "for (int u = n_terms - 1; u > t; u--)"),
    Mutation("drop-cut-by-subtraction", SCORE,
             "the partial sum compared with the threshold less the later terms' bounds (the cut of 0.2.0 "
             "without its slack): a difference rounds otherwise than the sum it stands for",
             "kept += upper[j] >= threshold;",
             "{ double cut = threshold; for (int u = t + 1; u < n_terms; u++) cut -= sup[u]; "
             "kept += total[live[j]] >= cut; }"),
    Mutation("tie-order-reversed", SEARCH,
             "equal scores listed highest word id first",
             "((a->score == b->score) & (a->word < b->word))", "((a->score == b->score) & (a->word > b->word))"),
    Mutation("cap-counts-every-word", SEARCH,
             "the cap lists V words when the model has no <s>, not V - 1 as the original",
             "count = candidates - 1;", "count = candidates;"),
    Mutation("p-rule-counts-excluded-words", SEARCH,
             "with --exclude, the -p rule's V still counts the excluded words",
             "(double)(candidates - n_listed)", "(double)(vocab_size - n_listed)"),
    Mutation("excluded-words-stay-flagged", LISTS,
             "the flags of excluded words are not cleared: later searches never list them",
             "searcher->flags[excluded[i]] = 0;", "searcher->flags[excluded[i]] |= 0;"),
    Mutation("bos-flag-cleared", LISTS,
             "clearing the flags after a search clears <s>'s too: a later search may list <s>",
             "searcher->flags[searcher->reader.store->bos] = SEEN;",
             "searcher->flags[searcher->reader.store->bos] = 0;"),
    Mutation("normalize-all-minus-infinity-nan", SEARCH,
             "where every listed score is -inf, p / sum p is 0/0: NaN, not 0",
             "if (best == -INFINITY) {", "if (0) {"),
    # render.c: the output formats (text, JSON lines, -t records, -z, --sample)
    Mutation("jsonl-minus-infinity-not-null", RENDER,
             "a score of -inf is written in JSON lines by the repr of finite numbers (not null)",
             "if (isfinite(value))", "if (1)"),
    Mutation("z-floor-ignored", RENDER,
             "-z lists every substitute, not down to the first p / sum p below 1e-8",
             "while (kept < n && !(probabilities[kept] < NORMALIZED_FLOOR))", "while (kept < n)"),
    Mutation("target-fields-line-starts-with-tab", RENDER,
             "a -t record's substitutes line starts with a tab, as if the word were before it",
             "    case RENDER_FIELDS:", "    case RENDER_FIELDS: APPEND(t, \"\\t\");"),
    Mutation("jsonl-target-id-is-name", RENDER,
             "a -t record's JSON object gives its name as its id",
             "append_text_field(t, \"id\", place->id, place->id_len, 0);",
             "append_text_field(t, \"id\", place->name, place->name_len, 0);"),
    Mutation("sample-lines-id-is-name", RENDER,
             "a -t record's sample lines give its name as its id",
             "render_text_append(t, place->id, place->id_len);",
             "render_text_append(t, place->name, place->name_len);"),
    Mutation("jsonl-bytes-field-missing", RENDER,
             "text that is not UTF-8 gets no <field>_bytes: its bytes cannot be recovered",
             "if (!is_utf8(text, n)) {", "if (0) {"),
    Mutation("utf8-surrogates-accepted", RENDER,
             "UTF-8 of surrogates (ED A0-BF) taken as text, which Python's strict decoder refuses",
             "high = 0x9F;  /* surrogates */", "high = 0xBF;  /* surrogates */"),
    Mutation("json-control-bytes-raw", RENDER,
             "control bytes (below 0x20) written raw into JSON strings, not escaped",
             "size_t step = c >= 0x20 && c != '\"'", "size_t step = c >= 0x01 && c != '\"'"),
    Mutation("repr-fixed-notation-too-far", RENDER,
             "numbers from 1e-5 to 1e-4 written in fixed notation, where Python's repr() writes 1e-05",
             "if (point > -4 && point <= 16) {", "if (point >= -4 && point <= 16) {"),
    Mutation("sample-seeded-without-position", RENDER,
             "--sample's draws seeded by the seed and the line only: every position of a line draws alike",
             "(uint64_t)place->line, (uint64_t)place->position, r->draws, draws,",
             "(uint64_t)place->line, (uint64_t)0, r->draws, draws,"),
    # render_layout.h: the layouts Python reads (fastsubs._kernel.RENDER), and Python's reading of them
    Mutation("render-kind-taken-for-another", "fastsubs/core.py",
             "Render.JSON takes another kind's value from the core: --format jsonl writes text lines",
             'JSON = RENDER["kinds"]["JSON"]', 'JSON = RENDER["kinds"]["LINE"]'),
    Mutation("score-column-narrowed", "kernel/render_layout.h",
             "the scores column's items made float32: Parquet's lp loses the digits the text output has",
             "X(SCORES, double, 'f')", "X(SCORES, float, 'f')"),
    Mutation("column-frame-read-narrow", PARQUET,
             "a chunk's column lengths read as int32: every column after the frame is read from the wrong place",
             'COLUMN_LENGTH = np.dtype(RENDER["column_length"])', "COLUMN_LENGTH = np.dtype(np.int32)"),
    Mutation("sample-draws-without-mass", RENDER,
             "--sample draws where every listed score is -inf: the draw divides 0 by 0 and takes the first substitute",
             "if (!(probabilities[0] > 0.0))", "if (0)"),
    # sample.c: the --sample draw, numpy's default_rng([seed, line, position]).choice
    Mutation("sample-seed-high-word-dropped", SAMPLE,
             "a seed (or line) of 2^32 or more enters the seed sequence as its low 32 bits only",
             "} while (v);", "} while (0);"),
    Mutation("sample-double-from-52-bits", SAMPLE,
             "a draw's uniform double made from 52 random bits: every draw halves",
             "return (double)(next >> 11) * (1.0 / 9007199254740992.0);",
             "return (double)(next >> 12) * (1.0 / 9007199254740992.0);"),
    # kernel/lmdb/: the vendored LMDB is its upstream base and the patches kernel/lmdb/UPSTREAM names
    Mutation("lmdb-edited-outside-its-patches", "kernel/lmdb/mdb.c",
             "an edit of the vendored LMDB that no patch holds: an update of LMDB would lose it unseen",
             " *\t@brief Lightning memory-mapped database library", " *\t@brief Lightning memory-mapped database"),
    # chunk.c: -t records
    Mutation("target-record-newline-not-added", CHUNK,
             "a -t record whose last line has no final newline runs into its substitutes",
             "if (!line.len || line.text[line.len - 1] != '\\n')", "if (0)"),
    Mutation("target-field-quoted-whole", CHUNK,
             "a message quotes the whole offending field (a 50 MB field made a 52 MB message)",
             "Span field = {whole.text, whole.len > QUOTED_BYTES ? QUOTED_BYTES : whole.len};",
             "Span field = whole;"),
    Mutation("substitutes-tracked-by-the-collector", "kernel/module_search.c",
             "sentence()'s substitutes stay tracked by the garbage collector: a hundred a position make its "
             "passes walk every one a program keeps (1,500 lines kept: 2.7-2.9 s against 1.39-1.45 s)",
             "PyObject_GC_UnTrack(record);", ";"),
    Mutation("kept-output-not-emptied", "kernel/module_search.c",
             "render_chunk's kept output buffer is reused with the text of the chunk before still in it",
             "    chunk.out.len = 0;", "    ;"),
    Mutation("kept-output-of-any-size", "kernel/module_search.c",
             "render_chunk keeps its output buffer whatever its size: a chunk of 20 MB of text holds 20 MB "
             "more for the rest of the run",
             "if (!chunk.out.failed && chunk.out.cap <= KEPT_OUTPUT_BYTES && !self->kept_output.data)",
             "if (!chunk.out.failed && !self->kept_output.data)"),
    Mutation("search-never-asks-for-signals", "kernel/module_search.c",
             "a chunk's search never checks for a stop signal: SIGTERM waits for the end of a long line",
             ".interrupted = signal_raised};", ".interrupted = NULL};"),
    Mutation("whole-line-search-never-asks-for-signals", CHUNK,
             "only a long line's windows check for a stop signal: SIGTERM waits for the end of a line just under "
             "the long-line threshold",
             "if (request->interrupted && (target - first) % CHECK_POSITIONS == CHECK_POSITIONS - 1 &&",
             "if (request->interrupted && request->window && (target - first) % CHECK_POSITIONS == "
             "CHECK_POSITIONS - 1 &&"),
    # lmdb/mdb.c: the checks a read-only transaction makes of the pages it follows
    Mutation("lmdb-page-number-not-checked", LMDB,
             "a page whose header holds another page number is read as the page asked for",
             "if (mp->mp_pgno != pgno)", "if (0)", LMDB_PATCH),
    Mutation("lmdb-overflow-count-not-checked-against-file", LMDB,
             "an overflow page's count of pages is not checked against the file: a value's size and that count "
             "damaged together read past the file's end (SIGSEGV)",
             "if (mp->mp_pages < 1 || mp->mp_pages > txn->mt_next_pgno - pgno)", "if (mp->mp_pages < 1)",
             LMDB_PATCH),
    Mutation("verify-branch-keys-not-checked", VERIFY,
             "verify walks the leaves only: a flipped branch key sends the query to the wrong leaf while verify "
             "says OK",
             "if ((rc = mdb_tree_check(txn, s->patterns[order])))", "if ((rc = 0))"),
    Mutation("lmdb-tree-check-upper-bound-ignored", LMDB,
             "the tree check ignores the upper bound of a child's range: a branch key lowered into its left "
             "neighbour's range passes verify",
             "if ((lo && cmp(&key, lo) < 0) || (hi && cmp(&key, hi) >= 0) ||",
             "if ((lo && cmp(&key, lo) < 0) || (0 && hi) ||", LMDB_PATCH),
    Mutation("lmdb-tree-check-last-child-unbounded", LMDB,
             "the tree check gives a branch page's last child no upper bound, not the branch's own: in a tree of "
             "three levels a root key lowered into the last leaf of the branch before it passes verify",
             "const MDB_val *below = lo, *above = hi;", "const MDB_val *below = lo, *above = NULL;", LMDB_PATCH),
    # output_files.py: what --resume checks before it keeps anything
    Mutation("resume-bytes-hash-not-checked", OUTPUT_FILES,
             "the partial file's bytes are not compared with their recorded SHA-256: damage in it is published",
             "if digest.hexdigest() != expected:", "if False:"),
    # long_lines.py: a long line searched in windows
    Mutation("long-line-window-context-short", LONG_LINES,
             "a window holds one token of context fewer than the order's n - 1: the terms near its edges differ",
             "context = order - 1", "context = order - 2"),
    Mutation("long-line-token-cut-between-pieces", LONG_LINES,
             "a token cut where one piece of the line's file ends becomes two tokens",
             "rest = tokens.pop() if tokens and not data[-1:].isspace() else b\"\"", "rest = b\"\""),
    Mutation("parquet-long-line-rows-held-to-the-end", PARQUET,
             "a long line's rows are held until its part closes: a Parquet run's memory grows with the line",
             "if self._held_rows >= LONG_LINE_ROW_GROUP_ROWS:", "if False:"),
    Mutation("long-line-directory-made-at-start", RUN,
             "every run makes its directory for long lines at its start: a killed run leaves one behind in $TMPDIR",
             "spill = SpillDirectory(stack)", "spill = (lambda made: (made(), made)[1])(SpillDirectory(stack))"),
    Mutation("long-line-files-kept-to-the-end", RUN,
             "a long line's file and its chunk's output stay on disk until the run ends (many long lines fill it)",
             "                os.unlink(path)", "                pass"),
    Mutation("run-searches-whatever-writing-costs", RUN,
             "the run's own process searches whenever a result is not ready, even when its workers then wait for "
             "it to write their answers (16 cores, text to a file at -n 100: 76K positions/s)",
             "taken = run.take() if share.searches_here() else None", "taken = run.take()"),
    Mutation("run-never-searches-beside-its-workers", RUN,
             "the run's own process only writes: --workers 2 searches on one core",
             "return len(self.pool.workers) * written < self.search_seconds / self.lines_searched",
             "return False"),
    Mutation("reading-pipe-watched-after-its-end", WORKERS,
             "the reading thread's wake pipe stays watched once the thread has closed it: every wait for the "
             "workers' answers ends at once, and the run's own process spins while they search the last chunks",
             "if event & select.POLLHUP:  # its writer is gone", "if False:  # its writer is gone"),
    Mutation("resume-file-not-cut-back", OUTPUT_FILES,
             "a resumed file is not cut back to the recorded size: what came after the record stays in the output",
             "    stream.truncate(size)", "    pass"),
    Mutation("resume-written-bytes-not-hashed", OUTPUT_FILES,
             "the running hash misses the bytes written: every record's hash is that of nothing",
             "        self._hash.update(data)", "        pass"),
    Mutation("resume-part-hash-not-checked", OUTPUT_FILES,
             "a recorded part's size and SHA-256 are not checked: a truncated, flipped or copied part is published",
             "if os.path.getsize(path) != size or file_sha256(path) != digest:", "if False:"),
    Mutation("resume-part-names-not-checked", OUTPUT_FILES,
             "a record listing other parts than those of its lines is believed: a dataset missing lines",
             "if not _one_after_another(parts, lines):", "if False:"),
    Mutation("resume-unrecorded-parts-kept", OUTPUT_FILES,
             "parts the record does not hold are kept: rows of lines the record never held are published",
             "for name in set(os.listdir(self.path)) - set(names):", "for name in ():"),
    Mutation("resume-input-hash-not-checked", OUTPUT_FILES,
             "the input's first lines are not compared with those recorded: another input's output is continued",
             "if digest.hexdigest() != point[\"input_sha256\"]:", "if False:"),
    Mutation("dataset-record-lags-its-parts", OUTPUT_FILES,
             "a dataset's record is written at whole blocks, a second apart, not with each part: a kill loses "
             "published parts, and a stop keeps none of the tail's",
             "if part is not None:  # a dataset's part, whole: recorded at once", "if False:"),
    Mutation("resumed-run-forgets-its-first-lines", OUTPUT_FILES,
             "a resumed run's record hashes only the lines it wrote itself: resumed again, it is refused as "
             "another input's, and a good run is lost",
             "        self._digest = digest", "        self._digest = hashlib.sha256()"),
    Mutation("dataset-resume-input-not-checked", OUTPUT_FILES,
             "a dataset's input is not compared with the lines recorded: rows of another input are published",
             "if digest.hexdigest() != point[\"input_sha256\"]:",
             "if digest.hexdigest() != point[\"input_sha256\"] and self.sink.kind != PartDirectory.kind:"),
    Mutation("dataset-final-part-not-resumable", OUTPUT_FILES,
             "a dataset's record of its last part, cut short by the end of the input, is refused: a run killed "
             "before its publish is lost",
             "return 1 if self.sink.kind == PartDirectory.kind else self.blocks.lines",
             "return self.blocks.tail_chunk_lines if self.sink.kind == PartDirectory.kind else self.blocks.lines"),
    # output_lock.py, cluster.py: one writer per output
    Mutation("output-lock-not-taken", OUTPUT_LOCK,
             "a run does not lock its output: a second run on OUT writes over the first's partial output",
             "fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)", "pass"),
    Mutation("output-lock-shared", OUTPUT_LOCK,
             "the output's lock is a shared one: every run on OUT gets it, and writes",
             "fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)",
             "fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)"),
    Mutation("dask-output-file-not-locked", CLUSTER,
             "--dask writes an output file that another run is writing",
             "with output_locked(job[1], warn=print):", "with open(os.devnull):"),
    # reading.py: the thread that reads a parallel run's input
    Mutation("reading-thread-not-stopped", "query/reading.py",
             "the thread reading the input is not stopped as the run ends: a run stopped while its input pipe is "
             "open waits for the pipe's end",
             "        self._stop_input()", "        pass"),
    Mutation("reading-thread-outlives-the-main-thread", "query/reading.py",
             "a reading thread that no one stopped (a stop signal landed as it started) waits for input after the "
             "main thread has ended: the run, at exit, waits for it as long as its input pipe stays open",
             "    return stopped.is_set() or not threading.main_thread().is_alive()", "    return stopped.is_set()"),
    Mutation("chunk-taken-with-signals-open", "query/reading.py",
             "the main thread takes a chunk from the reading thread's queue with stop signals open: one landing "
             "there leaves the queue's lock held, and the stopped run waits for ever for the reading thread",
             "with signals_held():  # (around the queue's lock)", "if True:"),
    # long_lines.py, chunks.py, lines.py: temporary files, long -t records, the input's start
    Mutation("abandoned-temporary-directories-kept", RUN,
             "no run removes the temporary directories of runs killed by SIGKILL: they fill $TMPDIR",
             "        remove_abandoned()", "        pass"),
    Mutation("full-temporary-directory-read-as-input", LONG_LINES,
             "a long line that $TMPDIR has no room for is an error reading the input (line 1: cannot read), "
             "not one that names $TMPDIR",
             "with temporary_errors_named(directory):  # not the reading", "with suppress():  # not the reading"),
    Mutation("full-temporary-directory-unnamed", "fastsubs/pipeline/chunks.py",
             "a long line's output that $TMPDIR has no room for is an error that names no file",
             "return temporary_errors_named(os.path.dirname(self.path or \"\"))", "return suppress()"),
    Mutation("long-record-context-short", LONG_LINES,
             "a long -t record's window holds one token fewer than the order's n - 1 on each side of its target",
             "reach = order - 1", "reach = order - 2"),
    Mutation("long-record-line-not-written", "fastsubs/pipeline/chunks.py",
             "a long -t record's own line is missing before its substitutes in the original's format",
             "if rendered.done and writes_records(options):", "if False:"),
    Mutation("byte-order-mark-kept", "fastsubs/pipeline/lines.py",
             "a UTF-8 byte-order mark at the start of the input is part of its first token",
             "start = start.removeprefix(UTF8_BOM)", "start = start"),
    Mutation("exclude-byte-order-mark-kept", "query/word_lists.py",
             "a UTF-8 byte-order mark at the start of an --exclude-from file is part of its first word",
             "fields = (line.removeprefix(UTF8_BOM) if number == 1 else line).split()", "fields = line.split()"),
    Mutation("tail-resumed-at-a-block-start", "fastsubs/pipeline/lines.py",
             "a dataset resumed after a part of its tail cuts the rest from a new block: other parts, and "
             "rows past the input's end cut differently",
             "block_size = size - self.read % size", "block_size = size"),
    Mutation("empty-compressed-output-not-a-stream", OUTPUT_FILES,
             "a compressed output of no lines is an empty file, which its decompressor refuses",
             "if self.compress is not None and self._raw.tell() == 0:", "if False:"),
    # cluster.py: --dask's tasks publish only while their run wants them
    Mutation("dask-publish-unchecked", CLUSTER,
             "a task renames its file into place without asking whether its run still wants it",
             "self.check()  # under the lock: a stop waits for the rename, or the rename sees the stop", "pass"),
    Mutation("dask-stopping-run-not-seen", CLUSTER,
             "a task takes a run whose client has begun to stop (its event set) for a running one",
             "if Event(self.name, client).is_set():", "if False:"),
    Mutation("dask-dropped-task-kept", CLUSTER,
             "a task the scheduler no longer runs (its client killed, or the task given to another worker) goes on",
             "return worker.get_current_task() in running", "return True"),
    Mutation("dask-chunks-unchecked", CLUSTER,
             "a stopped run's task searches on to its file's end, checking only before it publishes",
             "still_wanted()  # a stopped run's task ends within CHECK_INTERVAL, not at its file's end", "pass"),
    Mutation("dask-stop-does-not-wait-for-a-rename", CLUSTER,
             "a stopping client does not wait for a rename under way: a file appears after it says it stopped",
             "if lock.acquire(timeout=PUBLISH_WAIT):", 'if lock.acquire(timeout="0s"):'),
    # parquet.py: the writer of a dataset's parts
    Mutation("parquet-part-not-removed-when-abandoned", PARQUET,
             "a part whose search failed, or whose writer a stop interrupted as it started, is left under its "
             "temporary name in the dataset",
             "        self.path.unlink(missing_ok=True)", "        pass"),
    # the build: its runs, its vocabulary, its writes (indexer/)
    Mutation("time-left-shares-the-last-slots-among-every-process", "indexer/time_left.py",
             "the estimate shares the work left among the processes: the last slots, which fewer jobs than "
             "processes run, are said to take a fraction of their time",
             "            needs = cpu(order, words)",
             "            needs = cpu(order, words) / self.processes"),
    Mutation("time-left-crowded-after-the-reading-as-during-it", "indexer/time_left.py",
             "the jobs left once the model is read are taken to share the cores with the reading still: a build "
             "fed by a generator is said to need twice the time it has left",
             "        return while_reading, after or max(1.0, self.processes / self.cores)",
             "        return while_reading, while_reading"),
    Mutation("time-left-paces-wall-seconds", "indexer/time_left.py",
             "a job's pace counts its wall seconds, not its CPU seconds: the cores' crowding while the model is "
             "read is counted again after",
             "    return slot.job.cpu if slot.job.cpu is not None else _wall(slot)", "    return _wall(slot)"),
    Mutation("time-left-every-order-at-one-pace", "indexer/time_left.py",
             "every slot is taken to go at the pace of all the slots ended so far: the top order's, slower a word, "
             "are said to end early",
             "            return words / (paces[order] or pace or 1.0)", "            return words / (pace or 1.0)"),
    Mutation("time-left-counts-the-jobs-in-the-reading-of-one-process", "indexer/time_left.py",
             "with one process, the reading's pace counts the time the jobs took in it: the reading left is "
             "said to take as long as reading and jobs did",
             "in_jobs = busy if self.processes == 1 else 0.0",
             "in_jobs = 0.0"),
    Mutation("build-commit-asked-at-its-end", "indexer/index_writer.py",
             "the index names the commit that is HEAD when its build ends: a clone that commits during a long "
             "build names code the build did not run",
             '"build": {"fastsubs": origin.VERSION, "fastsubs_commit": commit,',
             '"build": {"fastsubs": origin.VERSION, "fastsubs_commit": origin.commit(),'),
    Mutation("open-block-of-a-slot-never-written", "indexer/slots.py",
             "a slot's last block, open when its rows end, is never written: the patterns after the last "
             "closed block are missing from the index",
             "        write_batch(out, writer.finish(job.slot))", "        pass"),
    Mutation("repeat-lines-counted-from-each-chunk", "indexer/runs.py",
             "a repeated n-gram's lines are found again in the spill, but counted from the start of each chunk "
             "read: a repeat past the first chunk is named at the wrong lines",
             "places += (np.flatnonzero((rows[\"ids\"] == ngram).all(axis=1)) + first_row).tolist()",
             "places += np.flatnonzero((rows[\"ids\"] == ngram).all(axis=1)).tolist()"),
    Mutation("three-byte-ids-at-four-byte-offsets", "indexer/runs.py",
             "3-byte ids laid out 4 bytes apart in a row of 3-byte fields: ids overlap one another and the scores",
             "buffer=packed, offset=3 * column,", "buffer=packed, offset=4 * column,"),
    Mutation("merge-count-below-the-bound", "indexer/runs.py",
             "the merge's binary search counts a run's rows below the step's bound, not at most it: a pattern "
             "that ends at the bound is split across two steps",
             "        if ids[middle].tolist() <= bound:", "        if ids[middle].tolist() < bound:"),
    Mutation("merge-count-first-row-unchecked", "indexer/runs.py",
             "the merge's binary search takes a run's first row for one at most the bound: a run whose rows all "
             "come later gives one to this step, out of order",
             "    if not len(ids) or ids[0].tolist() > bound:", "    if not len(ids):"),
    Mutation("slots-appended-after-the-whole-model", "indexer/index_writer.py",
             "a slot's records wait in their file until the whole model is read (the temporary disk of a big "
             "build more than its index)",
             "while self._append_finished() and block:", "while block and self._append_finished():"),
    Mutation("spelling-order-prefix-ties", "indexer/native.c",
             "a word and its prefix compare equal in the spelling order: qsort may put either first, and a "
             "query's binary search for a word misses it",
             "return c ? c : (m > n) - (m < n);", "return c;"),
    Mutation("plain-decimal-fast-path-past-15-digits", "indexer/native.c",
             "the parsers' fast path takes decimals of 16 and 17 digits, whose digits a double does not hold "
             "exactly: rounded twice, a score is a bit off strtod's",
             "if (count == 0 || count > 15)", "if (count == 0 || count > 17)"),
    Mutation("section-end-on-a-chunk-last-line-missed", "indexer/arpa.py",
             "a blank line that is the last of a chunk of lines is not seen as the end of its section: the "
             "bulk parser turns the chunk down and the careful one refuses a valid model",
             "    if text.endswith(b\"\\n\"):  # the last line is blank", "    if False:"),
    Mutation("section-end-on-a-chunk-of-one-blank-line-missed", "indexer/arpa.py",
             "a chunk that is one blank line is not seen as the end of its section",
             "    if text[:1] in (b\"\", b\"\\n\", b\"\\\\\"):", "    if text[:1] in (b\"\\n\", b\"\\\\\"):"),
    Mutation("bulk-text-past-the-declared-count", "indexer/arpa.py",
             "the bulk parser reads a section's text past the n-grams its header declares: a model with more "
             "is refused at the section's end, without the line of the first n-gram too many",
             "if 0 < n <= room else None", "if 0 < n else None"),
    Mutation("last-line-without-newline-dropped", "indexer/arpa.py",
             "the reader drops a file's last line when no newline ends it: a model ending in \\end\\ alone is "
             "refused as cut short",
             "            ends.append(complete)  # the file's last line, with no newline", "            pass"),
    # publish.py, build.py: build --force
    Mutation("force-tag-not-written", BUILD,
             "a published index carries no tag: --force cannot recognize it once damaged",
             "        write_tag(temp)", "        pass"),
    Mutation("force-ignores-the-tag", PUBLISH,
             "--force ignores the tag and opens the target to recognize it: a damaged index is refused",
             "    if _is_tagged(target):", "    if False:"),
    Mutation("force-takes-any-tag-file", PUBLISH,
             "any file named like the tag passes: another program's LMDB environment is replaced",
             "stream.read(len(TAG_TEXT) + 1) == TAG_TEXT", "True"),
    Mutation("build-replaces-an-index-published-meanwhile", PUBLISH,
             "a build without --force replaces an index that another build published while it ran: both say "
             "built, and the first one's index is gone",
             "raise IndexExistsError(target, appeared=True) from None", "pass"),
    Mutation("force-ignores-file-types", PUBLISH,
             "--force takes a directory, FIFO or link by an index file's name for that file: a user's directory "
             "named data.mdb is deleted with what it holds, a FIFO as the tag blocks the build",
             "if not entries[name].is_file(follow_symlinks=False):", "if False:"),
    Mutation("force-refuses-earlier-versions", PUBLISH,
             "an untagged index of an earlier format is refused by --force: the upgrade CHANGES.md gives fails",
             "    except IndexVersionError:", "    except ArithmeticError:"),
    # the library under the command line (tests/test_api_surface.py)
    Mutation("library-imports-the-command-line", "fastsubs/__init__.py",
             "fastsubs.QueryOptions is taken from a module of the command line: the library needs query/ again",
             '"QueryOptions": "fastsubs.options",', '"QueryOptions": "fastsubs.query.cluster",'),
    Mutation("api-bytes-line-taken-for-tokens", "fastsubs/tokens.py",
             "a bytes line given to sentence() or batch() is taken for a sequence of tokens: its items are ints",
             "if isinstance(tokens, (str, bytes)):", "if isinstance(tokens, str):"),
    Mutation("api-token-type-not-checked", "fastsubs/tokens.py",
             "a token that is neither str nor bytes reaches .encode: an AttributeError, not an ArgumentError naming it",
             "if not isinstance(token, str):", "if False:"),
    Mutation("api-shows-the-core", "fastsubs/index.py",
             "an open index shows the core it holds as a public attribute: the API is more than docs/api.md",
             "        self._core = Core(path)", "        self._core = self.core = Core(path)"),
]
# Left out, as no output can tell them from the kernel (equivalent mutants):
# - a cached record of the highest order given a back-off pointer (has_beta for every
#   order): the search reads back-off weights only from patterns below the highest order,
#   so the pointer is never followed (the same slip when a record is decoded, in store.c,
#   breaks the record's layout and is caught);
# - the cap ignoring excluded words (count > vocab_size - 1): the search then reads every
#   word not excluded and lists them all, which is what the cap allows;
# - a cache hit that ignores the key length or compares fewer key bytes: a hit also needs
#   the 64-bit hash of the whole key to match, so it takes a hash collision to differ;
# - PlaceRow's fields reordered in render_layout.h: fastsubs/pipeline/parquet.py reads each field at the offset
#   the core exports (fastsubs._kernel.RENDER);
# - the stopping --dask client's client.cancel() left out: the client closes as it exits, and the
#   scheduler then drops the client's tasks as a cancel does, which is what a task checks;
# - FLAT_MAP_RATIO the wrong way round (dense patterns given two-level maps, sparse ones
#   flat maps): both maps give the same positions; only memory and time change.


def mutate(source: str, mutation: Mutation) -> str:
    """The file with the mutation applied; ValueError unless ``old`` is on exactly one line."""
    lines = source.split("\n")
    hits = [i for i, line in enumerate(lines) if mutation.old in line]
    if len(hits) != 1:
        raise ValueError(f"{mutation.name}: {mutation.old!r} is on {len(hits)} lines of {mutation.file}, not one")
    lines[hits[0]] = lines[hits[0]].replace(mutation.old, mutation.new)
    return "\n".join(lines)


def patched_files(patch: Path) -> list[str]:
    """The files ``patch`` changes, in its order (its ``--- a/NAME`` lines)."""
    return re.findall(r"^--- a/(\S+)$", patch.read_text(), re.MULTILINE)


def undo_patch(folder: Path, patch: Path) -> dict[str, bytes]:
    """The files of ``folder`` that ``patch`` changes, as they were before it: the patch
    undone on copies of them (``git apply --reverse``, as tests/test_vendored_lmdb.py does)."""
    names = patched_files(patch)
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            shutil.copyfile(folder / name, Path(scratch) / name)
        subprocess.run(["git", "apply", "--reverse", str(patch)], cwd=scratch, check=True, capture_output=True,
                       env={**os.environ, "GIT_CEILING_DIRECTORIES": str(Path(scratch).parent)})
        return {name: (Path(scratch) / name).read_bytes() for name in names}


def write_patch(folder: Path, patch: Path, before: dict[str, bytes]) -> None:
    """``patch`` written anew from ``before`` (:func:`undo_patch`) to the files of ``folder``
    as they are now, its description kept: docs/development.md, "Updating the vendored
    LMDB", step 5 (unchanged files give the patch back byte for byte)."""
    text = patch.read_text()
    diffs = [text[:text.index("\n---\n") + len("\n---\n")]]
    with tempfile.TemporaryDirectory() as scratch:
        for name, old in before.items():
            (Path(scratch) / name).write_bytes(old)
            diff = subprocess.run(["diff", "-up", "--label", f"a/{name}", "--label", f"b/{name}",
                                   str(Path(scratch) / name), str(folder / name)], capture_output=True, text=True)
            if diff.returncode > 1:
                raise RuntimeError(f"diff of {name} failed: {diff.stderr.strip()}")
            diffs.append(diff.stdout)
    patch.write_text("".join(diffs))


def apply(copy: Path, mutation: Mutation, original: str) -> None:
    """The mutation made in the copy: its file from ``original`` with the line changed, and
    its patch, if it has one, written anew around it (the patch of ``kernel/lmdb/patches/``
    changes files of ``kernel/lmdb/``).  ValueError when the line is not there once."""
    mutated = mutate(original, mutation)
    if mutation.patch is None:
        (copy / mutation.file).write_text(mutated)
        return
    patch = copy / mutation.patch
    before = undo_patch(patch.parents[1], patch)
    (copy / mutation.file).write_text(mutated)
    write_patch(patch.parents[1], patch, before)


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


class RefusedAtImport(Exception):
    """The mutated core built but refuses to load: its own checks at import (e.g. the layouts
    module_format.c compares at compile and load time) caught the mutation before any test."""


def install(copy: Path, site: Path) -> None:
    """Install the copy into ``site`` as pip installs a clone (its ``setup.py`` compiles every
    source it names: ``kernel/*.c``, the vendored LMDB and Ryu, and the indexer's native
    reader, so a change to any of them or to a header is built; pyproject.toml lays the
    package out); check that Python then imports that build, not the repository's."""
    shutil.rmtree(site, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--no-compile", "--target", str(site), "."], check=True, cwd=copy,
                   capture_output=True)
    imported = subprocess.run([sys.executable, "-c", "import fastsubs._kernel as k; print(k.__file__)"],
                              capture_output=True, text=True, env=environment(site), cwd=copy)
    if imported.returncode:
        refusal = imported.stderr.strip().splitlines()[-1] if imported.stderr.strip() else "no message"
        if refusal.startswith("SystemError"):
            raise RefusedAtImport(refusal)
        raise RuntimeError(f"the build does not import: {refusal}")
    where = imported.stdout
    if not Path(where.strip()).is_relative_to(site):
        raise RuntimeError(f"the tests would import {where.strip()}, not the build in {site}")


def environment(site: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Run in the copy, whose own ``fastsubs`` folder (without the kernel) must not shadow
    # the build: no current directory on sys.path, here and in every process the tests start.
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    return env


#: The test of this table against the repository's files (not of the code under test).
MUTATION_TABLE_TEST = "tests/test_mutation_table.py"


def run_suite(copy: Path, site: Path, pytest_args: list[str], timeout: float) -> tuple[str, list[str], float]:
    """(outcome, failed test ids, seconds) of the copy's default suite against ``site``."""
    start = time.monotonic()
    # Without tests/test_mutation_table.py, which checks that each planted bug's line is in
    # its file: in the copy the bug is planted, so it failed for every mutation and counted
    # every one as caught.
    pytest_args = [*pytest_args, f"--ignore={MUTATION_TABLE_TEST}"]
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
    finally:
        end_group(suite.pid)
    seconds = time.monotonic() - start
    failed = sorted({m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", stdout, re.MULTILINE)})
    summary = (stdout.strip().splitlines() or ["(no output)"])[-1]
    if suite.returncode < 0:
        summary = f"crashed (signal {-suite.returncode}); {summary}"
    elif suite.returncode == 1 and not failed and TIMEOUT_BANNER.search(stdout):
        summary = "crashed (a test timed out: pytest-timeout ended pytest)"
    return summary, failed, seconds


#: What pytest-timeout writes before it ends a process whose test ran out of time (its
#: thread method, pyproject.toml): under pytest-xdist the worker's test is then listed as
#: failed ("worker crashed"); in a run of one process, pytest itself ends.
TIMEOUT_BANNER = re.compile(r"^\++ Timeout \++$", re.MULTILINE)


def end_group(leader: int) -> None:
    """Kill what is left of a suite's process group: programs that a test started and that
    outlived it (pytest-timeout ends the process of a test that ran out of time, not the
    programs it waits for, which may loop forever under a mutation)."""
    try:
        os.killpg(leader, signal.SIGKILL)
    except ProcessLookupError:  # nothing left
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ref", help="test this commit instead of the working tree")
    parser.add_argument("--only", action="append", choices=[m.name for m in MUTATIONS],
                        help="run only this mutation (repeatable)")
    parser.add_argument("--baseline", action="store_true",
                        help="first run the unmutated copy; tests failing there catch no mutation")
    parser.add_argument("--list", action="store_true", help="print the table of mutations and stop")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per suite run")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest (default: the default suite)")
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.only or m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name}\t{m.file}\t{m.why}")
        return 0

    start = time.monotonic()
    caught_all = True
    outcomes: list[tuple[str, str, str]] = []  # (mutation, file, outcome) for the summary
    baseline_failed: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="fastsubs-mutations-") as tmp:
        copy, site = Path(tmp) / "fastsubs", Path(tmp) / "site"
        copy_repository(copy, args.ref)
        shared = REPO.parent / "shared"
        if shared.exists():  # the tests find ../shared/data beside the repository
            (Path(tmp) / "shared").symlink_to(shared)
        changed = {m.file for m in chosen} | {m.patch for m in chosen if m.patch is not None}
        originals = {name: (copy / name).read_text() for name in sorted(changed)}
        runs: list[tuple[str, Mutation | None]] = [("baseline", None)] if args.baseline else []
        runs += [(m.name, m) for m in chosen]
        for name, mutation in runs:
            # the unmutated files, then this run's mutation, kept while its suite runs: the tests
            # that compile kernel/ themselves (tests/c_programs.py) compile the mutation too
            for file, text in originals.items():
                (copy / file).write_text(text)
            if mutation is not None:
                try:
                    apply(copy, mutation, originals[mutation.file])
                except ValueError as error:
                    print(f"{name}: DOES NOT APPLY: {error}", flush=True)
                    outcomes.append((name, mutation.file, "DOES NOT APPLY"))
                    caught_all = False
                    continue
            try:
                install(copy, site)
            except RefusedAtImport as refusal:
                print(f"{name}: caught at import -- {refusal}", flush=True)
                if mutation is not None:
                    outcomes.append((name, mutation.file, f"caught at import: {refusal}"))
                else:  # the unmutated copy must load
                    caught_all = False
                continue
            except (subprocess.CalledProcessError, RuntimeError) as error:
                print(f"{name}: does not build or install: {error}", flush=True)
                if mutation is not None:
                    outcomes.append((name, mutation.file, "does not build"))
                caught_all = False
                continue
            summary, failed, seconds = run_suite(copy, site, args.pytest_args, args.timeout)
            failing = bool(failed) or re.search(r"\d+ (failed|errors?)\b", summary) is not None
            if mutation is None:
                ok = not failing and "passed" in summary
                print(f"baseline: {summary} ({seconds:.0f} s){'' if ok else ' -- NOT GREEN'}", flush=True)
                for test in failed:
                    print(f"  failed: {test}", flush=True)
                baseline_failed = set(failed)
                caught_all &= ok
                continue
            new = [test for test in failed if test not in baseline_failed]
            # A test may fail once for reasons of its own (a build or a signal under a loaded
            # machine): a failure catches the mutation when it fails again, the failed tests
            # run once more against the same build, in one worker process (one that runs out
            # of time again is then listed as failed), up to the first that fails.
            again: list[str] = []
            if new and "crashed" not in summary:
                _, again, _ = run_suite(copy, site, ["-x", "-n", "1", *new], args.timeout)
            confirmed = [test for test in new if test in again]
            # failures the summary counts but no line names (e.g. a crashed worker) count too
            stopped = "crashed" in summary or summary == "timed out"
            caught = bool(confirmed) or (failing and not failed) or stopped
            caught_all &= caught
            print(f"{name}: {'caught' if caught else 'NOT CAUGHT'} -- {mutation.why}\n"
                  f"  {summary} ({seconds:.0f} s)", flush=True)
            for test in failed:
                note = (" (fails in the baseline too)" if test not in new
                        else " (failed again)" if test in confirmed else "")
                print(f"  failed: {test}{note}", flush=True)
            if confirmed:
                outcome = f"caught: {len(new)} failed, e.g. {confirmed[0]}"
            elif caught:
                outcome = f"caught ({summary})"
            else:
                outcome = "NOT CAUGHT" + (f" (failed once, passed again: {', '.join(new)})" if new else "")
            outcomes.append((name, mutation.file, outcome))
    print(f"\n{sum(o.startswith('caught') for _, _, o in outcomes)} of {len(chosen)} mutations caught "
          f"in {(time.monotonic() - start) / 60:.0f} min:")
    for name, file, outcome in outcomes:
        print(f"  {name:40} {file:18} {outcome}")
    return 0 if caught_all else 1


if __name__ == "__main__":
    sys.exit(main())
