/* The index format's bytes, made and parsed in one place (see codec.h, format.h). */
#include "codec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- parsing, in place */

const char *codec_hex(const uint8_t *key, size_t len, char out[65]) {
    size_t n = len < 32 ? len : 32;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = "0123456789abcdef"[key[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[key[i] & 15];
    }
    out[2 * n] = 0;
    return out;
}

/* Bytes of the data of a pattern of ``count`` words (``flags``), its beta codes ``beta_width`` bits each. */
static uint64_t data_bytes(uint64_t count, unsigned id_bits, unsigned flags, unsigned beta_width) {
    FsPatternLayout at = fs_pattern_layout(count, id_bits, (flags & PATTERN_HAS_JOINT) != 0,
                                           (flags & PATTERN_VALUES_ELSEWHERE) != 0);
    return fs_pattern_end(at, count, (flags & PATTERN_HAS_BETA) != 0, beta_width);
}

int64_t codec_data_bytes(const uint8_t *data, const uint8_t *end, uint64_t count, unsigned id_bits, unsigned flags,
                         unsigned beta_width) {
    if (!fs_beta_width_ok(beta_width) || (!(flags & PATTERN_HAS_BETA) && beta_width) ||
        ((flags & PATTERN_VALUES_ELSEWHERE) && beta_width))
        return -1;
    uint64_t bytes = data_bytes(count, id_bits, flags, beta_width);
    return bytes <= (uint64_t)(end - data) ? (int64_t)bytes : -1;
}

void codec_pattern_fields(const uint8_t *data, uint32_t count, unsigned id_bits, unsigned flags,
                          const ix_f32 *beta_table, unsigned beta_width, DiskPattern *p) {
    int has_joint = (flags & PATTERN_HAS_JOINT) != 0, has_beta = (flags & PATTERN_HAS_BETA) != 0;
    FsPatternLayout at = fs_pattern_layout(count, id_bits, has_joint, (flags & PATTERN_VALUES_ELSEWHERE) != 0);
    p->count = count;
    p->ids = data + at.ids;
    p->position_bits = at.position_bits;
    p->positions = at.position_bits ? data + at.positions : NULL;
    p->alpha = at.values ? (const ix_f32 *)(data + at.alpha) : NULL;
    p->beta_table = has_beta ? beta_table : NULL;
    p->beta_width = has_beta ? beta_width : 0;
    p->beta_codes = has_beta && at.values ? data + at.beta : NULL;
    p->joint = has_joint ? data + at.joint : NULL;
}

int codec_open_record(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len, int order,
                      size_t pattern_key_len, int sum, DiskRecord *r, Failure *failure) {
    char shown[65];
    r->key = key;
    r->key_len = pattern_key_len;
    r->order = order;
    if (key_len != pattern_key_len && key_len != pattern_key_len + 1) {  /* a pattern's key, or an END record's */
        common_fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d has a key of %zu bytes, not %zu "
                "(bytes flipped?)", order, key_len, pattern_key_len);
        return -1;
    }
    if (value_len < FS_R_PREVIOUS + pattern_key_len || value_len % 4 ||
        (sum && common_checksum(key, key_len, value + 4, value_len - 4) != load_u32(value + FS_R_CHECKSUM))) {
        common_fail(failure, FS_EDAMAGED, "damaged index: the record of patterns%d at key %s fails its checksum "
                "(bytes flipped?)", order, codec_hex(key, key_len, shown));
        return -1;
    }
    r->kind = value[FS_R_KIND];
    r->has_previous = value[FS_R_FLAGS] & FS_HAS_PREVIOUS;
    r->has_joint = (value[FS_R_FLAGS] & FS_HAS_JOINT) != 0;
    r->previous = value + FS_R_PREVIOUS;
    r->body = r->previous + pattern_key_len;
    r->end = value + value_len;
    int key_ok = r->kind == FS_END ? key_len == pattern_key_len + 1 : key_len == pattern_key_len;
    /* only a PATTERN record of a pattern "_ d" (order 2, the slot first) has a joint order */
    int joint_ok = !r->has_joint || (r->kind == FS_PATTERN && order == 2 && r->key[0] == 0);
    if (!key_ok || !joint_ok || (r->kind != FS_BLOCK && r->kind != FS_PATTERN && r->kind != FS_END)) {
        common_fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d has a malformed key or kind", order);
        return -1;
    }
    return 0;
}

int codec_open_block(const DiskRecord *r, DiskBlock *b) {
    if (r->end - r->body < FS_BLOCK_RESTART_TABLE)
        return -1;
    b->n_patterns = load_u16(r->body + FS_BLOCK_PATTERNS);
    b->n_restarts = load_u16(r->body + FS_BLOCK_RESTARTS);
    b->restarts = r->body + FS_BLOCK_RESTART_TABLE;
    b->entries = b->restarts + FS_RESTART_BYTES * (size_t)b->n_restarts;
    return b->n_patterns && b->n_restarts && b->entries <= r->end && load_u16(b->restarts) == 0 ? 0 : -1;
}

/* Adds the big-endian ``delta`` (``n`` bytes) to the last bytes of ``key`` (``len``): 0, or
 * -1 when the sum does not fit the key (a carry past its first byte). */
static int add_delta(uint8_t *key, size_t len, const uint8_t *delta, unsigned n) {
    unsigned carry = 0;
    for (size_t i = len; i-- > 0;) {
        unsigned sum = key[i] + carry + (i >= len - n ? delta[i - (len - n)] : 0u);
        key[i] = (uint8_t)sum;
        carry = sum >> 8;
        if (!carry && i < len - n)
            return 0;
    }
    return carry ? -1 : 0;
}

int codec_read_entry(const DiskRecord *r, EntryCursor *c, unsigned id_bits, unsigned has_beta, uint8_t *key,
                     EntryFields *e) {
    size_t len = r->key_len;
    const uint8_t *p = c->at, *end = r->end;
    unsigned code;
    if (c->paired) {
        code = c->code;
        c->paired = 0;
    } else {
        if (p >= end)
            return -1;
        code = *p & 15u;
        c->code = *p++ >> 4;
        c->paired = 1;
    }
    unsigned escaped_count = 0;
    if (code != FS_ENTRY_ESCAPED) {
        FsEntryCode given = fs_entry_code((int)has_beta, code);
        e->delta = given.delta ? given.delta : (unsigned)len;
        e->count = given.count;
        e->beta_width = given.width;
    } else {
        if (p >= end)
            return -1;
        unsigned head = *p++;
        e->delta = head >> 4;
        if (e->delta == FS_ENTRY_ESCAPED_DELTA)
            e->delta = p < end ? *p++ : 0u;
        e->count = head & 15u;
        escaped_count = e->count == FS_ENTRY_ESCAPED_COUNT;
    }
    if (e->delta == 0 || e->delta > len || (size_t)(end - p) < e->delta || add_delta(key, len, p, e->delta) < 0)
        return -1;
    p += e->delta;
    if (code == FS_ENTRY_ESCAPED) {
        if (escaped_count)
            e->count = p < end ? *p++ : 0u;
        if (escaped_count && e->count == FS_ENTRY_WIDE_COUNT) {  /* (a count of 256 or more, in a u32) */
            if (end - p < 4)
                return -1;
            e->count = load_u32(p);
            p += 4;
        }
        e->beta_width = 0;
        if (has_beta) {
            if (p >= end)
                return -1;
            e->beta_width = *p++;
        }
    }
    e->flags = has_beta | codec_key_flags(key, r->order, e->count, 0);
    int64_t bytes = codec_data_bytes(p, end, e->count, id_bits, e->flags, e->beta_width);
    if (e->count == 0 || bytes < 0)
        return -1;
    e->data = p;
    c->at = p + bytes;
    return 0;
}

