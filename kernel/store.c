/* The open index: see store.h. */
#define _GNU_SOURCE  /* memmem */
#include "store.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Times opening is tried again when a rebuild swaps the index in at that very moment. */
#define OPEN_ATTEMPTS 20

void fail(Failure *failure, int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(failure->message, sizeof(failure->message), format, args);
    va_end(args);
    failure->code = code;
}

static int lmdb_failed(Failure *failure, int rc, const char *what) {
    fail(failure, FS_ELMDB, "%s (%s)", what, mdb_strerror(rc));
    return -1;
}

int store_read_failed(Failure *failure, MDB_txn *txn, int rc, const char *db_format, ...) {
    char db[64];
    va_list args;
    va_start(args, db_format);
    vsnprintf(db, sizeof(db), db_format, args);
    va_end(args);
    size_t pgno;
    const char *what = txn ? mdb_txn_damage(txn, &pgno) : NULL;
    if (what)  /* (also when a later call found the transaction unusable: MDB_BAD_TXN) */
        fail(failure, FS_EDAMAGED, "damaged index: %s: LMDB page %zu: %s", db, pgno, what);
    else
        fail(failure, FS_EDAMAGED, "damaged index: %s (%s)", db, mdb_strerror(rc));
    return -1;
}

static int damaged(Failure *failure, const char *what) {
    fail(failure, FS_EDAMAGED, "damaged index: %s", what);
    return -1;
}

uint32_t fs_checksum(const uint8_t *key, size_t key_len, const uint8_t *body, size_t body_len) {
    uint32_t total = 0, weight = FS_VALUE_WEIGHT, step = 2u * FS_VALUE_WEIGHT;
    size_t whole = body_len / 4;
    for (size_t i = 0; i < whole; i++, weight += step)  /* (2i + 1) * w mod 2^32 */
        total += load_u32(body + 4 * i) * weight;
    if (body_len % 4) {
        uint8_t last[4] = {0, 0, 0, 0};
        memcpy(last, body + 4 * whole, body_len % 4);
        total += load_u32(last) * weight;
    }
    weight = FS_KEY_WEIGHT;
    step = 2u * FS_KEY_WEIGHT;
    for (size_t j = 0; j < key_len; j++, weight += step)
        total += key[j] * weight;
    return total;
}

/* ---------------------------------------------------------------- opening */

/* Opens data.mdb in ``path``, sure of which file it opened (a rebuild may swap the
 * directory at any moment, indexer/publish.py: the inode before opening must be the
 * opened file's) and that it is whole (reading a page past its end would fault). */
static int open_environment(Store *s, const char *path, Failure *failure) {
    struct stat where;
    if (stat(path, &where) < 0) {
        fail(failure, FS_ENOTINDEX, errno == ENOENT ? "does not exist" : "cannot be read (%s)", strerror(errno));
        return -1;
    }
    if (!S_ISDIR(where.st_mode)) {
        fail(failure, FS_ENOTINDEX, "is not a directory (an index is the directory 'fastsubs-index build' makes)");
        return -1;
    }
    char data[4096];
    if (snprintf(data, sizeof(data), "%s/data.mdb", path) >= (int)sizeof(data)) {
        fail(failure, FS_ENOTINDEX, "the path is too long");
        return -1;
    }
    for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
        struct stat before, opened;
        if (stat(data, &before) < 0) {
            fail(failure, FS_ENOTINDEX, "not a fastsubs index (no data.mdb in it)");
            return -1;
        }
        int rc = mdb_env_create(&s->env);
        if (rc)
            return lmdb_failed(failure, rc, "cannot create an LMDB environment");
        mdb_env_set_maxdbs(s->env, FS_MAX_ORDER + 4);
        /* The map is the file, not the map size its meta page asks for (the builder's is
         * 1 TiB): LMDB's page numbers are then checked against the file's pages (mdb.c
         * keeps a transaction's last page inside the map), and a damaged map size is not
         * followed.  A published index never grows. */
        if (before.st_size > 0)
            mdb_env_set_mapsize(s->env, (size_t)before.st_size);
        /* Read-only, no lock file (nothing writes a published index), read transactions
         * not tied to threads.  The OS reads ahead around the pages a search touches. */
        rc = mdb_env_open(s->env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0444);
        mdb_filehandle_t fd;
        int same = rc == 0 && mdb_env_get_fd(s->env, &fd) == 0 && fstat(fd, &opened) == 0 &&
                   opened.st_ino == before.st_ino && opened.st_dev == before.st_dev;
        if (!same) {
            struct stat now;
            int swapped = rc == 0 || stat(data, &now) < 0 || now.st_ino != before.st_ino;
            const char *damage = mdb_env_damage(s->env);  /* what mdb.c's checks of the meta pages found */
            if (!swapped && damage)
                fail(failure, FS_EDAMAGED, "damaged index: LMDB's meta pages: %s", damage);
            else if (!swapped)
                fail(failure, FS_EDAMAGED, "damaged index: data.mdb cannot be read as LMDB (truncated or "
                     "overwritten?) (%s)", mdb_strerror(rc));
            mdb_env_close(s->env);
            s->env = NULL;
            if (swapped)
                continue;
            return -1;
        }
        MDB_envinfo info;
        MDB_stat stat_;
        mdb_env_info(s->env, &info);
        mdb_env_stat(s->env, &stat_);
        unsigned long long needed = ((unsigned long long)info.me_last_pgno + 1) * stat_.ms_psize;
        if ((unsigned long long)opened.st_size < needed) {
            fail(failure, FS_EDAMAGED, "damaged index: data.mdb is truncated (%lld bytes, its pages need %llu)",
                 (long long)opened.st_size, needed);
            return -1;
        }
        return 0;
    }
    fail(failure, FS_ENOTINDEX, "the index kept changing while being opened (rebuilt in a loop?)");
    return -1;
}

