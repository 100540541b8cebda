/* The open index: opening and checking it, and its words (see store.h, store_parts.h). */
#define _GNU_SOURCE  /* memmem */
#include "store_parts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Times opening is tried again when a rebuild swaps the index in at that very moment. */
#define OPEN_ATTEMPTS 20

int store_lmdb_failed(Failure *failure, int rc, const char *what) {
    common_fail(failure, FS_ELMDB, "%s (%s)", what, mdb_strerror(rc));
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
        common_fail(failure, FS_EDAMAGED, "damaged index: %s: LMDB page %zu: %s", db, pgno, what);
    else
        common_fail(failure, FS_EDAMAGED, "damaged index: %s (%s)", db, mdb_strerror(rc));
    return -1;
}

int store_damaged(Failure *failure, const char *what) {
    common_fail(failure, FS_EDAMAGED, "damaged index: %s", what);
    return -1;
}

/* ---------------------------------------------------------------- opening */

/* Whether the OS should read only the pages a search touches, not around them: for an
 * index larger than half the machine's memory, which its page cache cannot hold beside
 * everything else.  Reading around each page then fills the cache with pages the search
 * never reads (on a disk with 8 MiB of read-ahead, a cold pass over a 19 GB index read all
 * of it: 34 s; read page by page, 1.5 GB in 29 s), and where the index outgrows the memory
 * it evicts the pages the search will want next.  A smaller index is read ahead: a cold
 * pass over kn4-64k's 336 MiB takes 3.5 s so, 5.7 s page by page (docs/performance.md). */
static int reads_page_by_page(off_t index_bytes) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    unsigned long long memory = (unsigned long long)pages * (unsigned long long)page;
    return pages > 0 && page > 0 && (unsigned long long)index_bytes > memory / 2;
}

/* Opens data.mdb in ``path``, sure of which file it opened (a rebuild may swap the
 * directory at any moment, indexer/publish.py: the inode before opening must be the
 * opened file's) and that it is whole (reading a page past its end would fault). */
static int open_environment(Store *s, const char *path, Failure *failure) {
    struct stat where;
    if (stat(path, &where) < 0) {
        common_fail(failure, FS_ENOTINDEX, errno == ENOENT ? "does not exist" : "cannot be read (%s)", strerror(errno));
        return -1;
    }
    if (!S_ISDIR(where.st_mode)) {
        common_fail(failure, FS_ENOTINDEX, "is not a directory (an index is the directory 'fastsubs-index build' makes)");
        return -1;
    }
    char data[4096];
    if (snprintf(data, sizeof(data), "%s/data.mdb", path) >= (int)sizeof(data)) {
        common_fail(failure, FS_ENOTINDEX, "the path is too long");
        return -1;
    }
    for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
        struct stat before, opened;
        if (stat(data, &before) < 0) {
            common_fail(failure, FS_ENOTINDEX, "not a fastsubs index (no data.mdb in it)");
            return -1;
        }
        int rc = mdb_env_create(&s->env);
        if (rc)
            return store_lmdb_failed(failure, rc, "cannot create an LMDB environment");
        mdb_env_set_maxdbs(s->env, FS_MAX_ORDER + 4);
        /* The map is the file, not the map size its meta page asks for (the builder's is
         * 1 TiB): LMDB's page numbers are then checked against the file's pages (mdb.c
         * keeps a transaction's last page inside the map), and a damaged map size is not
         * followed.  A published index never grows. */
        if (before.st_size > 0)
            mdb_env_set_mapsize(s->env, (size_t)before.st_size);
        /* Read-only, no lock file (nothing writes a published index), read transactions
         * not tied to threads; no read-ahead for an index too big to stay in memory. */
        rc = mdb_env_open(s->env, path, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS |
                          (reads_page_by_page(before.st_size) ? MDB_NORDAHEAD : 0), 0444);
        mdb_filehandle_t fd;
        int same = rc == 0 && mdb_env_get_fd(s->env, &fd) == 0 && fstat(fd, &opened) == 0 &&
                   opened.st_ino == before.st_ino && opened.st_dev == before.st_dev;
        if (!same) {
            struct stat now;
            int swapped = rc == 0 || stat(data, &now) < 0 || now.st_ino != before.st_ino;
            const char *damage = mdb_env_damage(s->env);  /* what mdb.c's checks of the meta pages found */
            if (!swapped && damage)
                common_fail(failure, FS_EDAMAGED, "damaged index: LMDB's meta pages: %s", damage);
            else if (!swapped)
                common_fail(failure, FS_EDAMAGED, "damaged index: data.mdb cannot be read as LMDB (truncated or "
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
            /* (the file cannot tell which: a whole file whose meta page's last-page number
             * was damaged reads the same as a truncated one) */
            common_fail(failure, FS_EDAMAGED, "damaged index: data.mdb is truncated, or the last page number of its "
                 "newer meta page is damaged (%lld bytes; that page number needs %llu)",
                 (long long)opened.st_size, needed);
            return -1;
        }
        return 0;
    }
    common_fail(failure, FS_ENOTINDEX, "the index kept changing while being opened (rebuilt in a loop?)");
    return -1;
}