const uint8_t *codec_restart_key(const DiskRecord *r, const DiskBlock *b, size_t offset, unsigned has_beta) {
    const uint8_t *p = b->entries + offset, *end = r->end;
    size_t len = r->key_len;
    if (offset >= (size_t)(end - b->entries))
        return NULL;
    unsigned code = *p++ & 15u;
    if (code != FS_ENTRY_ESCAPED) {  /* the code must give a whole key */
        FsEntryCode given = fs_entry_code((int)has_beta, code);
        if ((given.delta ? given.delta : len) != len)
            return NULL;
    } else {
        if (p >= end || *p >> 4 != (len < FS_ENTRY_ESCAPED_DELTA ? len : FS_ENTRY_ESCAPED_DELTA))
            return NULL;
        if (*p++ >> 4 == FS_ENTRY_ESCAPED_DELTA && (p >= end || *p++ != len))
            return NULL;
    }
    return (size_t)(end - p) >= len ? p : NULL;
}

int codec_padding_ok(const DiskRecord *r, const uint8_t *used_end, unsigned last_flags) {
    const uint8_t *value = r->previous - FS_R_PREVIOUS;
    uint64_t used = (uint64_t)(used_end - value);
    return (uint64_t)(r->end - used_end) == fs_record_padding(used, (last_flags & PATTERN_VALUES_ELSEWHERE) != 0);
}

int codec_alone_pattern(const DiskRecord *r, unsigned id_bits, unsigned has_beta, const ix_f32 *beta_table,
                        DiskPattern *out, unsigned *flags) {
    if (r->end - r->body < FS_PATTERN_DATA)
        return -1;
    uint32_t count = load_u32(r->body + FS_PATTERN_COUNT);
    *flags = has_beta | (r->has_joint ? PATTERN_HAS_JOINT : 0) | codec_key_flags(r->key, r->order, count, r->has_joint);
    unsigned width = r->body[FS_PATTERN_WIDTH];
    int64_t data = codec_data_bytes(r->body + FS_PATTERN_DATA, r->end, count, id_bits, *flags, width);
    if (count == 0 || data < 0 || !codec_padding_ok(r, r->body + FS_PATTERN_DATA + data, *flags))
        return -1;
    codec_pattern_fields(r->body + FS_PATTERN_DATA, count, id_bits, *flags, beta_table, width, out);
    return 0;
}

int codec_walk_block(CodecWalk *w, const DiskRecord *r, unsigned id_bits, unsigned has_beta) {
    w->record = r;
    w->id_bits = id_bits;
    w->has_beta = has_beta;
    w->entry = w->restart = 0;
    if (codec_open_block(r, &w->block) < 0)
        return -1;
    w->cursor = codec_restart_cursor(w->block.entries);
    return 0;
}

int codec_next_entry(CodecWalk *w) {
    const DiskBlock *b = &w->block;
    const DiskRecord *r = w->record;
    if (w->entry == b->n_patterns)
        return w->restart == b->n_restarts && codec_padding_ok(r, w->cursor.at, w->fields.flags) &&
                       !memcmp(w->key, r->key, r->key_len) ? 0 : -1;
    w->restarts = w->restart < b->n_restarts &&
                  w->cursor.at == b->entries + load_u16(b->restarts + FS_RESTART_BYTES * w->restart);
    if (w->entry == 0 && !w->restarts)
        return -1;
    if (w->restarts) {  /* a new group: its first entry has a code byte and its key whole */
        if (!codec_restart_key(r, b, (size_t)(w->cursor.at - b->entries), w->has_beta))
            return -1;
        w->restart++;
        w->cursor = codec_restart_cursor(w->cursor.at);
        memset(w->key, 0, r->key_len);
    }
    if (codec_read_entry(r, &w->cursor, w->id_bits, w->has_beta, w->key, &w->fields) < 0)
        return -1;
    w->entry++;
    return 1;
}

/* ---------------------------------------------------------------- the header */

static void store_u16(uint8_t *p, uint32_t v) {
    uint16_t narrow = (uint16_t)v;
    memcpy(p, &narrow, 2);
}

static void store_u32(uint8_t *p, uint32_t v) {
    memcpy(p, &v, 4);
}

static void store_u64(uint8_t *p, uint64_t v) {
    memcpy(p, &v, 8);
}

void codec_write_header(const CodecHeader *h, uint8_t *out) {
    size_t size = fs_header_bytes(h->order);
    memset(out, 0, size);
    memcpy(out + FS_H_MAGIC, FS_HEADER_MAGIC, FS_HEADER_MAGIC_BYTES);
    store_u32(out + FS_H_VERSION, h->version);
    store_u32(out + FS_H_BYTES, (uint32_t)size);
    store_u32(out + FS_H_ORDER, h->order);
    store_u32(out + FS_H_VOCAB_SIZE, h->vocab_size);
    store_u32(out + FS_H_ID_BYTES, h->id_bytes);
    store_u32(out + FS_H_BOS_ID, h->bos);
    store_u32(out + FS_H_EOS_ID, h->eos);
    store_u32(out + FS_H_UNK_ID, h->unk);
    store_u64(out + FS_H_META_BYTES, h->meta_bytes);
    store_u32(out + FS_H_META_CHECKSUM, h->meta_checksum);
    store_u32(out + FS_H_JOINT_MIN, h->joint_min);
    memcpy(out + FS_H_VALUE_BOUND, &h->value_bound, 8);
    for (int a = 0; a < FS_N_ARRAYS; a++) {
        store_u64(out + FS_H_ARRAYS + FS_H_ARRAY_ENTRY * a, h->array_bytes[a]);
        store_u32(out + FS_H_ARRAYS + FS_H_ARRAY_ENTRY * a + 8, h->array_checksum[a]);
    }
    for (uint32_t m = 1; m <= h->order; m++)
        store_u64(out + FS_H_COUNTS + 8 * (m - 1), h->counts[m]);
    for (uint32_t m = 2; m <= h->order; m++)
        store_u64(out + FS_H_COUNTS + 8 * h->order + 8 * (m - 2), h->records[m]);
    for (uint32_t m = 2; m <= h->order; m++)
        store_u32(out + fs_header_beta_table(h->order, m), h->beta_tables[m]);
    store_u32(out + size - 4, common_checksum(NULL, 0, out, size - 4));
}