/* Why there is no metadata record (no meta database, or nothing in it).  A build writes it
 * in its last transaction and publishes the index only then, so an environment holding an
 * index's other databases without it is damaged: a flipped byte in one of LMDB's meta pages
 * has LMDB read an older transaction of the build, or the wrong root page (the main
 * database then disagrees with its own count of entries).  Without them it is no index. */
static int no_metadata(Store *s, Failure *failure) {
    MDB_dbi main_db;
    MDB_stat declared;
    MDB_cursor *cursor;
    MDB_val k, v;
    size_t entries = 0;
    int ours = 0;
    int rc = mdb_dbi_open(s->txn, NULL, 0, &main_db);
    if (!rc)
        rc = mdb_stat(s->txn, main_db, &declared);
    if (!rc)
        rc = mdb_cursor_open(s->txn, main_db, &cursor);
    if (rc)
        return lmdb_failed(failure, rc, "damaged index");
    for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
        entries++;
        ours |= (k.mv_size == strlen(FS_ARRAYS_DB) && !memcmp(k.mv_data, FS_ARRAYS_DB, k.mv_size)) ||
                (k.mv_size > 8 && !memcmp(k.mv_data, FS_PATTERNS_DB, 8));  /* "patterns%d" */
    }
    mdb_cursor_close(cursor);
    if (rc != MDB_NOTFOUND)
        return lmdb_failed(failure, rc, "damaged index");
    if (ours || entries != declared.ms_entries)
        return damaged(failure, "its databases are there but not its metadata (bytes flipped in data.mdb?)");
    fail(failure, FS_ENOTINDEX, "not a fastsubs index (no metadata)");
    return -1;
}

static int open_dbi(Store *s, const char *name, MDB_dbi *dbi, int code, Failure *failure) {
    int rc = mdb_dbi_open(s->txn, name, 0, dbi);
    unsigned int flags = 0, main_flags = 0;
    MDB_dbi main_db;
    if (rc == MDB_NOTFOUND) {
        /* (LMDB finds no database in a main database whose flags say it holds no names) */
        if (mdb_dbi_open(s->txn, NULL, 0, &main_db) == 0)
            mdb_dbi_flags(s->txn, main_db, &main_flags);
        if (main_flags)
            fail(failure, FS_EDAMAGED, "damaged index: LMDB's main database has flags (0x%x); an index's has none",
                 main_flags);
        else if (code == FS_ENOTINDEX)
            return no_metadata(s, failure);
        else
            fail(failure, code, "damaged index: database %s is missing", name);
        return -1;
    }
    if (rc)
        return store_read_failed(failure, s->txn, rc, "the main database (opening %s)", name);
    /* an index's databases are plain: flags would change how LMDB reads their pages */
    if (mdb_dbi_flags(s->txn, *dbi, &flags) || flags) {
        fail(failure, FS_EDAMAGED, "damaged index: database %s has LMDB flags (0x%x); an index's have none", name,
             flags);
        return -1;
    }
    return 0;
}

/* The value of ``key`` in ``dbi`` (named ``db``) through the store's transaction: 1 found,
 * 0 not, -1 on error. */
static int get(Store *s, MDB_dbi dbi, const char *db, const char *key, MDB_val *value, Failure *failure) {
    MDB_val k = {strlen(key), (void *)key};
    int rc = mdb_get(s->txn, dbi, &k, value);
    if (rc == MDB_NOTFOUND)
        return 0;
    return rc ? store_read_failed(failure, s->txn, rc, "%s", db) : 1;
}

