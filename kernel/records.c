/* Pattern records: keys, looking a pattern up, and checking each pattern a look-up finds
 * (see store.h, store_parts.h); the records' bytes are parsed by codec.c. */
#include "store_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- pattern records */

size_t records_pattern_key(const Store *s, int slot, const uint32_t *ids, int n, uint8_t *key) {
    for (int i = 0; i < n; i++)
        if (ids[i] >= s->vocab_size)
            return 0;
    return codec_pattern_key(slot, ids, n, s->id_bytes, key);
}

int records_key_compare(const uint8_t *a, const uint8_t *b, size_t len) {
    return memcmp(a, b, len);
}

/* What check_order or records_check_pattern found wrong at an entry: bits, named in this
 * order (the first set bit is the one reported). */
enum { PAST_END = 1, REPEATED = 2, UNORDERED = 4, TIE_UNORDERED = 8 };
enum { PAST_VOCABULARY = 1, NOT_INCREASING = 2, BEYOND_BOUND = 4 };

/* The first read of a big pattern checks thousands of entries: these checks were a
 * quarter of the instructions of a cold pass (300 held-out lines, K = 10; issue 51).  So
 * the two functions below look at an entry with as few instructions as they can, and
 * report only the first fault; the ids' is inlined for ids of 16 bits (by_bits):
 * with the width a constant, an id is one load, not a multiply and a mask. */

/* The first entry of ``order`` (positions into p's arrays, p->position_bits each) that does not
 * continue a permutation sorting ``keys`` (keys[i] of entry i when ``in_order``, else
 * keys[position]) descending, ties by lower position, and what is wrong with it
 * (*problem), or p->count when none.  With ``seen`` it marks there the positions before
 * that entry and names a repeated one as such; without, a repeat is found only as the
 * disorder it makes when the keys are the positions' own (check_order). */
static uint32_t first_unordered(const DiskPattern *p, const uint8_t *order, const ix_f32 *keys, int in_order,
                                uint64_t *seen, unsigned *problem) {
    uint32_t before = 0;
    float before_key = 0.0f;
    for (uint32_t i = 0; i < p->count; i++) {
        uint32_t at = load_packed(order, i, p->position_bits);
        if (at >= p->count) {  /* (no key or bit past the end is read) */
            *problem = PAST_END;
            return i;
        }
        float key = keys[in_order ? i : at];
        unsigned found = 0;
        if (seen)
            found |= (seen[at / 64] >> (at % 64) & 1) * REPEATED;
        if (i && !(before_key >= key))
            found |= UNORDERED;
        if (i && before_key == key && before >= at)
            found |= TIE_UNORDERED;
        if (found) {
            *problem = found;
            return i;
        }
        if (seen)
            seen[at / 64] |= 1ull << (at % 64);
        before = at;
        before_key = key;
    }
    return p->count;
}

/* Is v finite with |v| beyond ``bound``, the largest float within the header's value bound?
 * As !within_value_bound, in float: a float is within the bound when it is within that float. */
static inline int beyond_bound(float v, float bound) {
    float magnitude = fabsf(v);
    return magnitude > bound && magnitude != INFINITY;
}

/* The first entry of p whose id is outside the vocabulary or not above the one before,
 * or whose value is beyond the header's value bound (ids ``bits`` bits), and what is
 * wrong with it (*problem), or p->count when none. */
static inline __attribute__((always_inline)) uint32_t first_bad_entry(const Store *s, const DiskPattern *p,
                                                                      unsigned bits, unsigned *problem) {
    uint32_t mask = (uint32_t)((1ull << bits) - 1u);
    int64_t previous = -1;
    float bound = (float)s->value_bound;  /* rounded to nearest: down to the float within it */
    if ((double)bound > s->value_bound)
        bound = nextafterf(bound, 0.0f);
    for (uint32_t i = 0; i < p->count; i++) {
        uint32_t id = load_id(p->ids, i, bits, mask);
        unsigned found = 0;
        if (id >= s->vocab_size)
            found |= PAST_VOCABULARY;
        if ((int64_t)id <= previous)
            found |= NOT_INCREASING;
        if (beyond_bound(p->alpha[i], bound))
            found |= BEYOND_BOUND;
        if (found) {
            *problem = found;
            return i;
        }
        previous = id;
    }
    return p->count;
}

/* ``call`` with its bits argument the constant 16 where ids take 16 bits (a vocabulary of up
 * to 65,536 words: one 2-byte load), else ``bits``. */
#define by_bits(bits, call) ((bits) == 16 ? call(16) : call(bits))

