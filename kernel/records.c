/* Pattern records: keys, reading a record and the patterns in it, and checking each
 * pattern a look-up finds (see store.h, store_parts.h). */
#include "store_parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- pattern records */

size_t store_pattern_key(const Store *s, int slot, const uint32_t *ids, int n, uint8_t *key) {
    key[0] = (uint8_t)slot;
    uint8_t *out = key + 1;
    for (int i = 0; i < n; i++) {
        if (ids[i] >= s->vocab_size)
            return 0;
        for (int b = (int)s->id_bytes - 1; b >= 0; b--)
            *out++ = (uint8_t)(ids[i] >> (8 * b));
    }
    return (size_t)(out - key);
}

/* A key as hex, for messages (at most the first 32 bytes). */
const char *records_hex(const uint8_t *key, size_t len, char out[65]) {
    size_t n = len < 32 ? len : 32;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = "0123456789abcdef"[key[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[key[i] & 15];
    }
    out[2 * n] = 0;
    return out;
}

int records_key_compare(const uint8_t *a, const uint8_t *b, size_t len) {
    return memcmp(a, b, len);
}

/* Bytes of the data of a pattern of ``count`` words. */
uint64_t records_data_bytes(const Store *s, uint64_t count, unsigned flags) {
    return FS_PATTERN_DATA_BYTES(count, s->id_bytes, flags & PATTERN_HAS_BETA) +
           (flags & PATTERN_HAS_JOINT ? FS_JOINT_DATA_BYTES(count) : 0);
}

void store_pattern_at(const Store *s, const uint8_t *data, uint32_t count, unsigned flags, DiskPattern *p) {
    p->count = count;
    p->ids = data;
    p->position_bytes = FS_POSITION_BYTES(count);
    p->positions = p->position_bytes ? data + (size_t)count * s->id_bytes : NULL;
    p->alpha = (const ix_f32 *)(data + (size_t)count * (s->id_bytes + p->position_bytes));
    p->beta = flags & PATTERN_HAS_BETA ? p->alpha + count : NULL;
    p->joint = NULL;
    p->joint_key = NULL;
    if (flags & PATTERN_HAS_JOINT) {
        p->joint = (const uint8_t *)(p->alpha + count * (p->beta ? 2 : 1));
        p->joint_key = (const ix_f32 *)(p->joint + (size_t)count * p->position_bytes);
    }
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
            if (p->joint_key[i] != joint_key(s->unigram_alpha[pattern_id(s, p, at)], p->alpha[at]))
                snprintf(what, sizeof(what), "its joint key %u is not its word's", i);
        }
    }
    if (what[0]) {
        fs_fail(failure, FS_EDAMAGED, "damaged index: pattern %s: %s", records_hex(key, key_len, shown), what);
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
    fs_fail(failure, FS_ENOMEM, "out of memory");
    return -1;
}


int records_open(const Store *s, int order, const MDB_val *k, const MDB_val *v, DiskRecord *r,
                       Failure *failure) {
    const uint8_t *value = v->mv_data;
    size_t key_len = FS_KEY_BYTES((unsigned)order, s->id_bytes);
    char shown[65];
    r->key = k->mv_data;
    r->key_len = key_len;
    if (k->mv_size != key_len && k->mv_size != key_len + 1) {  /* a pattern's key, or an END record's */
        fs_fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d has a key of %zu bytes, not %zu "
             "(bytes flipped?)", order, k->mv_size, key_len);
        return -1;
    }
    if (v->mv_size < FS_R_PREVIOUS + key_len || v->mv_size % 4 ||
        fs_checksum(k->mv_data, k->mv_size, value + 4, v->mv_size - 4) != load_u32(value + FS_R_CHECKSUM)) {
        fs_fail(failure, FS_EDAMAGED, "damaged index: the record of patterns%d at key %s fails its checksum "
             "(bytes flipped?)", order, records_hex(k->mv_data, k->mv_size, shown));
        return -1;
    }
    r->kind = value[FS_R_KIND];
    r->has_previous = value[FS_R_FLAGS] & FS_HAS_PREVIOUS;
    r->has_joint = (value[FS_R_FLAGS] & FS_HAS_JOINT) != 0;
    r->previous = value + FS_R_PREVIOUS;
    r->body = r->previous + key_len;
    r->end = value + v->mv_size;
    int key_ok = r->kind == FS_END ? k->mv_size == key_len + 1 : k->mv_size == key_len;
    /* only a PATTERN record of a pattern "_ d" (order 2, the slot first) has a joint order */
    int joint_ok = !r->has_joint || (r->kind == FS_PATTERN && order == 2 && r->key[0] == 0);
    if (!key_ok || !joint_ok || (r->kind != FS_BLOCK && r->kind != FS_PATTERN && r->kind != FS_END)) {
        fs_fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d has a malformed key or kind", order);
        return -1;
    }
    return 0;
}