/* Is the entry (k, v) one of an index's own databases' (read as the main database's from a
 * page of theirs): an array, the header, or a record whose checksum is right? */
static int an_index_entry(const MDB_val *k, const MDB_val *v) {
#define NAMED(name, spelled, type) || (k->mv_size == sizeof(spelled) - 1 && !memcmp(k->mv_data, spelled, k->mv_size))
    if (0 FS_ARRAYS(NAMED))
        return 1;
#undef NAMED
    if (k->mv_size == strlen(FS_HEADER_KEY) && !memcmp(k->mv_data, FS_HEADER_KEY, k->mv_size))
        return v->mv_size >= FS_HEADER_MAGIC_BYTES && !memcmp(v->mv_data, FS_HEADER_MAGIC, FS_HEADER_MAGIC_BYTES);
    return v->mv_size >= FS_R_PREVIOUS &&
           load_u32(v->mv_data) == common_checksum(k->mv_data, k->mv_size, (const uint8_t *)v->mv_data + 4,
                                                   v->mv_size - 4);
}

/* Why there is no metadata record (no meta database, or nothing in it).  A build writes it
 * in its last transaction and publishes the index only then, so an environment holding an
 * index's other databases without it is damaged: a flipped byte in one of LMDB's meta pages
 * has LMDB read an older transaction of the build, or the wrong root page (the main
 * database then disagrees with its own count of entries, or holds another database's
 * entries: a page of pattern records holds as few entries as the main database's).
 * Without them it is no index. */
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
        return store_lmdb_failed(failure, rc, "damaged index");
    for (rc = mdb_cursor_get(cursor, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)) {
        entries++;
        ours |= (k.mv_size == strlen(FS_ARRAYS_DB) && !memcmp(k.mv_data, FS_ARRAYS_DB, k.mv_size)) ||
                (k.mv_size > 8 && !memcmp(k.mv_data, FS_PATTERNS_DB, 8)) ||  /* "patterns%d" */
                an_index_entry(&k, &v);
    }
    mdb_cursor_close(cursor);
    if (rc != MDB_NOTFOUND)
        return store_lmdb_failed(failure, rc, "damaged index");
    if (ours || entries != declared.ms_entries)
        return store_damaged(failure, "its databases are there but not its metadata (bytes flipped in data.mdb?)");
    common_fail(failure, FS_ENOTINDEX, "not a fastsubs index (no metadata)");
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
            common_fail(failure, FS_EDAMAGED, "damaged index: LMDB's main database has flags (0x%x); an index's has none",
                 main_flags);
        else if (code == FS_ENOTINDEX)
            return no_metadata(s, failure);
        else
            common_fail(failure, code, "damaged index: database %s is missing", name);
        return -1;
    }
    if (rc)
        return store_read_failed(failure, s->txn, rc, "the main database (opening %s)", name);
    /* an index's databases are plain: flags would change how LMDB reads their pages */
    if (mdb_dbi_flags(s->txn, *dbi, &flags) || flags) {
        common_fail(failure, FS_EDAMAGED, "damaged index: database %s has LMDB flags (0x%x); an index's have none", name,
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
    static const char version_key[] = "\xae" "format_version";  /* msgpack str */
    if (!found)
        return no_metadata(s, failure);
    if (!memmem(value.mv_data, value.mv_size, FS_META_MAGIC, sizeof(FS_META_MAGIC) - 1)) {
        common_fail(failure, FS_ENOTINDEX, "not a fastsubs index (no metadata)");
        return -1;
    }
    const uint8_t *at = memmem(value.mv_data, value.mv_size, version_key, sizeof(version_key) - 1);
    size_t after = at ? (size_t)(at - (const uint8_t *)value.mv_data) + sizeof(version_key) - 1 : value.mv_size;
    if (after < value.mv_size && ((const uint8_t *)value.mv_data)[after] < FS_HEADER_SINCE)
        common_fail(failure, FS_EVERSION, "index format version %d is older than this fastsubs reads (%d); rebuild it "
             "with this version", ((const uint8_t *)value.mv_data)[after], FS_FORMAT_VERSION);
    else if (after < value.mv_size)  /* the metadata of a format with a header: the header is lost */
        store_damaged(failure, "its header record is missing (bytes flipped?)");
    else
        common_fail(failure, FS_EVERSION, "an index of an older format than this fastsubs reads (%d); rebuild it with "
             "this version", FS_FORMAT_VERSION);
    return -1;
}

/* Reads and checks the header (its checksum before any field it holds, but the magic). */
static int read_header(Store *s, MDB_dbi meta, CodecHeader *fields, Failure *failure) {
    MDB_val value;
    int found = get(s, meta, FS_META_DB, FS_HEADER_KEY, &value, failure);
    if (found <= 0)
        return found < 0 ? -1 : no_header(s, meta, failure);
    const uint8_t *h = value.mv_data;
    size_t len = value.mv_size;
    if (len < FS_H_BYTES + 8 || memcmp(h + FS_H_MAGIC, FS_HEADER_MAGIC, FS_HEADER_MAGIC_BYTES)) {
        common_fail(failure, FS_ENOTINDEX, "not a fastsubs index (wrong magic)");
        return -1;
    }
    int whole = codec_read_header(h, len, fields) == 0;
    if (fields->length != len || len % 4 || common_checksum(NULL, 0, h, len - 4) != fields->checksum)
        return store_damaged(failure, "the header fails its checksum (bytes flipped?)");
    if (fields->version != FS_FORMAT_VERSION) {
        int newer = fields->version > FS_FORMAT_VERSION;
        common_fail(failure, FS_EVERSION, "index format version %u is %s than this fastsubs reads (%d); rebuild it with "
             "this version%s", fields->version, newer ? "newer" : "older", FS_FORMAT_VERSION,
             newer ? " or upgrade fastsubs" : "");
        return -1;
    }
    uint32_t vocab_size = whole ? fields->vocab_size : 0;
    if (vocab_size < 1 || vocab_size == FS_NO_WORD || fields->id_bytes != fs_id_bytes(vocab_size))
        return store_damaged(failure, "the header's fields disagree (order, vocabulary size, id width)");
    s->order = (int)fields->order;
    s->vocab_size = vocab_size;
    s->id_bytes = fs_id_bytes(vocab_size);
    s->id_bits = fs_id_bits(vocab_size);
    s->id_mask = (uint32_t)((1ull << s->id_bits) - 1u);
    s->bos = fields->bos;
    s->eos = fields->eos;
    s->unk = fields->unk;
    memcpy(s->counts, fields->counts, sizeof(s->counts));
    memcpy(s->records, fields->records, sizeof(s->records));
    uint64_t tables = 0;
    for (int m = 2; m <= s->order; m++) {
        s->beta_table_len[m] = fields->beta_tables[m];
        tables += fields->beta_tables[m];
        /* an order below the highest that has n-grams has a back-off table (a code 0 is always read) */
        if ((m == s->order) != (fields->beta_tables[m] == 0) && (m == s->order || s->counts[m]))
            return store_damaged(failure, "the header's back-off table lengths are wrong");
    }
    s->beta_values_len = tables;
    if (s->counts[1] != vocab_size)
        return store_damaged(failure, "the header's unigram count is not its vocabulary size");
    s->joint_min = fields->joint_min;
    s->value_bound = fields->value_bound;
    if (s->joint_min < 1 || !(s->value_bound >= 0.0 && s->value_bound < INFINITY))
        return store_damaged(failure, "the header's joint threshold or value bound is out of range");
    return 0;
}

/* Every array and the metadata, each against its length and checksum in the header. */
static int read_arrays(Store *s, MDB_dbi arrays, MDB_dbi meta, const CodecHeader *h, Failure *failure) {
#define ARRAY_NAME(name, spelled, type) spelled,
#define ARRAY_ITEM_BYTES(name, spelled, type) FS_##type##_ITEM_BYTES,
    static const char *names[] = {FS_ARRAYS(ARRAY_NAME)};
    static const size_t item_bytes[] = {FS_ARRAYS(ARRAY_ITEM_BYTES)};
    const void *data[FS_N_ARRAYS];
    size_t v = s->vocab_size;
    for (int a = 0; a < FS_N_ARRAYS; a++) {
        MDB_val value;
        int found = get(s, arrays, FS_ARRAYS_DB, names[a], &value, failure);
        if (found < 0)
            return -1;
        size_t items = a == FS_ARRAY_WORD_OFFSETS ? v + 1
                       : a == FS_ARRAY_WORD_BYTES ? value.mv_size
                       : a == FS_ARRAY_BETA_VALUES ? s->beta_values_len
                                                  : v;
        if (!found || value.mv_size != h->array_bytes[a] || value.mv_size != items * item_bytes[a]) {
            common_fail(failure, FS_EDAMAGED, "damaged index: array %s is missing or truncated", names[a]);
            return -1;
        }
        if (common_checksum(NULL, 0, value.mv_data, value.mv_size) != h->array_checksum[a]) {
            common_fail(failure, FS_EDAMAGED, "damaged index: array %s fails its checksum (bytes flipped?)", names[a]);
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
    s->beta_values = data[FS_ARRAY_BETA_VALUES];
    const ix_f32 *table = s->beta_values;
    for (int m = 2; m < s->order; m++) {
        s->beta_table[m] = table;
        table += s->beta_table_len[m];
    }
    MDB_val value;
    int found = get(s, meta, FS_META_DB, FS_META_KEY, &value, failure);
    if (found < 0)
        return -1;
    if (!found || value.mv_size != h->meta_bytes ||
        common_checksum(NULL, 0, value.mv_data, value.mv_size) != h->meta_checksum)
        return store_damaged(failure, "the metadata is missing or fails its checksum (bytes flipped?)");
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
        return store_damaged(failure, "word_offsets, unigram_order or spelling_order out of range");
    if (store_word_id(s, "<s>", 3) != s->bos || store_word_id(s, "</s>", 4) != s->eos ||
        store_word_id(s, "<unk>", 5) != s->unk)
        return store_damaged(failure, "the header's ids of <s>, </s> or <unk> are not the vocabulary's");
    double sup = 0.0;
    for (size_t i = 0; i < v; i++) {
        float beta = s->unigram_beta[i];
        if (!isfinite(beta))
            return store_damaged(failure, "a unigram back-off weight is not a number");
        if (!within_value_bound(s, beta) || !within_value_bound(s, s->unigram_alpha[i]))
            return store_damaged(failure, "a unigram's value is beyond the header's value bound");
        if (beta > sup)
            sup = beta;
    }
    s->unigram_beta_sup = sup;
    /* a pattern's back-off weights are its order's table's entries: checked here, once */
    for (uint64_t i = 0; i < s->beta_values_len; i++) {
        float beta = s->beta_values[i];
        if (!isfinite(beta) || !within_value_bound(s, beta))
            return store_damaged(failure, "a back-off table's value is not a number within the header's value bound");
    }
    return 0;
}

int store_open(Store *s, const char *path, Failure *failure) {
    memset(s, 0, sizeof(*s));
    if (open_environment(s, path, failure) < 0) {
        store_close(s);
        return -1;
    }
    MDB_dbi meta, arrays;
    CodecHeader header;
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &s->txn);
    if (rc) {
        store_lmdb_failed(failure, rc, "damaged index: data.mdb cannot be read");
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
                    store_damaged(failure, "the header's order is not the index's");
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
        store_lmdb_failed(failure, rc, "cannot begin a read transaction");
        goto failed;
    }
    if (read_header(s, meta, &header, failure) < 0 || read_arrays(s, arrays, meta, &header, failure) < 0 ||
        cross_check(s, failure) < 0)
        goto failed;
    size_t v = s->vocab_size;
    s->unigram = malloc(v * sizeof(UnigramScores));
    s->sorted_alpha = malloc(v * sizeof(float));
    if (!s->unigram || !s->sorted_alpha) {
        common_fail(failure, FS_ENOMEM, "out of memory");
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
    s->beta_values = NULL;
    memset(s->beta_table, 0, sizeof(s->beta_table));
    s->unigram_order = s->spelling_order = NULL;
    s->word_offsets = NULL;
    s->word_bytes = NULL;
    s->meta = NULL;
}

/* ---------------------------------------------------------------- words */

/* memcmp order, a prefix first: the builder's sort of the spellings (Python's bytes order). */
int store_compare_spelling(const char *a, size_t a_len, const char *b, size_t b_len) {
    int c = memcmp(a, b, a_len < b_len ? a_len : b_len);
    return c ? c : (a_len > b_len) - (a_len < b_len);
}

uint32_t store_word_id(const Store *s, const char *word, size_t length) {
    uint32_t low = 0, high = s->vocab_size;  /* the answer is in spelling_order[low .. high) */
    while (low < high) {
        uint32_t mid = low + (high - low) / 2, id = s->spelling_order[mid];
        size_t spelled;
        const char *spelling = store_word(s, id, &spelled);
        int c = store_compare_spelling(spelling, spelled, word, length);
        if (c == 0)
            return id;
        if (c < 0)
            low = mid + 1;
        else
            high = mid;
    }
    return FS_NO_WORD;
}
