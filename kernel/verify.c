/* The whole-index checks of fastsubs-index verify: every page of an order's B-tree, its keys
 * within the ranges its branch pages give them, every record read in key order and checked,
 * and the arrays an open takes on trust (see store.h). */
#include "store_parts.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- whole-index checks */

/* Log-probabilities at most 0, -inf (log10 of 0) included, never NaN (the back-off
 * weights are their table's, whose values the open found finite). */
static int scores_ok(const DiskPattern *p) {
    for (uint32_t i = 0; i < p->count; i++)
        if (!(p->alpha[i] <= 0.0f))
            return 0;
    return 1;
}

/* Does the builder give the pattern ``key`` of ``count`` words a joint order (format.h)? */
static int wants_joint(const Store *s, int order, const uint8_t *key, uint32_t count) {
    return order == 2 && key[0] == 0 && count >= s->joint_min;
}

/* What the patterns of one slot of an order hold: the sum of a 128-bit hash of each n-gram
 * (two 64-bit hashes, each chained over the n-gram's words from a seed of its own).  Every slot holds every n-gram of its order once (format.h), so every
 * slot's sum is the last slot's: verify reads each n-gram once per slot and keeps nothing
 * else, however many n-grams the order has.  That is how it checks that a pattern of one
 * word outside the last slot, which stores no values (fs_values_elsewhere), has its n-gram
 * where its values lie: the pattern of its first order - 1 words, in the last slot. */
typedef struct {
    uint64_t lane[2];
} NgramSum;

static uint64_t mix64(uint64_t h) {  /* MurmurHash3's finalizer */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

/* Adds the n-grams of pattern ``p`` (key ``key`` of ``order``, its slot below the order) to
 * its slot's sum. */
static void add_ngrams(const Store *s, const uint8_t *key, int order, const DiskPattern *p, NgramSum *sums) {
    static const uint64_t seeds[2] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull};
    unsigned slot = key[0], n = (unsigned)order - 1;
    uint32_t fixed[FS_MAX_ORDER];  /* the key's words, read once for all of p's */
    for (unsigned i = 0; i < n; i++)
        fixed[i] = load_key_id(key, i, s->id_bytes);
    for (int lane = 0; lane < 2; lane++) {
        uint64_t before = seeds[lane];  /* the hash of the words left of the slot */
        for (unsigned i = 0; i < slot; i++)
            before = mix64(before ^ fixed[i]);
        for (uint32_t w = 0; w < p->count; w++) {
            uint64_t h = mix64(before ^ pattern_id(s, p, w));
            for (unsigned i = slot; i < n; i++)
                h = mix64(h ^ fixed[i]);
            sums[slot].lane[lane] += h;
        }
    }
}

/* Checks pattern ``p`` (``flags``), key ``key``, as a look-up would check it, and adds its
 * n-grams to their slot's sum.  A pattern that stores its values elsewhere is checked
 * without them: they are its n-gram's in the last slot, checked there.  0, or -1 with the
 * failure set. */
static int check_pattern(const Store *s, int order, DiskPattern *p, unsigned flags, const uint8_t *key,
                         size_t key_len, NgramSum *sums, Failure *failure) {
    static const float no_values = 0.0f;  /* (what records_check_pattern reads of a pattern without values) */
    if (key[0] >= (unsigned)order) {  /* (a forged key's slot: no slot of the order) */
        char shown[65];
        common_fail(failure, FS_EDAMAGED, "damaged index: pattern %s of patterns%d has no such slot",
                    codec_hex(key, key_len, shown), order);
        return -1;
    }
    if (flags & PATTERN_VALUES_ELSEWHERE) {
        p->alpha = (const ix_f32 *)&no_values;
        p->beta_table = NULL;
    }
    add_ngrams(s, key, order, p, sums);
    return records_check_pattern(s, p, order, failure, key, key_len);
}

