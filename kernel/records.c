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

/* Checks that ``order`` (positions into the pattern's arrays, ``p->position_bytes`` each)
 * is a permutation that sorts ``keys`` (keys[i] of entry i when ``in_order``, else
 * keys[position]) descending, ties by lower position; ``name`` names it in ``what``. */
static int check_order(const DiskPattern *p, const uint8_t *order, const ix_f32 *keys, int in_order, const char *name,
                       char *what, size_t what_size) {
    if (p->count <= 1)
        return 0;
    uint64_t small[4] = {0, 0, 0, 0}, *seen = p->count <= 256 ? small : calloc((p->count + 63) / 64, 8);
    if (!seen)
        return -1;
    uint32_t mask = width_mask(p->position_bytes), before = 0;
    float before_key = 0.0f;
    for (uint32_t i = 0; i < p->count && !what[0]; i++) {
        uint32_t at = load_narrow(order, i, p->position_bytes, mask);
        if (at >= p->count) {
            snprintf(what, what_size, "its positions by %s hold %u, past its %u words", name, at, p->count);
            break;
        }
        float key = keys[in_order ? i : at];
        if (seen[at / 64] >> (at % 64) & 1)
            snprintf(what, what_size, "its positions by %s repeat %u", name, at);
        else if (i && !(before_key >= key))
            snprintf(what, what_size, "its positions by %s do not order its %ss (entry %u)", name, name, i);
        else if (i && before_key == key && before >= at)
            snprintf(what, what_size, "its positions by %s put tied %ss out of id order (entry %u)", name, name, i);
        seen[at / 64] |= 1ull << (at % 64);
        before = at;
        before_key = key;
    }
    if (seen != small)
        free(seen);
    return 0;
}

/* Checks what a checksum cannot vouch for (the builder's work): ids strictly increasing and
 * in the vocabulary, values within the header's value bound, positions a permutation that
 * orders the alphas best first (ties by lower id: positions ascend among equal alphas), and
 * a joint order the same over keys that are its words' joint keys; derives the bound on the
 * back-off weights.  Each check names what it found (fastsubs-index verify shows it), and
 * each would still stop a pattern that only another one trips (a repeated position is also
 * a tie out of order). */
int records_check_pattern(const Store *s, DiskPattern *p, Failure *failure, const uint8_t *key, size_t key_len) {
    char shown[65], what[96] = "";
    uint32_t previous = 0;
    for (uint32_t i = 0; i < p->count && !what[0]; i++) {
        uint32_t id = pattern_id(s, p, i);
        if (id >= s->vocab_size)
            snprintf(what, sizeof(what), "word id %u (entry %u) is outside the vocabulary", id, i);
        else if (i && id <= previous)
            snprintf(what, sizeof(what), "its word ids do not increase (entry %u)", i);
        else if (!within_value_bound(s, p->alpha[i]) || (p->beta && !within_value_bound(s, p->beta[i])))
            snprintf(what, sizeof(what), "a value of entry %u is beyond the header's value bound", i);
        previous = id;
    }
    if (!what[0] && check_order(p, p->positions, p->alpha, 0, "score", what, sizeof(what)) < 0)
        goto no_memory;
    if (!what[0] && p->joint) {
        if (check_order(p, p->joint, p->joint_key, 1, "joint key", what, sizeof(what)) < 0)
            goto no_memory;
        for (uint32_t i = 0; i < p->count && !what[0]; i++) {
            uint32_t at = joint_at(p, i);
            if (p->joint_key[i] != fs_joint_key(s->unigram_alpha[pattern_id(s, p, at)], p->alpha[at]))
                snprintf(what, sizeof(what), "its joint key %u is not its word's", i);
        }
    }
    if (what[0]) {
        common_fail(failure, FS_EDAMAGED, "damaged index: pattern %s: %s", codec_hex(key, key_len, shown), what);
        return -1;
    }
    float sup = 0.0f;
    if (p->beta)
        for (uint32_t i = 0; i < p->count; i++)
            if (p->beta[i] > sup)
                sup = p->beta[i];
    p->beta_sup = sup;
    return 0;
no_memory:
    common_fail(failure, FS_ENOMEM, "out of memory");
    return -1;
}


int records_find_pattern(const Store *s, MDB_cursor *cursor, int order, const uint8_t *key, size_t key_len,
                       DiskPattern *out, Failure *failure) {
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
    if (codec_open_record(k.mv_data, k.mv_size, v.mv_data, v.mv_size, order, fs_key_bytes((unsigned)order, s->id_bytes),
                          &r, failure) < 0)
        return -1;
    /* The record must be the one whose keys span ``key``: after the previous record's last
     * key, at most its own.  A damaged B-tree may land elsewhere; never read that as absence. */
    if ((r.has_previous && records_key_compare(r.previous, key, key_len) >= 0) ||
        (r.kind != FS_END && records_key_compare(r.key, key, key_len) < 0)) {
        common_fail(failure, FS_EDAMAGED, "damaged index: the look-up of pattern %s landed on the wrong record of patterns%d",
             codec_hex(key, key_len, shown), order);
        return -1;
    }
    unsigned has_beta = order < s->order ? PATTERN_HAS_BETA : 0;
    if (r.kind == FS_END)
        return 0;
    if (r.kind == FS_PATTERN) {
        if (records_key_compare(r.key, key, key_len))
            return 0;
        if (codec_alone_pattern(&r, s->id_bytes, has_beta, out) < 0)
            goto malformed;
        return records_check_pattern(s, out, failure, key, key_len) < 0 ? -1 : 1;
    }
    DiskBlock b;
    if (codec_open_block(&r, &b) < 0)
        goto malformed;
    /* the last restart whose key is at most ``key``, then entry by entry from it */
    size_t room = (size_t)(r.end - b.entries);
    uint32_t low = 0, high = b.n_restarts;
    while (high - low > 1) {
        uint32_t mid = (low + high) / 2, at = load_u16(b.restarts + FS_RESTART_BYTES * mid);
        if (room - at < FS_ENTRY_SHARED_BYTES + FS_ENTRY_COUNT_BYTES + key_len || at >= room || b.entries[at])
            goto malformed;
        if (records_key_compare(b.entries + at + FS_ENTRY_SHARED_BYTES, key, key_len) <= 0)
            low = mid;
        else
            high = mid;
    }
    const uint8_t *p = b.entries + load_u16(b.restarts + FS_RESTART_BYTES * low);
    const uint8_t *stop = high < b.n_restarts ? b.entries + load_u16(b.restarts + FS_RESTART_BYTES * high) : r.end;
    if (stop > r.end || p >= stop || p[0])
        goto malformed;
    uint8_t entry_key[1 + 4 * FS_MAX_ORDER];
    /* (the last run ends where the record's padding, under 4 bytes, begins) */
    while (p < stop && !(stop == r.end && r.end - p < 4)) {
        uint32_t count;
        const uint8_t *data;
        if (!(p = codec_read_entry(&r, p, s->id_bytes, has_beta, entry_key, &count, &data)))
            goto malformed;
        int c = records_key_compare(entry_key, key, key_len);
        if (c == 0) {
            store_pattern_at(s, data, count, has_beta, out);
            return records_check_pattern(s, out, failure, key, key_len) < 0 ? -1 : 1;
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