/* Checks that ``order`` (positions into the pattern's arrays, ``p->position_bits`` each)
 * is a permutation that sorts ``keys`` (keys[i] of entry i when ``in_order``, else
 * keys[position]) descending, ties by lower position; ``name`` names it in ``what``. */
static int check_order(const DiskPattern *p, const uint8_t *order, const ix_f32 *keys, int in_order, const char *name,
                       char *what, size_t what_size) {
    if (p->count <= 1)
        return 0;
    unsigned problem = 0;
    /* Keys looked up by position need no record of the positions seen: two entries of one
     * position have one key, so the entries from one to the other tie, and then their
     * positions must ascend, which they cannot do back to the first one's; so an order
     * that passes is a permutation.  A second pass, with the record, names the fault. */
    if (!in_order && first_unordered(p, order, keys, 0, NULL, &problem) == p->count)
        return 0;
    uint64_t small[4] = {0, 0, 0, 0}, *seen = p->count <= 256 ? small : calloc((p->count + 63) / 64, 8);
    if (!seen)
        return -1;
    uint32_t i = first_unordered(p, order, keys, in_order, seen, &problem);
    uint32_t at = i < p->count ? load_packed(order, i, p->position_bits) : 0;
    if (problem & PAST_END)
        snprintf(what, what_size, "its positions by %s hold %u, past its %u words", name, at, p->count);
    else if (problem & REPEATED)
        snprintf(what, what_size, "its positions by %s repeat %u", name, at);
    else if (problem & UNORDERED)
        snprintf(what, what_size, "its positions by %s do not order its %ss (entry %u)", name, name, i);
    else if (problem & TIE_UNORDERED)
        snprintf(what, what_size, "its positions by %s put tied %ss out of id order (entry %u)", name, name, i);
    if (seen != small)
        free(seen);
    return 0;
}

/* The first of p's beta codes past the end of its order's back-off table (``table_len``
 * entries), or p->count when none; the largest back-off weight, or 0, into *sup. */
static uint32_t first_bad_beta(const DiskPattern *p, uint32_t table_len, float *sup) {
    float largest = 0.0f;
    for (uint32_t i = 0; i < p->count; i++) {
        uint32_t code = beta_code(p->beta_codes, p->beta_width, i);
        if (code >= table_len)
            return i;
        largest = p->beta_table[code] > largest ? p->beta_table[code] : largest;
    }
    *sup = largest;
    return p->count;
}

/* Checks what a checksum cannot vouch for (the builder's work): ids strictly increasing and
 * in the vocabulary, alphas within the header's value bound, beta codes within the order's
 * back-off table (whose values the open checked), positions a permutation that orders the
 * alphas best first (ties by lower id: positions ascend among equal alphas), and a joint
 * order the same over its words' joint keys (computed here, as the search computes them:
 * the index stores none); derives the bound on the
 * back-off weights.  Each check names what it found (fastsubs-index verify shows it), and
 * each would still stop a pattern that only another one trips (a repeated position is also
 * a tie out of order). */
int records_check_pattern(const Store *s, DiskPattern *p, int order, Failure *failure, const uint8_t *key,
                          size_t key_len) {
    char shown[65], what[96] = "";
    unsigned problem = 0;
    float sup = 0.0f;
#define BAD_ENTRY_AS(bits) first_bad_entry(s, p, bits, &problem)
    uint32_t entry = by_bits(s->id_bits, BAD_ENTRY_AS);
#undef BAD_ENTRY_AS
    if (problem & PAST_VOCABULARY)
        snprintf(what, sizeof(what), "word id %u (entry %u) is outside the vocabulary", pattern_id(s, p, entry), entry);
    else if (problem & NOT_INCREASING)
        snprintf(what, sizeof(what), "its word ids do not increase (entry %u)", entry);
    else if (problem & BEYOND_BOUND)
        snprintf(what, sizeof(what), "a value of entry %u is beyond the header's value bound", entry);
    if (!what[0] && p->beta_table && (entry = first_bad_beta(p, s->beta_table_len[order], &sup)) < p->count)
        snprintf(what, sizeof(what), "its beta code %u (entry %u) is past its order's back-off table",
                 beta_code(p->beta_codes, p->beta_width, entry), entry);
    if (!what[0] && check_order(p, p->positions, p->alpha, 0, "score", what, sizeof(what)) < 0)
        goto no_memory;
    if (!what[0] && p->joint && p->count > 1) {
        /* its words' joint keys, by position (they are not stored: lists.c computes them too) */
        float *keys = malloc(sizeof(float) * p->count);
        if (!keys)
            goto no_memory;
        for (uint32_t at = 0; at < p->count; at++)
            keys[at] = pattern_joint_key(s, p, at);
        int rc = check_order(p, p->joint, keys, 0, "joint key", what, sizeof(what));
        free(keys);
        if (rc < 0)
            goto no_memory;
    }
    if (what[0]) {
        common_fail(failure, FS_EDAMAGED, "damaged index: pattern %s: %s", codec_hex(key, key_len, shown), what);
        return -1;
    }
    p->beta_sup = sup;
    return 0;
no_memory:
    common_fail(failure, FS_ENOMEM, "out of memory");
    return -1;
}