int codec_read_header(const uint8_t *bytes, size_t len, CodecHeader *h) {
    memset(h, 0, sizeof(*h));
    if (len < FS_H_BYTES + 8)
        return -1;
    h->version = load_u32(bytes + FS_H_VERSION);
    h->length = load_u32(bytes + FS_H_BYTES);
    h->checksum = load_u32(bytes + len - 4);
    /* (the other fields are read once the length is the order's: a short header, its
     * checksum forged, ends before them) */
    uint32_t order = len >= FS_H_ORDER + 4 ? load_u32(bytes + FS_H_ORDER) : 0;
    if (order < 1 || order > FS_MAX_ORDER || len != fs_header_bytes(order))
        return -1;
    h->order = order;
    h->vocab_size = load_u32(bytes + FS_H_VOCAB_SIZE);
    h->id_bytes = load_u32(bytes + FS_H_ID_BYTES);
    h->bos = load_u32(bytes + FS_H_BOS_ID);
    h->eos = load_u32(bytes + FS_H_EOS_ID);
    h->unk = load_u32(bytes + FS_H_UNK_ID);
    h->meta_bytes = load_u64(bytes + FS_H_META_BYTES);
    h->meta_checksum = load_u32(bytes + FS_H_META_CHECKSUM);
    h->joint_min = load_u32(bytes + FS_H_JOINT_MIN);
    memcpy(&h->value_bound, bytes + FS_H_VALUE_BOUND, 8);
    for (int a = 0; a < FS_N_ARRAYS; a++) {
        h->array_bytes[a] = load_u64(bytes + FS_H_ARRAYS + FS_H_ARRAY_ENTRY * a);
        h->array_checksum[a] = load_u32(bytes + FS_H_ARRAYS + FS_H_ARRAY_ENTRY * a + 8);
    }
    for (uint32_t m = 1; m <= order; m++)
        h->counts[m] = load_u64(bytes + FS_H_COUNTS + 8 * (m - 1));
    for (uint32_t m = 2; m <= order; m++)
        h->records[m] = load_u64(bytes + FS_H_COUNTS + 8 * order + 8 * (m - 2));
    for (uint32_t m = 2; m <= order; m++)
        h->beta_tables[m] = load_u32(bytes + fs_header_beta_table(order, m));
    return 0;
}

/* ---------------------------------------------------------------- writing records */

size_t codec_pattern_key(int slot, const uint32_t *ids, int n, unsigned id_bytes, uint8_t *key) {
    key[0] = (uint8_t)slot;
    uint8_t *out = key + 1;
    for (int i = 0; i < n; i++)
        for (int b = (int)id_bytes - 1; b >= 0; b--)
            *out++ = (uint8_t)(ids[i] >> (8 * b));
    return (size_t)(out - key);
}

static uint64_t padded(uint64_t size) {
    return (size + 3) / 4 * 4;
}

/* ``key`` minus ``before`` (``key_len`` bytes each, big-endian; ``before`` NULL: zeros)
 * into ``diff``: the bytes of the delta, the fewest that hold it (1 at least), or key_len
 * when ``whole``. */
static unsigned key_delta(const uint8_t *key, const uint8_t *before, size_t key_len, int whole, uint8_t *diff) {
    unsigned borrow = 0;
    for (size_t i = key_len; i-- > 0;) {
        int v = (int)key[i] - (before ? (int)before[i] : 0) - (int)borrow;
        borrow = v < 0;
        diff[i] = (uint8_t)(v + (borrow ? 256 : 0));
    }
    size_t zeros = 0;
    while (zeros + 1 < key_len && diff[zeros] == 0)
        zeros++;
    return whole ? (unsigned)key_len : (unsigned)(key_len - zeros);
}

/* Whether block entry ``i`` of ``r`` holds its whole key (a restart, the block's first). */
static int entry_whole(const CodecRecord *r, uint32_t i) {
    return i == 0 || r->patterns[i].restarts;
}

/* The delta of block entry ``i`` of ``r`` (the whole key at a restart) into ``diff``; its bytes. */
static unsigned entry_delta(const CodecRecord *r, uint32_t i, size_t key_len, uint8_t *diff) {
    int whole = entry_whole(r, i);
    return key_delta(r->patterns[i].key, whole ? NULL : r->patterns[i - 1].key, key_len, whole, diff);
}

/* The bytes of block entry ``i``'s delta, as its pattern holds them (codec_entry_deltas). */
static unsigned entry_delta_bytes(const CodecRecord *r, uint32_t i, size_t key_len) {
    return entry_whole(r, i) ? (unsigned)key_len : r->patterns[i].delta;
}

void codec_entry_deltas(CodecPattern *patterns, uint32_t n, size_t key_len) {
    uint8_t diff[1 + 4 * FS_MAX_ORDER];
    CodecRecord r = {.kind = FS_BLOCK, .patterns = patterns, .n_patterns = n};
    for (uint32_t i = 0; i < n; i++)
        patterns[i].delta = entry_delta(&r, i, key_len, diff);
}

/* Bytes of a block entry of ``count`` words whose data takes ``data`` bytes, beta codes
 * ``beta_width`` bits each (``has_beta``), and whose key's delta takes ``delta`` bytes:
 * its head's when no code gives its fields, its delta and its data (its code aside). */
static uint64_t entry_bytes(uint64_t data, size_t key_len, unsigned delta, uint32_t count, int has_beta,
                            unsigned beta_width) {
    int escaped = fs_entry_code_of(has_beta, delta, key_len, count, beta_width) == FS_ENTRY_ESCAPED;
    return (escaped ? fs_entry_head_bytes(delta, count, has_beta) : 0u) + delta + data;
}

/* What pattern ``p`` of a record of ``order`` holds (codec_pattern_fields's flags). */
static unsigned pattern_flags(const CodecPattern *p, int order) {
    return (p->beta_codes ? PATTERN_HAS_BETA : 0) | (p->joint ? PATTERN_HAS_JOINT : 0) |
           codec_key_flags(p->key, order, p->count, p->joint != NULL);
}

static uint64_t pattern_data_bytes(const CodecPattern *p, int order, unsigned id_bits) {
    return data_bytes(p->count, id_bits, pattern_flags(p, order), p->beta_width);
}

/* ``used`` bytes of a record's value and its padding, its last pattern ``last``. */
static uint64_t with_padding(uint64_t used, const CodecPattern *last, int order) {
    return used + fs_record_padding(used, (pattern_flags(last, order) & PATTERN_VALUES_ELSEWHERE) != 0);
}