int verify_patterns(const Store *s, MDB_txn *txn, int order, PatternCounts *counts, Failure *failure) {
    MDB_cursor *cursor;
    int rc = mdb_cursor_open(txn, s->patterns[order], &cursor);
    if (rc)
        return store_read_failed(failure, txn, rc, "patterns%d", order);
    NgramSum sums[FS_MAX_ORDER] = {{{0, 0}}};
    memset(counts, 0, sizeof(*counts));
    size_t key_len = fs_key_bytes((unsigned)order, s->id_bytes);
    uint8_t last[1 + 4 * FS_MAX_ORDER], key[1 + 4 * FS_MAX_ORDER];
    int has_last = 0, ended = 0, result = -1;
    unsigned has_beta = store_beta_flag(s, order);
    char shown[65];
    DiskPattern p = {0};
    MDB_val k, v;
    for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
        DiskRecord r;
        if (ended) {
            store_damaged(failure, "records follow the END record");
            goto out;
        }
        if (codec_open_record(k.mv_data, k.mv_size, v.mv_data, v.mv_size, order, key_len, 1, &r, failure) < 0)
            goto out;
        counts->records++;
        if (r.has_previous != has_last || (has_last && memcmp(r.previous, last, key_len))) {
            common_fail(failure, FS_EDAMAGED, "damaged index: the record of patterns%d at key %s does not name the record "
                 "before it", order, codec_hex(r.key, k.mv_size, shown));
            goto out;
        }
        if (r.kind == FS_END) {
            ended = 1;
            continue;
        }
        if (r.kind == FS_PATTERN) {
            memcpy(key, r.key, key_len);
            if (has_last && memcmp(last, key, key_len) >= 0)
                goto disorder;
            unsigned flags;
            if (codec_alone_pattern(&r, s->id_bits, has_beta, s->beta_table[order], &p, &flags) < 0)
                goto malformed;
            if (check_pattern(s, order, &p, flags, key, key_len, sums, failure) < 0)
                goto out;
            if (wants_joint(s, order, key, p.count) != (p.joint != NULL))
                goto joint;
            counts->patterns++;
            counts->entries += p.count;
            if (!scores_ok(&p))
                goto scores;
        } else {
            CodecWalk walk;
            int next;
            if (codec_walk_block(&walk, &r, s->id_bits, has_beta) < 0)
                goto malformed;
            while ((next = codec_next_entry(&walk)) > 0) {
                memcpy(key, walk.key, key_len);
                if (has_last && memcmp(last, key, key_len) >= 0)
                    goto disorder;
                memcpy(last, key, key_len);
                has_last = 1;
                codec_pattern_fields(walk.fields.data, walk.fields.count, s->id_bits, walk.fields.flags,
                                     s->beta_table[order], walk.fields.beta_width, &p);
                if (check_pattern(s, order, &p, walk.fields.flags, key, key_len, sums, failure) < 0)
                    goto out;
                if (wants_joint(s, order, key, walk.fields.count))
                    goto joint;
                if (!scores_ok(&p))
                    goto scores;
                counts->patterns++;
                counts->entries += walk.fields.count;
            }
            if (next < 0)
                goto malformed;
        }
        memcpy(last, r.key, key_len);
        has_last = 1;
    }
    if (rc != MDB_NOTFOUND)
        goto lmdb;
    if (!ended) {
        common_fail(failure, FS_EDAMAGED, "damaged index: patterns%d has no END record", order);
        goto out;
    }
    for (int slot = 0; slot < order - 1; slot++)
        if (memcmp(&sums[slot], &sums[order - 1], sizeof(NgramSum))) {
            common_fail(failure, FS_EDAMAGED, "damaged index: the patterns of slot %d of patterns%d do not hold the "
                        "n-grams its last slot holds", slot, order);
            goto out;
        }
    /* the records are sound in key order: now the branch keys a look-up follows, which that
     * walk of the leaves never reads (a flipped one sends a search to the wrong leaf) */
    if ((rc = mdb_tree_check(txn, s->patterns[order])))
        goto lmdb;
    result = 0;
    goto out;
lmdb:
    store_read_failed(failure, txn, rc, "patterns%d", order);
    goto out;
disorder:
    common_fail(failure, FS_EDAMAGED, "damaged index: the keys of patterns%d do not ascend at %s", order,
         codec_hex(key, key_len, shown));
    goto out;
scores:
    common_fail(failure, FS_EDAMAGED, "damaged index: pattern %s holds a score that is no log-probability",
         codec_hex(key, key_len, shown));
    goto out;
malformed:
    common_fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d at key %s has a malformed layout", order,
         codec_hex(k.mv_data, k.mv_size, shown));
    goto out;
joint:
    common_fail(failure, FS_EDAMAGED, "damaged index: pattern %s %s a joint order, against the header's threshold of %u "
         "words", codec_hex(key, key_len, shown), p.joint ? "has" : "lacks", s->joint_min);
out:
    mdb_cursor_close(cursor);
    return result;
}

int verify_arrays(const Store *s, Failure *failure) {
    size_t v = s->vocab_size;
    uint8_t *seen = calloc(v, 2);
    if (!seen) {
        common_fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    int ok = 1;
    for (size_t i = 0; ok && i < v; i++) {
        uint32_t by_score = s->unigram_order[i], by_spelling = s->spelling_order[i];
        ok = !seen[2 * by_score] && !seen[2 * by_spelling + 1] && s->unigram_alpha[i] <= 0.0f;
        seen[2 * by_score] = seen[2 * by_spelling + 1] = 1;
        if (ok && i) {
            uint32_t before = s->unigram_order[i - 1];
            float a = s->unigram_alpha[before], b = s->unigram_alpha[by_score];
            size_t la, lb;
            const char *wa = store_word(s, s->spelling_order[i - 1], &la), *wb = store_word(s, by_spelling, &lb);
            ok = (a > b || (a == b && before < by_score)) && store_compare_spelling(wa, la, wb, lb) < 0;
        }
    }
    free(seen);
    return ok ? 0 : store_damaged(failure, "unigram_order or spelling_order does not sort the vocabulary");
}