/* The place in ``checked`` of the record whose value is at ``value``: the top bits of its
 * address's hash, as many as CHECKED_RECORDS has places (a fixed shift of 52 used 4,096 of
 * them whatever the size, which made a bigger table look like no change). */
static size_t checked_place(const uint8_t *value) {
    return (size_t)(address_hash(value) >> (64 - CHECKED_RECORDS_BITS));
}

/* Looks the pattern ``key`` up as records_find_pattern does, checking the record it lands on
 * but not the pattern: 1 found (*out, and its flags into *flags: PATTERN_VALUES_ELSEWHERE
 * leaves its values to find), 0 none, -1 with the failure set. */
static int locate_pattern(const Store *s, MDB_cursor *cursor, CheckedRecords *checked, int order, const uint8_t *key,
                          size_t key_len, DiskPattern *out, unsigned *flags, Failure *failure) {
    MDB_val k = {key_len, (void *)key}, v;
    char shown[65];
    int rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE);
    if (rc == MDB_NOTFOUND) {
        common_fail(failure, FS_EDAMAGED, "damaged index: patterns%d ends before its END record", order);
        return -1;
    }
    if (rc)
        return store_read_failed(failure, mdb_cursor_txn(cursor), rc, "patterns%d", order);
    DiskRecord r;
    size_t place = checked ? checked_place(v.mv_data) : 0;
    int summed = checked && checked->values[place] == v.mv_data;
    if (codec_open_record(k.mv_data, k.mv_size, v.mv_data, v.mv_size, order, fs_key_bytes((unsigned)order, s->id_bytes),
                          !summed, &r, failure) < 0)
        return -1;
    if (checked)
        checked->values[place] = v.mv_data;
    /* The record must be the one whose keys span ``key``: after the previous record's last
     * key, at most its own.  A damaged B-tree may land elsewhere; never read that as absence. */
    if ((r.has_previous && records_key_compare(r.previous, key, key_len) >= 0) ||
        (r.kind != FS_END && records_key_compare(r.key, key, key_len) < 0)) {
        common_fail(failure, FS_EDAMAGED, "damaged index: the look-up of pattern %s landed on the wrong record of patterns%d",
             codec_hex(key, key_len, shown), order);
        return -1;
    }
    unsigned has_beta = store_beta_flag(s, order);
    if (r.kind == FS_END)
        return 0;
    if (r.kind == FS_PATTERN) {
        if (records_key_compare(r.key, key, key_len))
            return 0;
        if (codec_alone_pattern(&r, s->id_bits, has_beta, s->beta_table[order], out, flags) < 0)
            goto malformed;
        return 1;
    }
    DiskBlock b;
    if (codec_open_block(&r, &b) < 0)
        goto malformed;
    /* the last restart whose key is at most ``key`` (a restart's key is whole), then entry
     * by entry from it */
    uint32_t low = 0, high = b.n_restarts;
    while (high - low > 1) {
        uint32_t mid = (low + high) / 2;
        const uint8_t *restart_key = codec_restart_key(&r, &b, load_u16(b.restarts + FS_RESTART_BYTES * mid), has_beta);
        if (!restart_key)
            goto malformed;
        if (records_key_compare(restart_key, key, key_len) <= 0)
            low = mid;
        else
            high = mid;
    }
    size_t first = load_u16(b.restarts + FS_RESTART_BYTES * low);
    const uint8_t *stop = high < b.n_restarts ? b.entries + load_u16(b.restarts + FS_RESTART_BYTES * high) : r.end;
    if (stop > r.end || b.entries + first >= stop || !codec_restart_key(&r, &b, first, has_beta))
        goto malformed;
    uint8_t entry_key[1 + 4 * FS_MAX_ORDER];
    memset(entry_key, 0, key_len);
    EntryCursor at = codec_restart_cursor(b.entries + first);
    /* (the last entry's key is the record's, which is at least ``key``: a scan that reaches
     * the record's padding is of a malformed record) */
    while (at.at < stop) {
        EntryFields e;
        if (codec_read_entry(&r, &at, s->id_bits, has_beta, entry_key, &e) < 0)
            goto malformed;
        int c = records_key_compare(entry_key, key, key_len);
        if (c == 0) {
            /* (an id that ends its data is followed by FS_ID_TAIL bytes of the record: the
             * padding, or the next entry; a forged record may not, and an id is loaded as 4) */
            if ((e.flags & PATTERN_VALUES_ELSEWHERE) && r.end - at.at < FS_ID_TAIL)
                goto malformed;
            codec_pattern_fields(e.data, e.count, s->id_bits, e.flags, s->beta_table[order], e.beta_width, out);
            *flags = e.flags;
            return 1;
        }
        if (c > 0)
            return 0;
    }
    if (stop != r.end)
        return 0;  /* the next restart's key is above ``key`` */
    /* every key of the record is below ``key``, but the record's key is not */