uint64_t codec_record_bytes(const CodecRecord *r, size_t key_len, unsigned id_bits) {
    uint64_t head = FS_R_PREVIOUS + key_len;
    if (r->kind == FS_PATTERN && r->n_patterns) {
        const CodecPattern *p = &r->patterns[0];
        return with_padding(head + FS_PATTERN_DATA + pattern_data_bytes(p, r->order, id_bits), p, r->order);
    }
    if (r->kind != FS_BLOCK)
        return padded(head);
    if (!r->n_patterns)  /* (a forger's: its two counts, 0) */
        return padded(head + FS_BLOCK_RESTART_TABLE);
    uint64_t restarts = 0, entries = 0;
    for (uint32_t i = 0, in_group = 0; i < r->n_patterns; i++, in_group++) {
        const CodecPattern *p = &r->patterns[i];
        restarts += p->restarts;
        in_group = p->restarts ? 0 : in_group;
        entries += (in_group % 2 == 0) + entry_bytes(pattern_data_bytes(p, r->order, id_bits), key_len,
                                                     entry_delta_bytes(r, i, key_len), p->count,
                                                     p->beta_codes != NULL, p->beta_width);
    }
    return with_padding(head + FS_BLOCK_RESTART_TABLE + FS_RESTART_BYTES * restarts + entries,
                        &r->patterns[r->n_patterns - 1], r->order);
}

/* Packs ``count`` integers of ``width`` bits (at most 32) from the low bits of each byte up
 * (fs_packed_bytes), into zeroed ``out``: 0, or -1 when one does not fit its width. */
static int write_packed(uint8_t *out, const uint32_t *codes, uint32_t count, unsigned width) {
    for (uint32_t i = 0; i < count; i++) {
        if (width < 32 && (uint64_t)codes[i] >> width)
            return -1;
        uint64_t bit = (uint64_t)i * width;
        for (unsigned b = 0; b < width; b++, bit++)
            out[bit >> 3] |= (uint8_t)(((codes[i] >> b) & 1u) << (bit & 7));
    }
    return 0;
}

/* A pattern's data (format.h) at zeroed ``out``: 0, or -1 when an id, a position or a beta
 * code does not fit its width. */
static int write_data(uint8_t *out, const CodecPattern *p, int order, unsigned id_bits) {
    unsigned flags = pattern_flags(p, order);
    FsPatternLayout at = fs_pattern_layout(p->count, id_bits, p->joint != NULL, (flags & PATTERN_VALUES_ELSEWHERE) != 0);
    if (write_packed(out + at.ids, p->ids, p->count, id_bits) < 0 ||
        (at.position_bits && write_packed(out + at.positions, p->positions, p->count, at.position_bits) < 0) ||
        (p->joint && at.position_bits && write_packed(out + at.joint, p->joint, p->count, at.position_bits) < 0) ||
        (at.values && p->beta_codes &&
         (p->beta_width > 0xFF ||
          write_packed(out + at.beta, p->beta_codes, p->count, p->beta_width > 32 ? 32 : p->beta_width) < 0)))
        return -1;
    if (at.values)
        memcpy(out + at.alpha, p->alpha, 4 * (size_t)p->count);
    return 0;
}

/* A BLOCK's table and entries at ``body``: 0, or -1 with ``*what`` naming what does not fit. */
static int write_block(const CodecRecord *r, size_t key_len, unsigned id_bits, uint8_t *body, const char **what) {
    uint32_t restarts = 0;
    for (uint32_t i = 0; i < r->n_patterns; i++)
        restarts += r->patterns[i].restarts;
    if (r->n_patterns > 0xFFFF || restarts > 0xFFFF) {
        *what = "a block holds at most 65,535 entries";
        return -1;
    }
    store_u16(body + FS_BLOCK_PATTERNS, r->n_patterns);
    store_u16(body + FS_BLOCK_RESTARTS, restarts);
    uint8_t *table = body + FS_BLOCK_RESTART_TABLE, *entries = table + FS_RESTART_BYTES * (size_t)restarts;
    uint8_t *at = entries, *code_byte = NULL, diff[1 + 4 * FS_MAX_ORDER];
    for (uint32_t i = 0, restart = 0, in_group = 0; i < r->n_patterns; i++, in_group++) {
        const CodecPattern *p = &r->patterns[i];
        int has_beta = p->beta_codes != NULL;
        entry_delta(r, i, key_len, diff);
        unsigned delta = entry_delta_bytes(r, i, key_len);  /* (the bytes its size was counted with) */
        if (p->restarts) {
            if (at - entries > 0xFFFF) {
                *what = "a restart lies past 65,535 bytes of entries";
                return -1;
            }
            store_u16(table + FS_RESTART_BYTES * restart++, (uint32_t)(at - entries));
            in_group = 0;
        }
        if (p->joint) {
            *what = "a block entry holds no joint order";
            return -1;
        }
        unsigned code = fs_entry_code_of(has_beta, delta, key_len, p->count, p->beta_width);
        if (in_group % 2 == 0) {  /* the first of a pair: the code byte (zeroed), its low nibble */
            code_byte = at++;
            *code_byte = (uint8_t)code;
        } else {
            *code_byte |= (uint8_t)(code << 4);
        }
        if (code == FS_ENTRY_ESCAPED) {
            *at++ = fs_entry_head(delta, p->count);
            if (delta >= FS_ENTRY_ESCAPED_DELTA)
                *at++ = (uint8_t)delta;
        }
        memcpy(at, diff + key_len - delta, delta);
        at += delta;
        if (code == FS_ENTRY_ESCAPED) {
            if (p->count > 0xFFu) {
                *at++ = FS_ENTRY_WIDE_COUNT;
                store_u32(at, p->count);
                at += 4;
            } else if (p->count > 15u) {
                *at++ = (uint8_t)p->count;
            }
            if (has_beta)
                *at++ = (uint8_t)p->beta_width;
        }
        if (write_data(at, p, r->order, id_bits) < 0) {
            *what = "an id, a position or a beta code does not fit its width";
            return -1;
        }
        at += pattern_data_bytes(p, r->order, id_bits);
    }
    return 0;
}