/* Why an environment with a metadata database but no header is no index of this format:
 * the msgpack map of formats 1 and 2 carries the magic and its version. */
static int no_header(Store *s, MDB_dbi meta, Failure *failure) {
    MDB_val value;
    int found = get(s, meta, FS_META_DB, FS_META_KEY, &value, failure);
    if (found < 0)
        return -1;
    static const char magic[] = FS_META_MAGIC, version_key[] = "\xae" "format_version";  /* msgpack str */
    if (!found)
        return no_metadata(s, failure);
    if (!memmem(value.mv_data, value.mv_size, magic, sizeof(magic) - 1)) {
        fail(failure, FS_ENOTINDEX, "not a fastsubs index (no metadata)");
        return -1;
    }
    const uint8_t *at = memmem(value.mv_data, value.mv_size, version_key, sizeof(version_key) - 1);
    size_t after = at ? (size_t)(at - (const uint8_t *)value.mv_data) + sizeof(version_key) - 1 : value.mv_size;
    if (after < value.mv_size && ((const uint8_t *)value.mv_data)[after] < FS_FORMAT_VERSION)
        fail(failure, FS_EVERSION, "index format version %d is older than this fastsubs reads (%d); rebuild it "
             "with this version", ((const uint8_t *)value.mv_data)[after], FS_FORMAT_VERSION);
    else if (after < value.mv_size)  /* the metadata of a format with a header: the header is lost */
        damaged(failure, "its header record is missing (bytes flipped?)");
    else
        fail(failure, FS_EVERSION, "an index of an older format than this fastsubs reads (%d); rebuild it with "
             "this version", FS_FORMAT_VERSION);
    return -1;
}

/* Reads and checks the header (its checksum before any field it holds, but the magic). */
static int read_header(Store *s, MDB_dbi meta, const uint8_t **header, Failure *failure) {
    MDB_val value;
    int found = get(s, meta, FS_META_DB, FS_HEADER_KEY, &value, failure);
    if (found <= 0)
        return found < 0 ? -1 : no_header(s, meta, failure);
    const uint8_t *h = value.mv_data;
    size_t len = value.mv_size;
    if (len < FS_H_BYTES + 8 || memcmp(h + FS_H_MAGIC, FS_HEADER_MAGIC, FS_HEADER_MAGIC_BYTES)) {
        fail(failure, FS_ENOTINDEX, "not a fastsubs index (wrong magic)");
        return -1;
    }
    if (load_u32(h + FS_H_BYTES) != len || len % 4 || fs_checksum(NULL, 0, h, len - 4) != load_u32(h + len - 4))
        return damaged(failure, "the header fails its checksum (bytes flipped?)");
    uint32_t version = load_u32(h + FS_H_VERSION);
    if (version != FS_FORMAT_VERSION) {
        int newer = version > FS_FORMAT_VERSION;
        fail(failure, FS_EVERSION, "index format version %u is %s than this fastsubs reads (%d); rebuild it with "
             "this version%s", version, newer ? "newer" : "older", FS_FORMAT_VERSION,
             newer ? " or upgrade fastsubs" : "");
        return -1;
    }
    /* (the other fields are read once the length is the order's: a short header, its
     * checksum forged, ends before them) */
    uint32_t order = load_u32(h + FS_H_ORDER), vocab_size = 0;
    if (order >= 1 && order <= FS_MAX_ORDER && len == FS_HEADER_BYTES(order))
        vocab_size = load_u32(h + FS_H_VOCAB_SIZE);
    if (vocab_size < 1 || vocab_size == FS_NO_WORD || load_u32(h + FS_H_ID_BYTES) != FS_ID_BYTES(vocab_size))
        return damaged(failure, "the header's fields disagree (order, vocabulary size, id width)");
    s->order = (int)order;
    s->vocab_size = vocab_size;
    s->id_bytes = FS_ID_BYTES(vocab_size);
    s->id_mask = width_mask(s->id_bytes);
    s->bos = load_u32(h + FS_H_BOS_ID);
    s->eos = load_u32(h + FS_H_EOS_ID);
    s->unk = load_u32(h + FS_H_UNK_ID);
    for (uint32_t m = 1; m <= order; m++)
        s->counts[m] = load_u64(h + FS_H_COUNTS + 8 * (m - 1));
    for (uint32_t m = 2; m <= order; m++)
        s->records[m] = load_u64(h + FS_H_COUNTS + 8 * order + 8 * (m - 2));
    if (s->counts[1] != vocab_size)
        return damaged(failure, "the header's unigram count is not its vocabulary size");
    *header = h;
    return 0;
}