int records_open_block(const DiskRecord *r, DiskBlock *b) {
    if (r->end - r->body < FS_BLOCK_RESTART_TABLE)
        return -1;
    b->n_patterns = load_u16(r->body + FS_BLOCK_PATTERNS);
    b->n_restarts = load_u16(r->body + FS_BLOCK_RESTARTS);
    b->restarts = r->body + FS_BLOCK_RESTART_TABLE;
    b->entries = b->restarts + FS_RESTART_BYTES * (size_t)b->n_restarts;
    return b->n_patterns && b->n_restarts && b->entries <= r->end && load_u16(b->restarts) == 0 ? 0 : -1;
}

/* Decodes the entry at ``p`` (the key before it in ``key``, which it turns into its own):
 * its count and data; returns where the next entry starts, or NULL if it does not fit. */
const uint8_t *records_read_entry(const Store *s, const DiskRecord *r, const uint8_t *p, uint8_t *key,
                                 uint32_t *count, const uint8_t **data, unsigned has_beta) {
    size_t len = r->key_len, fields = FS_ENTRY_SHARED_BYTES + FS_ENTRY_COUNT_BYTES;  /* one byte each */
    if (r->end - p < (ptrdiff_t)fields || p[0] > len || (size_t)(r->end - p) < fields + len - p[0])
        return NULL;
    memcpy(key + p[0], p + FS_ENTRY_SHARED_BYTES, len - p[0]);
    p += FS_ENTRY_SHARED_BYTES + len - p[0];
    *count = *p;
    p += FS_ENTRY_COUNT_BYTES;
    uint64_t bytes = records_data_bytes(s, *count, has_beta);
    if (*count == 0 || (uint64_t)(r->end - p) < bytes)
        return NULL;
    *data = p;
    return p + bytes;
}

/* The pattern of a PATTERN record: 0, or -1 when its layout is malformed. */
int records_alone_pattern(const Store *s, const DiskRecord *r, unsigned has_beta, DiskPattern *out) {
    if (r->end - r->body < FS_PATTERN_DATA)
        return -1;
    unsigned flags = has_beta | (r->has_joint ? PATTERN_HAS_JOINT : 0);
    uint32_t count = load_u32(r->body + FS_PATTERN_COUNT);
    uint64_t used = FS_PATTERN_DATA + records_data_bytes(s, count, flags), left = (uint64_t)(r->end - r->body);
    if (count == 0 || used > left || left - used > 3)
        return -1;
    store_pattern_at(s, r->body + FS_PATTERN_DATA, count, flags, out);
    return 0;
}

int store_find_pattern(const Store *s, MDB_cursor *cursor, int order, const uint8_t *key, size_t key_len,
                       DiskPattern *out, Failure *failure) {
    MDB_val k = {key_len, (void *)key}, v;
    char shown[65];
    int rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE);
    if (rc == MDB_NOTFOUND) {
        fs_fail(failure, FS_EDAMAGED, "damaged index: patterns%d ends before its END record", order);
        return -1;
    }
    if (rc)
        return store_read_failed(failure, mdb_cursor_txn(cursor), rc, "patterns%d", order);
    DiskRecord r;
    if (records_open(s, order, &k, &v, &r, failure) < 0)
        return -1;
    /* The record must be the one whose keys span ``key``: after the previous record's last
     * key, at most its own.  A damaged B-tree may land elsewhere; never read that as absence. */
    if ((r.has_previous && records_key_compare(r.previous, key, key_len) >= 0) ||
        (r.kind != FS_END && records_key_compare(r.key, key, key_len) < 0)) {
        fs_fail(failure, FS_EDAMAGED, "damaged index: the look-up of pattern %s landed on the wrong record of patterns%d",
             records_hex(key, key_len, shown), order);
        return -1;
    }
    unsigned has_beta = order < s->order ? PATTERN_HAS_BETA : 0;
    if (r.kind == FS_END)
        return 0;
    if (r.kind == FS_PATTERN) {
        if (records_key_compare(r.key, key, key_len))
            return 0;
        if (records_alone_pattern(s, &r, has_beta, out) < 0)
            goto malformed;
        return records_check_pattern(s, out, failure, key, key_len) < 0 ? -1 : 1;
    }
    DiskBlock b;
    if (records_open_block(&r, &b) < 0)
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
        if (!(p = records_read_entry(s, &r, p, entry_key, &count, &data, has_beta)))
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
    fs_fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d at key %s has a malformed layout", order,
         records_hex(r.key, key_len, shown));
    return -1;
}