int codec_write_record(const CodecRecord *r, size_t key_len, unsigned id_bits, const uint8_t *record_key,
                       size_t record_key_len, uint8_t *out, Failure *failure) {
    uint64_t size = codec_record_bytes(r, key_len, id_bits);
    const char *what = NULL;
    memset(out, 0, size);
    out[FS_R_KIND] = (uint8_t)r->kind;
    out[FS_R_FLAGS] = (uint8_t)r->flags;
    if (r->previous)
        memcpy(out + FS_R_PREVIOUS, r->previous, key_len);
    uint8_t *body = out + FS_R_PREVIOUS + key_len;
    if (r->kind == FS_PATTERN && r->n_patterns == 1) {
        store_u32(body + FS_PATTERN_COUNT, r->patterns[0].count);
        body[FS_PATTERN_WIDTH] = (uint8_t)r->patterns[0].beta_width;
        if (write_data(body + FS_PATTERN_DATA, &r->patterns[0], r->order, id_bits) < 0)
            what = "an id, a position or a beta code does not fit its width";
    } else if (r->kind == FS_BLOCK) {
        write_block(r, key_len, id_bits, body, &what);
    } else if (r->n_patterns) {
        what = "a PATTERN record holds one pattern, an END record none";
    }
    if (what) {
        common_fail(failure, FS_EARGUMENT, "cannot write the record: %s", what);
        return -1;
    }
    store_u32(out + FS_R_CHECKSUM, common_checksum(record_key, record_key_len, out + 4, size - 4));
    return 0;
}

size_t codec_end_bytes(size_t key_len) {
    return padded(FS_R_PREVIOUS + key_len);
}

void codec_write_end(size_t key_len, const uint8_t *previous, uint8_t *key, uint8_t *value) {
    CodecRecord end = {.kind = FS_END, .flags = previous ? FS_HAS_PREVIOUS : 0, .previous = previous};
    Failure unused;
    memset(key, FS_END_KEY_BYTE, key_len + 1);
    codec_write_record(&end, key_len, 0, key, key_len + 1, value, &unused);  /* (an END record always fits) */
}

void codec_name_previous(uint8_t *value, size_t value_len, const uint8_t *record_key, size_t key_len,
                         const uint8_t *previous) {
    value[FS_R_FLAGS] |= FS_HAS_PREVIOUS;
    memcpy(value + FS_R_PREVIOUS, previous, key_len);
    store_u32(value + FS_R_CHECKSUM, common_checksum(record_key, key_len, value + 4, value_len - 4));
}

/* ---------------------------------------------------------------- writing a batch */

/* The writer's packing, LMDB's leaf pages of 4 KiB modelled (mdb_cursor_put in append mode):
 * a record takes a pointer and a node in the leaf page it goes to, the node being 8 bytes of
 * header, the key and the value, padded to an even length; a node longer than LMDB's
 * me_nodemax (2038) keeps the number of the overflow pages that hold its value instead.
 * LMDB appends a record to the current leaf page when it fits, else starts a page.  Blocks
 * are sized to fill the room a page has left, so that pages are full, unless that room is
 * less than BLOCK_MIN bytes of value (a block that small costs more structure than it
 * saves): then the block starts a page. */
#define NODE_MAX 2038
#define NODE_HEADER 8
#define OVERFLOW_NUMBER 8
#define PAGE_POINTER 2
#define BLOCK_MIN 64
/* A pattern whose entry (key, count and data) is longer than this gets a PATTERN record of
 * its own, or leads a big block: small blocks then end within a few bytes of the room they
 * fill. */
#define ENTRY_MAX 480
/* LMDB keeps a value too big for its leaf page in overflow pages of its own: a page header,
 * then the value (PAGE_HEADER + value bytes, rounded up to whole pages).  A pattern record
 * there left the rest of its last page empty, 2 KB on average: 36.6 MB, 0.9 bytes per
 * n-gram, of the generated 40M-n-gram model's index.  So such a pattern leads a big block
 * instead, which takes the patterns after it up to BIG_BLOCK_MAX bytes and ends where its
 * last page is fullest (big_block_end); its first read sums its checksum, a few
 * microseconds at that size. */
#define PAGE_BYTES 4096
#define PAGE_HEADER 16
#define BIG_BLOCK_MAX 32768

/* Bytes a record of ``value`` bytes takes in its leaf page. */
static unsigned leaf_bytes(size_t key_len, uint64_t value) {
    uint64_t node = NODE_HEADER + key_len + value;
    if (node > NODE_MAX)
        node = NODE_HEADER + key_len + OVERFLOW_NUMBER;
    return PAGE_POINTER + (unsigned)((node + 1) & ~(uint64_t)1);
}

/* The most value bytes (whole words) of a record that fits ``page_room`` bytes of its leaf
 * page, inline; negative when none does. */
static int64_t value_room(size_t key_len, unsigned page_room) {
    int64_t node = (int64_t)page_room - PAGE_POINTER < NODE_MAX ? (int64_t)page_room - PAGE_POINTER : NODE_MAX;
    int64_t value = node - NODE_HEADER - (int64_t)key_len;
    return value < 0 ? value : value / 4 * 4;
}