/* Every array and the metadata, each against its length and checksum in the header. */
static int read_arrays(Store *s, MDB_dbi arrays, MDB_dbi meta, const uint8_t *h, Failure *failure) {
    static const char *names[] = FS_ARRAY_NAMES;
    static const size_t item_bytes[FS_N_ARRAYS] = FS_ARRAY_ITEM_BYTES;
    const void *data[FS_N_ARRAYS];
    size_t v = s->vocab_size;
    for (int a = 0; a < FS_N_ARRAYS; a++) {
        const uint8_t *entry = h + FS_H_ARRAYS + FS_H_ARRAY_ENTRY * a;
        MDB_val value;
        int found = get(s, arrays, FS_ARRAYS_DB, names[a], &value, failure);
        if (found < 0)
            return -1;
        size_t items = a == FS_ARRAY_WORD_OFFSETS ? v + 1 : a == FS_ARRAY_WORD_BYTES ? value.mv_size : v;
        if (!found || value.mv_size != load_u64(entry) || value.mv_size != items * item_bytes[a]) {
            fail(failure, FS_EDAMAGED, "damaged index: array %s is missing or truncated", names[a]);
            return -1;
        }
        if (fs_checksum(NULL, 0, value.mv_data, value.mv_size) != load_u32(entry + 8)) {
            fail(failure, FS_EDAMAGED, "damaged index: array %s fails its checksum (bytes flipped?)", names[a]);
            return -1;
        }
        data[a] = value.mv_data;
        if (a == FS_ARRAY_WORD_BYTES)
            s->word_bytes_len = value.mv_size;
    }
    s->unigram_alpha = data[FS_ARRAY_UNIGRAM_ALPHA];
    s->unigram_beta = data[FS_ARRAY_UNIGRAM_BETA];
    s->unigram_order = data[FS_ARRAY_UNIGRAM_ORDER];
    s->word_offsets = data[FS_ARRAY_WORD_OFFSETS];
    s->word_bytes = data[FS_ARRAY_WORD_BYTES];
    s->spelling_order = data[FS_ARRAY_SPELLING_ORDER];
    MDB_val value;
    int found = get(s, meta, FS_META_DB, FS_META_KEY, &value, failure);
    if (found < 0)
        return -1;
    if (!found || value.mv_size != load_u64(h + FS_H_META_BYTES) ||
        fs_checksum(NULL, 0, value.mv_data, value.mv_size) != load_u32(h + FS_H_META_CHECKSUM))
        return damaged(failure, "the metadata is missing or fails its checksum (bytes flipped?)");
    s->meta = value.mv_data;
    s->meta_len = value.mv_size;
    return 0;
}

/* What the search indexes memory with must stay inside the arrays, and the header's ids of
 * <s>, </s> and <unk> must be the vocabulary's. */
static int cross_check(Store *s, Failure *failure) {
    size_t v = s->vocab_size;
    int ok = s->word_offsets[0] == 0 && s->word_offsets[v] == s->word_bytes_len;
    for (size_t i = 0; ok && i < v; i++)
        ok = s->word_offsets[i] <= s->word_offsets[i + 1] && s->unigram_order[i] < v && s->spelling_order[i] < v;
    if (!ok)
        return damaged(failure, "word_offsets, unigram_order or spelling_order out of range");
    if (store_word_id(s, "<s>", 3) != s->bos || store_word_id(s, "</s>", 4) != s->eos ||
        store_word_id(s, "<unk>", 5) != s->unk)
        return damaged(failure, "the header's ids of <s>, </s> or <unk> are not the vocabulary's");
    double sup = 0.0;
    for (size_t i = 0; i < v; i++) {
        float beta = s->unigram_beta[i];
        if (!isfinite(beta))
            return damaged(failure, "a unigram back-off weight is not a number");
        if (beta > sup)
            sup = beta;
    }
    s->unigram_beta_sup = sup;
    return 0;
}