malformed:
    common_fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d at key %s has a malformed layout", order,
         codec_hex(r.key, key_len, shown));
    return -1;
}

/* Points the values of ``p``, the pattern ``key`` of one word that stores them elsewhere
 * (format.h), at its n-gram's entry in the pattern that holds them, looked up through
 * ``cursor``: 0, or -1 with the failure set (FS_EDAMAGED: that pattern lacks the n-gram,
 * or its beta code there is past the order's table).  That pattern is the one of its
 * n-gram's first order - 1 words, the slot last (fs_values_elsewhere), which never stores
 * its own elsewhere.  Its record is checked as every look-up checks one (its checksum,
 * that the look-up landed where its key belongs, its layout); the one entry read is
 * checked here (its beta code) and by records_check_pattern with p (its alpha), the rest
 * of that pattern when a search reads it, and by verify.  So a first pass pays a B-tree
 * descent and at most a checksum per such pattern, not a check of the whole pattern that
 * holds its values. */
static int find_values(const Store *s, MDB_cursor *cursor, CheckedRecords *checked, int order, const uint8_t *key,
                       size_t key_len, DiskPattern *p, Failure *failure) {
    unsigned slot = key[0], n = (unsigned)order - 1, width = s->id_bytes;
    uint32_t ngram[FS_MAX_ORDER];  /* the fixed words, with p's word put in at the slot */
    for (unsigned i = 0; i <= n; i++)
        ngram[i] = i == slot ? pattern_id(s, p, 0) : load_key_id(key, i < slot ? i : i - 1, width);
    uint8_t context[1 + 4 * FS_MAX_ORDER];
    char shown[65], context_shown[65];
    codec_pattern_key((int)n, ngram, (int)n, width, context);
    DiskPattern c;
    unsigned flags = 0;
    int found = locate_pattern(s, cursor, checked, order, context, key_len, &c, &flags, failure);
    if (found < 0)
        return -1;
    int32_t at = found ? pattern_find(s, &c, ngram[n]) : -1;
    if (at < 0) {
        common_fail(failure, FS_EDAMAGED, "damaged index: pattern %s: its n-gram is missing from pattern %s, which "
                    "holds its values", codec_hex(key, key_len, shown), codec_hex(context, key_len, context_shown));
        return -1;
    }
    p->alpha = c.alpha + at;
    if (c.beta_table) {
        uint32_t code = beta_code(c.beta_codes, c.beta_width, (uint32_t)at);
        if (code >= s->beta_table_len[order]) {
            common_fail(failure, FS_EDAMAGED, "damaged index: pattern %s: its beta code %u in pattern %s is past its "
                        "order's back-off table", codec_hex(key, key_len, shown), code,
                        codec_hex(context, key_len, context_shown));
            return -1;
        }
        p->beta_table = c.beta_table + code;  /* (its one code is 0: width 0) */
    }
    return 0;
}

int records_find_pattern(const Store *s, MDB_cursor *cursor, CheckedRecords *checked, int order, const uint8_t *key,
                         size_t key_len, DiskPattern *out, Failure *failure) {
    unsigned flags = 0;
    int found = locate_pattern(s, cursor, checked, order, key, key_len, out, &flags, failure);
    if (found <= 0)
        return found;
    if ((flags & PATTERN_VALUES_ELSEWHERE) &&
        find_values(s, cursor, checked, order, key, key_len, out, failure) < 0)
        return -1;
    return records_check_pattern(s, out, order, failure, key, key_len) < 0 ? -1 : 1;
}