/* A key of float32 ``score`` that sorts ascending as the scores sort descending (-0.0 as 0.0). */
static uint32_t descending_key(float score) {
    float zeroed = score + 0.0f;
    uint32_t bits;
    memcpy(&bits, &zeroed, 4);
    uint32_t ascending = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
    return ~ascending;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The positions 0 ... count - 1 of ``scores`` by score descending, ties by lower position,
 * into ``order`` (``scratch``: room for ``count``). */
static void order_by_score(const float *scores, uint32_t count, uint64_t *scratch, uint32_t *order) {
    for (uint32_t i = 0; i < count; i++)
        scratch[i] = (uint64_t)descending_key(scores[i]) << 32 | i;
    if (count <= 16) {
        for (uint32_t i = 1; i < count; i++)
            for (uint32_t j = i; j > 0 && scratch[j - 1] > scratch[j]; j--) {
                uint64_t swap = scratch[j];
                scratch[j] = scratch[j - 1];
                scratch[j - 1] = swap;
            }
    } else {
        qsort(scratch, count, sizeof(*scratch), compare_u64);
    }
    for (uint32_t i = 0; i < count; i++)
        order[i] = (uint32_t)scratch[i];
}

/* What planning a batch knows of each pattern (a group of rows). */
typedef struct {
    size_t first;               /* its first row */
    uint32_t count;
    unsigned delta;             /* bytes of its key's delta from the pattern before's */
    uint64_t data;              /* bytes of its data, joint order aside */
    unsigned beta_width;        /* of its beta codes */
    int alone, joint, periodic;
    int elsewhere;              /* it stores its values elsewhere (fs_values_elsewhere) */
    int pair_first;             /* the first of a pair of entries (its code byte), counted from its run's first */
    unsigned run_at;            /* its place in its run of small patterns, modulo RUN_PHASES */
} Group;

/* A run's places repeat every this many patterns, as far as the layout is concerned (the
 * restarts' period and the pairs'): what a batch hands the next (CodecBatch.run_phase). */
#define RUN_PHASES (2 * FS_BLOCK_RESTART)

/* Groups the rows by pattern: each group's first row and count, and its key into b->keys. */
static Group *group_rows(CodecBatch *b, const CodecRows *rows) {
    size_t fixed = (size_t)rows->order - 1, key_len = b->key_len;
    size_t n_groups = 0;
    for (size_t i = 0; i < rows->n; i++)
        n_groups += i == 0 || memcmp(rows->ids + i * rows->order, rows->ids + (i - 1) * rows->order, 4 * fixed);
    Group *groups = common_malloc_big((n_groups + 1) * sizeof(Group));
    b->keys = common_malloc_big(n_groups * key_len + 1);
    if (!groups || !b->keys) {
        free(groups);
        return NULL;
    }
    size_t g = 0;
    for (size_t i = 0; i < rows->n; i++) {
        if (i && !memcmp(rows->ids + i * rows->order, rows->ids + (i - 1) * rows->order, 4 * fixed)) {
            groups[g - 1].count++;
            continue;
        }
        uint8_t *key = b->keys + g * key_len, diff[1 + 4 * FS_MAX_ORDER];
        codec_pattern_key(rows->slot, rows->ids + i * rows->order, (int)fixed, rows->id_bytes, key);
        groups[g] = (Group){.first = i, .count = 1, .delta = key_delta(key, g ? key - key_len : NULL, key_len, g == 0,
                                                                       diff)};
        g++;
    }
    b->n_groups = n_groups;
    return groups;
}

/* Which patterns are alone in PATTERN records (big ones, long entries, joint orders) and
 * which restart a group periodically (every FS_BLOCK_RESTART of a run of small patterns,
 * counted from the run's first, so that a group's entries pair up as the run's do; a
 * batch's first pattern is at rows->run_phase of its run, which the batch before began). */
static void classify(Group *groups, size_t n_groups, const CodecRows *rows, const uint32_t *beta_codes,
                     size_t key_len) {
    for (size_t g = 0; g < n_groups; g++) {
        Group *p = &groups[g];
        uint32_t largest = 0;
        for (uint32_t i = 0; beta_codes && i < p->count; i++)
            largest = beta_codes[p->first + i] > largest ? beta_codes[p->first + i] : largest;
        p->joint = rows->unigram_alpha && p->count >= rows->joint_min;
        p->elsewhere = fs_values_elsewhere(p->count, (unsigned)rows->slot, (unsigned)rows->order, p->joint);
        p->beta_width = p->elsewhere ? 0u : fs_beta_width(largest);
        p->data = data_bytes(p->count, fs_id_bits(rows->vocab_size),
                             (rows->has_beta ? PATTERN_HAS_BETA : 0) | (p->elsewhere ? PATTERN_VALUES_ELSEWHERE : 0),
                             p->beta_width);
        p->alone = p->count > FS_BLOCK_MAX_COUNT || p->joint ||
                   entry_bytes(p->data, key_len, (unsigned)key_len, p->count, rows->has_beta, p->beta_width) > ENTRY_MAX;
    }
    for (size_t g = 0, at = rows->run_phase % RUN_PHASES; g < n_groups; g++) {
        if (groups[g].alone || (g && groups[g - 1].alone))
            at = 0;
        else if (g)
            at = (at + 1) % RUN_PHASES;
        groups[g].run_at = (unsigned)at;
        groups[g].periodic = at % FS_BLOCK_RESTART == 0;
        groups[g].pair_first = at % 2 == 0;
    }
}

/* What block entry ``p`` takes in a block that it does not start (its code byte and restart
 * offset counted where it begins a pair or restarts periodically). */
static int64_t modelled_bytes(const Group *p, size_t key_len, int has_beta) {
    unsigned delta = p->periodic ? (unsigned)key_len : p->delta;
    return (int64_t)entry_bytes(p->data, key_len, delta, p->count, has_beta, p->beta_width) + p->pair_first +
           FS_RESTART_BYTES * p->periodic;
}

/* The last group after ``i`` whose entries fit ``room`` bytes in a block that ``i`` starts
 * (``i`` itself when even its entry does not fit). */
static size_t fitting_end(const Group *groups, const int64_t *total, size_t n, size_t i, int64_t room, size_t key_len,
                          int has_beta) {
    const Group *p = &groups[i];
    /* (the block's first entry restarts: its key is whole, a restart offset and a code byte
     * counted when it would not restart where it is, and its group may pair up the other
     * way round from the run: a code byte more) */
    int64_t extra = 0;
    if (!p->periodic)
        extra = (int64_t)entry_bytes(p->data, key_len, (unsigned)key_len, p->count, has_beta, p->beta_width) + 1 +
                FS_RESTART_BYTES + 1 - modelled_bytes(p, key_len, has_beta);
    int64_t limit = total[i] + room - extra;
    size_t low = i, high = n + 1;  /* the last j with total[j] <= limit */
    while (high - low > 1) {
        size_t mid = low + (high - low) / 2;
        if (total[mid] <= limit)
            low = mid;
        else
            high = mid;
    }
    return low;
}

/* Bytes of the last of its overflow pages that a value of ``value`` bytes leaves empty. */
static uint64_t overflow_slack(uint64_t value) {
    uint64_t pages = (PAGE_HEADER + value + PAGE_BYTES - 1) / PAGE_BYTES;
    return pages * PAGE_BYTES - PAGE_HEADER - value;
}

/* Does a PATTERN record of group ``i`` alone go to overflow pages? */
static int overflows_alone(CodecBatch *b, size_t i, int order, unsigned id_bits) {
    CodecRecord alone = {.kind = FS_PATTERN, .order = order, .patterns = b->patterns + i, .n_patterns = 1};
    return NODE_HEADER + b->key_len + codec_record_bytes(&alone, b->key_len, id_bits) > NODE_MAX;
}

/* The end of the big block that group ``i`` leads: of the ends that keep it within
 * BIG_BLOCK_MAX bytes (i + 1 whatever its size), before the next joint order (only a PATTERN
 * record holds one) and with every restart within the reach of the block's table, the one
 * that leaves least of its last page empty, the first of those.  *open: the ends went on
 * past the batch's groups (the next batch's may end it elsewhere).  (The block's first entry
 * restarts where its run does, as a pattern alone begins a run: total counts its bytes.) */
static size_t big_block_end(const Group *groups, const int64_t *total, size_t n, size_t i, size_t key_len,
                            int *open) {
    uint64_t head = FS_R_PREVIOUS + key_len + FS_BLOCK_RESTART_TABLE, best_slack = UINT64_MAX;
    size_t best = i + 1;
    *open = 0;
    for (size_t end = i + 1; end <= n; end++) {
        uint64_t used = head + (uint64_t)(total[end] - total[i]);
        uint64_t value = used + fs_record_padding(used, groups[end - 1].elsewhere);
        if (end > i + 1 && value > BIG_BLOCK_MAX)
            break;
        uint64_t slack = overflow_slack(value);
        if (slack < best_slack) {
            best = end;
            best_slack = slack;
        }
        *open = end == n;
        if (end == n || slack == 0 || groups[end].joint || end - i == 0xFFFF ||
            (groups[end].periodic && total[end] - total[i] > 0xFFFF))
            break;
    }
    return best;
}

/* The records of the groups: a PATTERN record for each pattern alone (a big block instead
 * where that record would go to overflow pages, above), the others packed into BLOCK records
 * that fill the leaf pages (above), a block ending before the next pattern alone.  Fills
 * b->records (patterns and kind, the first entry of each block restarting; flags and
 * previous keys later), b->offsets (where each record's value starts: their sizes do not
 * depend on the flags), b->page_room and b->groups_done; their number.  With rows->more,
 * the last block is left out (b->groups_done stops before it), and so is a big block whose
 * end the batch's last groups decided, and what follows it: the next batch's rows may still
 * go into them, and a block is the same whichever batch it began in. */
static size_t pack(CodecBatch *b, const Group *groups, const CodecRows *rows, int64_t *total, size_t *run_end) {
    size_t n = b->n_groups, key_len = b->key_len;
    /* what each entry takes in a block that it does not start, its restart offset counted
     * where it restarts periodically */
    total[0] = 0;
    for (size_t g = 0; g < n; g++)
        total[g + 1] = total[g] + modelled_bytes(&groups[g], key_len, rows->has_beta);
    run_end[n] = n;
    for (size_t g = n; g-- > 0;)
        run_end[g] = groups[g].alone ? g : run_end[g + 1];
    /* (and room for the padding after an id that may end the block: fs_record_padding) */
    int64_t block_head = (int64_t)(FS_R_PREVIOUS + key_len + FS_BLOCK_RESTART_TABLE + FS_ID_TAIL);
    unsigned page = rows->page_room, id_bits = fs_id_bits(rows->vocab_size);
    size_t r = 0, last = 0;
    unsigned page_before_last = page;
    b->offsets[0] = 0;
    b->groups_done = n;
    for (size_t i = 0; i < n; r++) {
        last = i;
        page_before_last = page;
        size_t end = i + 1;
        int kind = FS_PATTERN;
        if (groups[i].alone && !groups[i].joint && overflows_alone(b, i, rows->order, id_bits)) {
            int open;
            end = big_block_end(groups, total, n, i, key_len, &open);
            if (open && rows->more) {
                b->groups_done = i;
                break;
            }
            kind = FS_BLOCK;
        } else if (!groups[i].alone) {
            int64_t room = value_room(key_len, page);
            end = room >= BLOCK_MIN ? fitting_end(groups, total, n, i, room - block_head, key_len, rows->has_beta) : i;
            if (end == i) {  /* (not even the first entry fits the page's rest: a block starts a page) */
                page = CODEC_FRESH_PAGE;
                end = fitting_end(groups, total, n, i, value_room(key_len, page) - block_head, key_len, rows->has_beta);
            }
            end = end > i ? end : i + 1;
            end = end < run_end[i] ? end : run_end[i];  /* (the next pattern alone, after i) */
            kind = FS_BLOCK;
        }
        CodecRecord *record = &b->records[r];
        *record = (CodecRecord){.kind = kind, .order = rows->order, .patterns = b->patterns + i,
                                .n_patterns = (uint32_t)(end - i)};
        b->patterns[i].restarts = 1;
        uint64_t bytes = codec_record_bytes(record, key_len, id_bits);
        b->offsets[r + 1] = b->offsets[r] + bytes;
        unsigned taken = leaf_bytes(key_len, bytes);
        page = taken <= page ? page - taken : CODEC_FRESH_PAGE - taken;
        i = end;
    }
    if (b->groups_done < n) {  /* (a big block left open: the records before it stand) */
        b->page_room = page;
        return r;
    }
    if (rows->more && r && b->records[r - 1].kind == FS_BLOCK) {
        r--;
        page = page_before_last;
        b->groups_done = last;
    }
    b->page_room = page;
    return r;
}

/* The slot of ``index`` that holds the value of float32 bits ``bits``, or the empty one where
 * it would go. */
static uint32_t beta_slot(const CodecBetaIndex *index, uint32_t bits) {
    uint32_t at = (bits * 0x9E3779B1u) >> index->shift;
    while (index->slots[at] && index->slots[at] >> 32 != bits)
        at = (at + 1) & index->mask;
    return at;
}

int codec_beta_index(CodecBetaIndex *index, const float *table, uint32_t len, Failure *failure) {
    unsigned shift = 31;  /* 2^(32 - shift) slots, at least twice the table's entries */
    while (shift > 1 && (uint64_t)1 << (32 - shift) < 2 * (uint64_t)len)
        shift--;
    *index = (CodecBetaIndex){NULL, (1u << (32 - shift)) - 1, shift};
    index->slots = calloc((size_t)index->mask + 1, sizeof(uint64_t));
    if (!index->slots) {
        common_fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    for (uint32_t c = 0; c < len; c++) {
        uint32_t bits;
        memcpy(&bits, &table[c], 4);
        uint32_t at = beta_slot(index, bits);
        if (!index->slots[at])  /* (a value the table repeats keeps its first code) */
            index->slots[at] = (uint64_t)bits << 32 | (c + 1u);
    }
    return 0;
}

void codec_beta_index_free(CodecBetaIndex *index) {
    free(index->slots);
    index->slots = NULL;
}

/* Each row's beta code (the entry of the order's back-off table that holds its beta: the
 * same float32 bits) into b->beta_codes, through the table's index: 0, or -1 with the
 * failure set (a beta is not in the table). */
static int code_betas(CodecBatch *b, const CodecRows *rows, Failure *failure) {
    const CodecBetaIndex *index = rows->beta_index;
    b->beta_codes = common_malloc_big((rows->n + 1) * sizeof(uint32_t));
    if (!b->beta_codes) {
        common_fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < rows->n; i++) {
        uint32_t bits;
        memcpy(&bits, &rows->beta[i], 4);
        uint32_t at = beta_slot(index, bits);
        if (!index->slots[at]) {
            common_fail(failure, FS_EARGUMENT, "cannot write the records: back-off weight %g is not in the "
                        "order's back-off table", (double)rows->beta[i]);
            return -1;
        }
        b->beta_codes[i] = (uint32_t)index->slots[at] - 1u;
    }
    return 0;
}

int codec_plan_batch(CodecBatch *b, const CodecRows *rows, Failure *failure) {
    memset(b, 0, sizeof(*b));
    if (rows->has_beta && code_betas(b, rows, failure) < 0) {
        codec_free_batch(b);
        return -1;
    }
    b->rows = rows;
    b->key_len = fs_key_bytes((unsigned)rows->order, rows->id_bytes);
    Group *groups = group_rows(b, rows);
    size_t n = b->n_groups;
    int64_t *total = common_malloc_big((n + 1) * sizeof(int64_t));
    size_t *run_end = common_malloc_big((n + 1) * sizeof(size_t));
    b->patterns = common_malloc_big((n + 1) * sizeof(CodecPattern));
    b->records = common_malloc_big((n + 1) * sizeof(CodecRecord));
    b->offsets = common_malloc_big((n + 1) * sizeof(uint64_t));
    b->positions = common_malloc_big((rows->n + 1) * sizeof(uint32_t));
    if (!groups || !total || !run_end || !b->patterns || !b->records || !b->offsets || !b->positions)
        goto no_memory;
    for (size_t g = 1; g < n; g++)  /* (a key is written as its delta from the one before) */
        if (memcmp(b->keys + g * b->key_len, b->keys + (g - 1) * b->key_len, b->key_len) <= 0) {
            common_fail(failure, FS_EARGUMENT, "cannot write the records: the rows are not sorted by pattern key");
            free(groups);
            free(total);
            free(run_end);
            codec_free_batch(b);
            return -1;
        }
    classify(groups, n, rows, b->beta_codes, b->key_len);
    int any_joint = 0;
    for (size_t g = 0; g < n; g++) {
        const Group *p = &groups[g];
        any_joint |= p->joint;
        b->patterns[g] = (CodecPattern){
            .key = b->keys + g * b->key_len, .count = p->count, .restarts = p->periodic, .delta = p->delta,
            .ids = NULL, .positions = b->positions + p->first, .alpha = rows->alpha + p->first,
            .beta_codes = rows->has_beta ? b->beta_codes + p->first : NULL, .beta_width = p->beta_width};
    }
    if (any_joint) {
        if (!(b->joint = common_malloc_big(rows->n * sizeof(uint32_t))))
            goto no_memory;
        for (size_t g = 0; g < n; g++)
            if (groups[g].joint)
                b->patterns[g].joint = b->joint + groups[g].first;
    }
    b->n_records = pack(b, groups, rows, total, run_end);
    size_t done = b->groups_done;
    b->rows_done = done < n ? groups[done].first : rows->n;
    b->run_phase = done < n ? groups[done].run_at : 0;
    /* each record's flags and the key before it; the parts its bytes go to */
    uint64_t entry_keys = 0;
    for (size_t r = 0; r < b->n_records; r++) {
        CodecRecord *record = &b->records[r];
        CodecPattern *first = (CodecPattern *)record->patterns;
        record->previous = r ? b->records[r - 1].patterns[b->records[r - 1].n_patterns - 1].key : rows->previous;
        record->flags = (record->previous ? FS_HAS_PREVIOUS : 0) |
                        (record->kind == FS_PATTERN && first->joint ? FS_HAS_JOINT : 0);
        if (record->kind == FS_BLOCK)
            for (uint32_t i = 0; i < record->n_patterns; i++)
                entry_keys += entry_delta_bytes(record, i, b->key_len);
    }
    b->values_bytes = b->offsets[b->n_records];
    uint64_t *parts = b->parts;
    for (size_t g = 0; g < done; g++) {
        parts[CODEC_PART_ids] += fs_packed_bytes(groups[g].count, fs_id_bits(rows->vocab_size));
        parts[CODEC_PART_alpha] += groups[g].elsewhere ? 0 : 4u * groups[g].count;
        if (rows->has_beta)
            parts[CODEC_PART_beta] += fs_packed_bytes(groups[g].count, groups[g].beta_width);
        uint64_t positions = fs_packed_bytes(groups[g].count, fs_position_bits(groups[g].count));
        parts[CODEC_PART_positions] += positions;
        parts[CODEC_PART_joint] += groups[g].joint ? positions : 0;
    }
    parts[CODEC_PART_keys] = b->n_records * b->key_len + entry_keys;
    parts[CODEC_PART_structure] = b->values_bytes - parts[CODEC_PART_ids] - parts[CODEC_PART_positions] -
                                  parts[CODEC_PART_alpha] - parts[CODEC_PART_beta] - parts[CODEC_PART_joint] - entry_keys;
    for (size_t i = 0; i < b->rows_done; i++) {
        double alpha = fabs((double)rows->alpha[i]), beta = rows->has_beta ? fabs((double)rows->beta[i]) : 0.0;
        if (isfinite(alpha) && alpha > b->value_bound)
            b->value_bound = alpha;
        if (isfinite(beta) && beta > b->value_bound)
            b->value_bound = beta;
    }
    free(groups);
    free(total);
    free(run_end);
    return 0;
no_memory:
    free(groups);
    free(total);
    free(run_end);
    codec_free_batch(b);
    common_fail(failure, FS_ENOMEM, "out of memory");
    return -1;
}

int codec_write_batch(CodecBatch *b, uint8_t *keys, uint64_t *offsets, uint8_t *values, Failure *failure) {
    const CodecRows *rows = b->rows;
    uint32_t *words = common_malloc_big((rows->n + 1) * sizeof(uint32_t));
    uint64_t *scratch = common_malloc_big((rows->n + 1) * sizeof(uint64_t));
    float *keyed = common_malloc_big((rows->n + 1) * sizeof(float));
    if (!words || !scratch || !keyed) {
        free(words);
        free(scratch);
        free(keyed);
        common_fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < rows->n; i++)
        words[i] = rows->ids[i * rows->order + rows->order - 1];
    int rc = 0;
    for (size_t g = 0; g < b->groups_done && rc == 0; g++) {
        CodecPattern *p = &b->patterns[g];
        size_t first = (size_t)(p->positions - b->positions);
        p->ids = words + first;
        order_by_score(p->alpha, p->count, scratch, b->positions + first);
        if (p->joint) {
            for (uint32_t i = 0; i < p->count && rc == 0; i++) {
                if (p->ids[i] >= rows->n_unigrams) {
                    common_fail(failure, FS_EARGUMENT, "cannot write the records: word id %u is past the unigrams",
                            p->ids[i]);
                    rc = -1;
                    break;
                }
                keyed[i] = fs_joint_key(rows->unigram_alpha[p->ids[i]], p->alpha[i]);
            }
            if (rc < 0)
                break;
            order_by_score(keyed, p->count, scratch, b->joint + first);
        }
    }
    for (size_t r = 0; r < b->n_records && rc == 0; r++) {
        const CodecRecord *record = &b->records[r];
        const uint8_t *key = record->patterns[record->n_patterns - 1].key;
        memcpy(keys + r * b->key_len, key, b->key_len);
        offsets[r] = b->offsets[r];
        rc = codec_write_record(record, b->key_len, fs_id_bits(rows->vocab_size), key, b->key_len,
                                values + b->offsets[r], failure);
    }
    offsets[b->n_records] = b->offsets[b->n_records];
    free(words);
    free(scratch);
    free(keyed);
    return rc;
}

void codec_free_batch(CodecBatch *b) {
    free(b->keys);
    free(b->beta_codes);
    free(b->positions);
    free(b->joint);
    free(b->patterns);
    free(b->records);
    free(b->offsets);
    memset(b, 0, sizeof(*b));
}