int store_open(Store *s, const char *path, Failure *failure) {
    memset(s, 0, sizeof(*s));
    if (open_environment(s, path, failure) < 0) {
        store_close(s);
        return -1;
    }
    MDB_dbi meta, arrays;
    const uint8_t *header;
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn);
    if (rc) {
        lmdb_failed(failure, rc, "damaged index: data.mdb cannot be read");
        goto failed;
    }
    if (open_dbi(s, FS_META_DB, &meta, FS_ENOTINDEX, failure) < 0 || read_header(s, meta, &header, failure) < 0 ||
        open_dbi(s, FS_ARRAYS_DB, &arrays, FS_EDAMAGED, failure) < 0)
        goto failed;
    for (int m = 2; m <= s->order + 1; m++) {
        char name[32];
        MDB_dbi beyond;
        snprintf(name, sizeof(name), FS_PATTERNS_DB, m);
        if (m > s->order) {  /* the header's order must be the databases' */
            rc = mdb_dbi_open(s->txn, name, 0, &beyond);
            if (rc != MDB_NOTFOUND) {
                if (rc)
                    store_read_failed(failure, s->txn, rc, "the main database (opening %s)", name);
                else
                    damaged(failure, "the header's order is not the index's");
                goto failed;
            }
        } else if (open_dbi(s, name, &s->patterns[m], FS_EDAMAGED, failure) < 0) {
            goto failed;
        }
    }
    /* Database handles opened in a transaction reach other transactions (the readers')
     * once it commits: commit, and read on in a new one. */
    rc = mdb_txn_commit(s->txn);
    s->txn = NULL;
    if (!rc)
        rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn);
    if (rc) {
        lmdb_failed(failure, rc, "cannot begin a read transaction");
        goto failed;
    }
    if (read_header(s, meta, &header, failure) < 0 || read_arrays(s, arrays, meta, header, failure) < 0 ||
        cross_check(s, failure) < 0)
        goto failed;
    size_t v = s->vocab_size;
    s->unigram = malloc(v * sizeof(UnigramScores));
    s->sorted_alpha = malloc(v * sizeof(float));
    if (!s->unigram || !s->sorted_alpha) {
        fail(failure, FS_ENOMEM, "out of memory");
        goto failed;
    }
    for (size_t i = 0; i < v; i++) {
        s->unigram[i].alpha = s->unigram_alpha[i];
        s->unigram[i].beta = s->unigram_beta[i];
        s->sorted_alpha[i] = s->unigram_alpha[s->unigram_order[i]];
    }
    return 0;
failed:
    store_close(s);
    return -1;
}

void store_close(Store *s) {
    if (s->txn)
        mdb_txn_abort(s->txn);
    if (s->env)
        mdb_env_close(s->env);
    free(s->unigram);
    free(s->sorted_alpha);
    /* what pointed into the map goes; the index's shape (order, sizes, ids) stays readable */
    s->txn = NULL;
    s->env = NULL;
    s->unigram = NULL;
    s->sorted_alpha = NULL;
    s->unigram_alpha = s->unigram_beta = NULL;
    s->unigram_order = s->spelling_order = NULL;
    s->word_offsets = NULL;
    s->word_bytes = NULL;
    s->meta = NULL;
}

/* ---------------------------------------------------------------- words */

/* memcmp order, a prefix first: the builder's sort of the spellings (Python's bytes order). */
static int compare_spelling(const char *a, size_t a_len, const char *b, size_t b_len) {
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

uint32_t store_word_id(const Store *s, const char *word, size_t length) {
    uint32_t low = 0, high = s->vocab_size;  /* the answer is in spelling_order[low .. high) */
    while (low < high) {
        uint32_t mid = low + (high - low) / 2, id = s->spelling_order[mid];
        size_t spelled;
        const char *spelling = store_word(s, id, &spelled);
        int c = compare_spelling(spelling, spelled, word, length);
        if (c == 0)
            return id;
        if (c < 0)
            low = mid + 1;
        else
            high = mid;
    }
    return FS_NO_WORD;
}

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
static const char *hex(const uint8_t *key, size_t len, char out[65]) {
    size_t n = len < 32 ? len : 32;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = "0123456789abcdef"[key[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[key[i] & 15];
    }
    out[2 * n] = 0;
    return out;
}

static int key_compare(const uint8_t *a, const uint8_t *b, size_t len) {
    return memcmp(a, b, len);
}

/* Bytes of the data of a pattern of ``count`` words. */
static uint64_t data_bytes(const Store *s, uint64_t count, int has_beta) {
    return FS_PATTERN_DATA_BYTES(count, s->id_bytes, has_beta);
}

void store_pattern_at(const Store *s, const uint8_t *data, uint32_t count, int has_beta, PatternData *p) {
    p->count = count;
    p->ids = data;
    p->position_bytes = FS_POSITION_BYTES(count);
    p->positions = p->position_bytes ? data + (size_t)count * s->id_bytes : NULL;
    p->alpha = (const ix_f32 *)(data + (size_t)count * (s->id_bytes + p->position_bytes));
    p->beta = has_beta ? p->alpha + count : NULL;
}

/* Checks what a checksum cannot vouch for (the builder's work): ids strictly increasing and
 * in the vocabulary, positions a permutation that orders the alphas best first (ties by
 * lower id: positions ascend among equal alphas); derives the bound on the back-off weights.
 * Each check names what it found (fastsubs-index verify shows it), and each would still stop
 * a pattern that only another one trips (a repeated position is also a tie out of order). */
static int check_pattern(const Store *s, PatternData *p, Failure *failure, const uint8_t *key, size_t key_len) {
    char shown[65], what[96] = "";
    uint32_t previous = 0;
    for (uint32_t i = 0; i < p->count && !what[0]; i++) {
        uint32_t id = pattern_id(s, p, i);
        if (id >= s->vocab_size)
            snprintf(what, sizeof(what), "word id %u (entry %u) is outside the vocabulary", id, i);
        else if (i && id <= previous)
            snprintf(what, sizeof(what), "its word ids do not increase (entry %u)", i);
        previous = id;
    }
    if (!what[0] && p->count > 1) {
        uint64_t small[4] = {0, 0, 0, 0}, *seen = p->count <= 256 ? small : calloc((p->count + 63) / 64, 8);
        if (!seen) {
            fail(failure, FS_ENOMEM, "out of memory");
            return -1;
        }
        for (uint32_t i = 0; i < p->count && !what[0]; i++) {
            uint32_t at = position_at(p, i), before = i ? position_at(p, i - 1) : 0;
            if (at >= p->count) {
                snprintf(what, sizeof(what), "its positions by score hold %u, past its %u words", at, p->count);
                break;
            }
            if (seen[at / 64] >> (at % 64) & 1)
                snprintf(what, sizeof(what), "its positions by score repeat %u", at);
            else if (i && !(p->alpha[before] >= p->alpha[at]))
                snprintf(what, sizeof(what), "its positions by score do not order its scores (entry %u)", i);
            else if (i && p->alpha[before] == p->alpha[at] && before >= at)
                snprintf(what, sizeof(what), "its positions by score put tied scores out of id order (entry %u)", i);
            seen[at / 64] |= 1ull << (at % 64);
        }
        if (seen != small)
            free(seen);
    }
    if (what[0]) {
        fail(failure, FS_EDAMAGED, "damaged index: pattern %s: %s", hex(key, key_len, shown), what);
        return -1;
    }
    float sup = 0.0f;
    if (p->beta)
        for (uint32_t i = 0; i < p->count; i++)
            if (p->beta[i] > sup)
                sup = p->beta[i];
    p->beta_sup = sup;
    return 0;
}

/* A record as every kind starts: checked against its checksum and its key's length. */
typedef struct {
    int kind, has_previous;
    const uint8_t *key, *previous, *body, *end;  /* body: after the common part; end: of the value */
    size_t key_len;             /* of the database's pattern keys */
} RecordView;

static int open_record(const Store *s, int order, const MDB_val *k, const MDB_val *v, RecordView *r,
                       Failure *failure) {
    const uint8_t *value = v->mv_data;
    size_t key_len = FS_KEY_BYTES((unsigned)order, s->id_bytes);
    char shown[65];
    r->key = k->mv_data;
    r->key_len = key_len;
    if (k->mv_size != key_len && k->mv_size != key_len + 1) {  /* a pattern's key, or an END record's */
        fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d has a key of %zu bytes, not %zu "
             "(bytes flipped?)", order, k->mv_size, key_len);
        return -1;
    }
    if (v->mv_size < FS_R_PREVIOUS + key_len || v->mv_size % 4 ||
        fs_checksum(k->mv_data, k->mv_size, value + 4, v->mv_size - 4) != load_u32(value + FS_R_CHECKSUM)) {
        fail(failure, FS_EDAMAGED, "damaged index: the record of patterns%d at key %s fails its checksum "
             "(bytes flipped?)", order, hex(k->mv_data, k->mv_size, shown));
        return -1;
    }
    r->kind = value[FS_R_KIND];
    r->has_previous = value[FS_R_FLAGS] & FS_HAS_PREVIOUS;
    r->previous = value + FS_R_PREVIOUS;
    r->body = r->previous + key_len;
    r->end = value + v->mv_size;
    int key_ok = r->kind == FS_END ? k->mv_size == key_len + 1 : k->mv_size == key_len;
    if (!key_ok || (r->kind != FS_BLOCK && r->kind != FS_PATTERN && r->kind != FS_END)) {
        fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d has a malformed key or kind", order);
        return -1;
    }
    return 0;
}

/* Where a record's entries are, and its restart points. */
typedef struct {
    uint32_t n_patterns, n_restarts;
    const uint8_t *restarts, *entries;
} BlockView;

static int open_block(const RecordView *r, BlockView *b) {
    if (r->end - r->body < 4)
        return -1;
    b->n_patterns = load_u16(r->body);
    b->n_restarts = load_u16(r->body + 2);
    b->restarts = r->body + 4;
    b->entries = b->restarts + 2 * (size_t)b->n_restarts;
    return b->n_patterns && b->n_restarts && b->entries <= r->end && load_u16(b->restarts) == 0 ? 0 : -1;
}

/* Decodes the entry at ``p`` (the key before it in ``key``, which it turns into its own):
 * its count and data; returns where the next entry starts, or NULL if it does not fit. */
static const uint8_t *read_entry(const Store *s, const RecordView *r, const uint8_t *p, uint8_t *key,
                                 uint32_t *count, const uint8_t **data, int has_beta) {
    size_t len = r->key_len;
    if (r->end - p < 2 || p[0] > len || (size_t)(r->end - p) < 2 + len - p[0])
        return NULL;
    memcpy(key + p[0], p + 1, len - p[0]);
    p += 1 + len - p[0];
    *count = *p++;
    uint64_t bytes = data_bytes(s, *count, has_beta);
    if (*count == 0 || (uint64_t)(r->end - p) < bytes)
        return NULL;
    *data = p;
    return p + bytes;
}

/* The pattern of a PATTERN record: 0, or -1 when its layout is malformed. */
static int alone_pattern(const Store *s, const RecordView *r, int has_beta, PatternData *out) {
    if (r->end - r->body < 4)
        return -1;
    uint32_t count = load_u32(r->body);
    uint64_t used = 4 + data_bytes(s, count, has_beta), left = (uint64_t)(r->end - r->body);
    if (count == 0 || used > left || left - used > 3)
        return -1;
    store_pattern_at(s, r->body + 4, count, has_beta, out);
    return 0;
}

int store_find_pattern(const Store *s, MDB_cursor *cursor, int order, const uint8_t *key, size_t key_len,
                       PatternData *out, Failure *failure) {
    MDB_val k = {key_len, (void *)key}, v;
    char shown[65];
    int rc = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE);
    if (rc == MDB_NOTFOUND) {
        fail(failure, FS_EDAMAGED, "damaged index: patterns%d ends before its END record", order);
        return -1;
    }
    if (rc)
        return store_read_failed(failure, mdb_cursor_txn(cursor), rc, "patterns%d", order);
    RecordView r;
    if (open_record(s, order, &k, &v, &r, failure) < 0)
        return -1;
    /* The record must be the one whose keys span ``key``: after the previous record's last
     * key, at most its own.  A damaged B-tree may land elsewhere; never read that as absence. */
    if ((r.has_previous && key_compare(r.previous, key, key_len) >= 0) ||
        (r.kind != FS_END && key_compare(r.key, key, key_len) < 0)) {
        fail(failure, FS_EDAMAGED, "damaged index: the look-up of pattern %s landed on the wrong record of patterns%d",
             hex(key, key_len, shown), order);
        return -1;
    }
    int has_beta = order < s->order;
    if (r.kind == FS_END)
        return 0;
    if (r.kind == FS_PATTERN) {
        if (key_compare(r.key, key, key_len))
            return 0;
        if (alone_pattern(s, &r, has_beta, out) < 0)
            goto malformed;
        return check_pattern(s, out, failure, key, key_len) < 0 ? -1 : 1;
    }
    BlockView b;
    if (open_block(&r, &b) < 0)
        goto malformed;
    /* the last restart whose key is at most ``key``, then entry by entry from it */
    size_t room = (size_t)(r.end - b.entries);
    uint32_t low = 0, high = b.n_restarts;
    while (high - low > 1) {
        uint32_t mid = (low + high) / 2, at = load_u16(b.restarts + 2 * mid);
        if (room - at < 2 + key_len || at >= room || b.entries[at])
            goto malformed;
        if (key_compare(b.entries + at + 1, key, key_len) <= 0)
            low = mid;
        else
            high = mid;
    }
    const uint8_t *p = b.entries + load_u16(b.restarts + 2 * low);
    const uint8_t *stop = high < b.n_restarts ? b.entries + load_u16(b.restarts + 2 * high) : r.end;
    if (stop > r.end || p >= stop || p[0])
        goto malformed;
    uint8_t entry_key[1 + 4 * FS_MAX_ORDER];
    /* (the last run ends where the record's padding, under 4 bytes, begins) */
    while (p < stop && !(stop == r.end && r.end - p < 4)) {
        uint32_t count;
        const uint8_t *data;
        if (!(p = read_entry(s, &r, p, entry_key, &count, &data, has_beta)))
            goto malformed;
        int c = key_compare(entry_key, key, key_len);
        if (c == 0) {
            store_pattern_at(s, data, count, has_beta, out);
            return check_pattern(s, out, failure, key, key_len) < 0 ? -1 : 1;
        }
        if (c > 0)
            return 0;
    }
    if (stop != r.end)
        return 0;  /* the next restart's key is above ``key`` */
    /* every key of the record is below ``key``, but the record's key is not */
malformed:
    fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d at key %s has a malformed layout", order,
         hex(r.key, key_len, shown));
    return -1;
}

/* ---------------------------------------------------------------- whole-index checks */

static int scores_ok(const PatternData *p) {
    for (uint32_t i = 0; i < p->count; i++)
        if (!(isfinite(p->alpha[i]) && p->alpha[i] <= 0.0f) || (p->beta && !isfinite(p->beta[i])))
            return 0;
    return 1;
}

int store_check_patterns(const Store *s, MDB_txn *txn, int order, PatternCounts *counts, Failure *failure) {
    MDB_cursor *cursor;
    int rc = mdb_cursor_open(txn, s->patterns[order], &cursor);
    if (rc)
        return store_read_failed(failure, txn, rc, "patterns%d", order);
    memset(counts, 0, sizeof(*counts));
    size_t key_len = FS_KEY_BYTES((unsigned)order, s->id_bytes);
    uint8_t last[1 + 4 * FS_MAX_ORDER], key[1 + 4 * FS_MAX_ORDER];
    int has_last = 0, ended = 0, has_beta = order < s->order, result = -1;
    char shown[65];
    MDB_val k, v;
    for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
        RecordView r;
        if (ended) {
            damaged(failure, "records follow the END record");
            goto out;
        }
        if (open_record(s, order, &k, &v, &r, failure) < 0)
            goto out;
        counts->records++;
        if (r.has_previous != has_last || (has_last && memcmp(r.previous, last, key_len))) {
            fail(failure, FS_EDAMAGED, "damaged index: the record of patterns%d at key %s does not name the record "
                 "before it", order, hex(r.key, k.mv_size, shown));
            goto out;
        }
        if (r.kind == FS_END) {
            ended = 1;
            continue;
        }
        PatternData p;
        if (r.kind == FS_PATTERN) {
            memcpy(key, r.key, key_len);
            if (has_last && memcmp(last, key, key_len) >= 0)
                goto disorder;
            if (alone_pattern(s, &r, has_beta, &p) < 0)
                goto malformed;
            if (check_pattern(s, &p, failure, key, key_len) < 0)
                goto out;
            counts->patterns++;
            counts->entries += p.count;
            if (!scores_ok(&p))
                goto scores;
        } else {
            BlockView b;
            if (open_block(&r, &b) < 0)
                goto malformed;
            const uint8_t *at = b.entries;
            uint32_t restart = 0;
            for (uint32_t e = 0; e < b.n_patterns; e++) {
                uint32_t count;
                const uint8_t *data;
                int restarts_here = restart < b.n_restarts && at == b.entries + load_u16(b.restarts + 2 * restart);
                if ((restarts_here && at[0]) || (e == 0 && !restarts_here))
                    goto malformed;
                restart += restarts_here;
                if (!(at = read_entry(s, &r, at, key, &count, &data, has_beta)))
                    goto malformed;
                if (has_last && memcmp(last, key, key_len) >= 0)
                    goto disorder;
                memcpy(last, key, key_len);
                has_last = 1;
                store_pattern_at(s, data, count, has_beta, &p);
                if (check_pattern(s, &p, failure, key, key_len) < 0)
                    goto out;
                if (!scores_ok(&p))
                    goto scores;
                counts->patterns++;
                counts->entries += count;
            }
            if (restart != b.n_restarts || (size_t)(r.end - at) > 3 || memcmp(key, r.key, key_len))
                goto malformed;
        }
        memcpy(last, r.key, key_len);
        has_last = 1;
    }
    if (rc != MDB_NOTFOUND)
        goto lmdb;
    if (!ended) {
        fail(failure, FS_EDAMAGED, "damaged index: patterns%d has no END record", order);
        goto out;
    }
    result = 0;
    goto out;
lmdb:
    store_read_failed(failure, txn, rc, "patterns%d", order);
    goto out;
disorder:
    fail(failure, FS_EDAMAGED, "damaged index: the keys of patterns%d do not ascend at %s", order,
         hex(key, key_len, shown));
    goto out;
scores:
    fail(failure, FS_EDAMAGED, "damaged index: pattern %s holds a score that is no log-probability",
         hex(key, key_len, shown));
    goto out;
malformed:
    fail(failure, FS_EDAMAGED, "damaged index: a record of patterns%d at key %s has a malformed layout", order,
         hex(k.mv_data, k.mv_size, shown));
out:
    mdb_cursor_close(cursor);
    return result;
}

int store_check_arrays(const Store *s, Failure *failure) {
    size_t v = s->vocab_size;
    uint8_t *seen = calloc(v, 2);
    if (!seen) {
        fail(failure, FS_ENOMEM, "out of memory");
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
            ok = (a > b || (a == b && before < by_score)) && compare_spelling(wa, la, wb, lb) < 0;
        }
    }
    free(seen);
    return ok ? 0 : damaged(failure, "unigram_order or spelling_order does not sort the vocabulary");
}
