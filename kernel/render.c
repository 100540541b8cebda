/* The output formats: see render.h. */
#include "render.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ryu/ryu.h"
#include "sample.h"

/* ---------------------------------------------------------------- the buffer */

/* Room for ``more`` bytes after what ``t`` holds: its end, or NULL (t->failed set). */
static char *room(Text *t, size_t more) {
    if (t->failed)
        return NULL;
    if (t->len + more > t->cap) {
        size_t cap = 2 * (t->len + more) + 256;
        char *grown = realloc(t->data, cap);
        if (!grown) {
            t->failed = 1;
            return NULL;
        }
        t->data = grown;
        t->cap = cap;
    }
    return t->data + t->len;
}

void render_text_append(Text *t, const void *bytes, size_t n) {
    char *at = room(t, n);
    if (at) {
        memcpy(at, bytes, n);
        t->len += n;
    }
}

#define APPEND(t, literal) render_text_append(t, literal, sizeof(literal) - 1)

void render_text_free(Text *t) {
    free(t->data);
    memset(t, 0, sizeof(*t));
}

static void append_integer(Text *t, int64_t value) {
    char digits[24];
    int n = 0;
    uint64_t magnitude = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
    do
        digits[n++] = (char)('0' + magnitude % 10);
    while ((magnitude /= 10) != 0);
    if (value < 0)
        digits[n++] = '-';
    char *at = room(t, (size_t)n);
    if (!at)
        return;
    for (int i = 0; i < n; i++)
        at[i] = digits[n - 1 - i];
    t->len += (size_t)n;
}

/* Python's repr(): the shortest digits that read back as the value (Ryu), in fixed notation
 * when the decimal point falls within 16 digits of them, else as d.ddde[+-]XX; ".0" after a
 * whole number. */
void render_text_repr(Text *t, double value) {
    if (value == 0.0) {
        if (signbit(value))
            APPEND(t, "-0.0");
        else
            APPEND(t, "0.0");
        return;
    }
    uint64_t mantissa;
    int32_t exponent;
    d2s_shortest(value, &mantissa, &exponent);
    char digits[20];
    int n = 0;
    for (uint64_t rest = mantissa; rest; rest /= 10)
        digits[n++] = (char)('0' + rest % 10);
    for (int i = 0; i < n / 2; i++) {  /* most significant first */
        char c = digits[i];
        digits[i] = digits[n - 1 - i];
        digits[n - 1 - i] = c;
    }
    int point = n + exponent;  /* the decimal point comes after this many digits */
    char *at = room(t, 32 + (size_t)(point > 0 ? point : -point));
    if (!at)
        return;
    char *start = at;
    if (value < 0)
        *at++ = '-';
    if (point > -4 && point <= 16) {
        if (point <= 0) {
            *at++ = '0';
            *at++ = '.';
            for (int i = point; i < 0; i++)
                *at++ = '0';
            memcpy(at, digits, (size_t)n);
            at += n;
        } else if (point < n) {
            memcpy(at, digits, (size_t)point);
            at += point;
            *at++ = '.';
            memcpy(at, digits + point, (size_t)(n - point));
            at += n - point;
        } else {
            memcpy(at, digits, (size_t)n);
            at += n;
            for (int i = n; i < point; i++)
                *at++ = '0';
            *at++ = '.';
            *at++ = '0';
        }
    } else {
        *at++ = digits[0];
        if (n > 1) {
            *at++ = '.';
            memcpy(at, digits + 1, (size_t)(n - 1));
            at += n - 1;
        }
        int power = point - 1;
        *at++ = 'e';
        *at++ = power < 0 ? '-' : '+';
        power = power < 0 ? -power : power;
        if (power >= 100)
            *at++ = (char)('0' + power / 100);
        *at++ = (char)('0' + power / 10 % 10);
        *at++ = (char)('0' + power % 10);
    }
    t->len += (size_t)(at - start);
}

/* ---------------------------------------------------------------- the original tool's fields */

/* The most bytes append_score writes for |value| < 1e4: "-10000.00000000" (rounded up). */
#define SHORT_SCORE 15
/* The longest "%.8f" of a double: 309 digits, sign, point, 8 decimals. */
#define LONG_SCORE 330

/* Appends ``value`` as ``"%.8f"`` would.  Fast path: value * 1e8 rounded to an integer.
 * For |value| < 1e4 the product is below 2^40, so its rounding error is below 2^-13;
 * unless it lies within 1e-3 of a half, it then rounds as the exact product does.  Other
 * values go to the C library's formatter, which rounds the exact binary value, as
 * Python's does. */
static char *append_score(char *out, double value) {
    double scaled = value * 1e8, rounded = nearbyint(scaled);
    if (fabs(value) < 1e4 && fabs(fabs(scaled - rounded) - 0.5) > 1e-3) {
        static const char pairs[] =
            "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
            "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
            "8081828384858687888990919293949596979899";
        uint64_t digits = (uint64_t)fabs(rounded);
        uint32_t fraction = (uint32_t)(digits % 100000000u);
        uint64_t whole = digits / 100000000u;
        int whole_digits = 1;
        for (uint64_t rest = whole; rest >= 10; rest /= 10)
            whole_digits++;
        if (signbit(value))
            *out++ = '-';
        char *end = out + whole_digits + 9, *p = end;  /* written right to left, in place */
        for (int i = 0; i < 4; i++, fraction /= 100) {  /* two digits at a time */
            p -= 2;
            memcpy(p, &pairs[2 * (fraction % 100)], 2);
        }
        *--p = '.';
        do
            *--p = (char)('0' + whole % 10);
        while ((whole /= 10) != 0);
        return end;
    }
    if (isnan(value)) {  /* Python writes every NaN so, the C library "-nan" for some */
        memcpy(out, "nan", 3);
        return out + 3;
    }
    return out + snprintf(out, LONG_SCORE + 1, "%.8f", value);
}

int64_t render_fields_size(const Store *s, const Scored *answers, const double *values, int64_t n) {
    /* room per field: the word, ' ', '\t' and the score; the last field also room for
     * the 16-byte copy of render_write_fields and the formatter's terminating zero */
    int64_t size = 16 + 1;
    for (int64_t i = 0; i < n; i++) {
        if (answers[i].word >= s->vocab_size)
            return -1;
        size_t length;
        store_word(s, answers[i].word, &length);
        double value = values ? values[i] : answers[i].score;
        size += (int64_t)length + 2 + (fabs(value) < 1e4 ? SHORT_SCORE : LONG_SCORE);
    }
    return size;
}

char *render_write_fields(const Store *s, const Scored *answers, const double *values, int64_t n, char *out) {
    for (int64_t i = 0; i < n; i++) {
        if (i)
            *out++ = '\t';
        size_t length;
        const char *word = store_word(s, answers[i].word, &length);
        /* most words are short: copy a fixed 16 bytes (the room after the word is at
         * least that), the bytes past the word are overwritten next */
        if (length <= 16 && (size_t)(word - s->word_bytes) + 16 <= s->word_bytes_len)
            memcpy(out, word, 16);
        else
            memcpy(out, word, length);
        out += length;
        *out++ = ' ';
        out = append_score(out, values ? values[i] : answers[i].score);
    }
    return out;
}

/* ---------------------------------------------------------------- JSON text */

/* Length of the UTF-8 character at ``p`` (``left`` bytes there) as Python's strict decoder
 * takes it, or 0 when none starts there (an invalid, overlong, surrogate or cut sequence). */
static size_t utf8_char(const uint8_t *p, size_t left) {
    uint8_t c = p[0];
    if (c < 0x80)
        return 1;
    size_t length;
    uint8_t low = 0x80, high = 0xBF;  /* the allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        length = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        length = 3;
        if (c == 0xE0)
            low = 0xA0;  /* overlong */
        else if (c == 0xED)
            high = 0x9F;  /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        length = 4;
        if (c == 0xF0)
            low = 0x90;  /* overlong */
        else if (c == 0xF4)
            high = 0x8F;  /* past U+10FFFF */
    } else {
        return 0;
    }
    if (left < length || p[1] < low || p[1] > high)
        return 0;
    for (size_t i = 2; i < length; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return length;
}

static int is_utf8(const uint8_t *text, size_t n) {
    for (size_t i = 0, step; i < n; i += step)
        if (!(step = utf8_char(text + i, n - i)))
            return 0;
    return 1;
}

/* One character of a JSON string as json.dumps(ensure_ascii=False) escapes it. */
static void append_escaped(Text *t, uint8_t c) {
    static const char hex[] = "0123456789abcdef";
    switch (c) {
    case '"': APPEND(t, "\\\""); return;
    case '\\': APPEND(t, "\\\\"); return;
    case '\b': APPEND(t, "\\b"); return;
    case '\f': APPEND(t, "\\f"); return;
    case '\n': APPEND(t, "\\n"); return;
    case '\r': APPEND(t, "\\r"); return;
    case '\t': APPEND(t, "\\t"); return;
    default: {
        char code[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
        render_text_append(t, code, 6);
    }
    }
}

/* The JSON string of ``text`` decoded with Python's ``backslashreplace`` (UTF-8 text as it
 * is, each byte of no character as the four characters \xHH), quotes included. */
static void append_string(Text *t, const uint8_t *text, size_t n) {
    static const char hex[] = "0123456789abcdef";
    APPEND(t, "\"");
    size_t plain = 0;  /* text[plain .. i) goes out as it is */
    for (size_t i = 0; i < n;) {
        uint8_t c = text[i];
        size_t step = c >= 0x20 && c != '"' && c != '\\' ? utf8_char(text + i, n - i) : 0;
        if (step) {
            i += step;
            continue;
        }
        render_text_append(t, text + plain, i - plain);
        if (c < 0x20 || c == '"' || c == '\\') {
            append_escaped(t, c);
        } else {  /* a byte of no character: \xHH, its backslash escaped in JSON */
            char code[5] = {'\\', '\\', 'x', hex[c >> 4], hex[c & 15]};
            render_text_append(t, code, 5);
        }
        plain = ++i;
    }
    render_text_append(t, text + plain, n - plain);
    APPEND(t, "\"");
}

static void append_base64(Text *t, const uint8_t *bytes, size_t n) {
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *at = room(t, (n + 2) / 3 * 4);
    if (!at)
        return;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t group = (uint32_t)bytes[i] << 16 | (i + 1 < n ? (uint32_t)bytes[i + 1] << 8 : 0) |
                         (i + 2 < n ? bytes[i + 2] : 0);
        *at++ = alphabet[group >> 18];
        *at++ = alphabet[group >> 12 & 63];
        *at++ = i + 1 < n ? alphabet[group >> 6 & 63] : '=';
        *at++ = i + 2 < n ? alphabet[group & 63] : '=';
    }
    t->len += (n + 2) / 3 * 4;
}

/* ``"name": "text"`` and, when ``text`` is not UTF-8, ``, "name_bytes": "base64"``
 * (fastsubs/jsonl.py), each after ``, `` unless ``first``. */
static void append_text_field(Text *t, const char *name, const uint8_t *text, size_t n, int first) {
    if (!first)
        APPEND(t, ", ");
    APPEND(t, "\"");
    render_text_append(t, name, strlen(name));
    APPEND(t, "\": ");
    append_string(t, text, n);
    if (!is_utf8(text, n)) {
        APPEND(t, ", \"");
        render_text_append(t, name, strlen(name));
        APPEND(t, "_bytes\": \"");
        append_base64(t, text, n);
        APPEND(t, "\"");
    }
}

/* The fields every JSON object of a position starts with, its opening brace included. */
static void append_place(Text *t, const Place *place) {
    APPEND(t, "{\"sentence\": ");
    append_integer(t, place->line);
    if (place->name && place->id) {
        append_text_field(t, "name", place->name, place->name_len, 0);
        append_text_field(t, "id", place->id, place->id_len, 0);
    }
    APPEND(t, ", \"position\": ");
    append_integer(t, place->position);
    append_text_field(t, "word", place->word, place->word_len, 0);
}

static void append_word(Text *t, const Store *s, uint32_t id) {
    size_t length;
    const char *word = store_word(s, id, &length);
    render_text_append(t, word, length);
}

/* A vocabulary word as a JSON string (vocabulary words are UTF-8: the indexer refuses others). */
static void append_word_string(Text *t, const Store *s, uint32_t id) {
    size_t length;
    const char *word = store_word(s, id, &length);
    append_string(t, (const uint8_t *)word, length);
}

/* ---------------------------------------------------------------- positions */

static void render_fields(Text *t, const Store *s, const Rendering *r, const Scored *answers,
                          const double *probabilities, int64_t n) {
    const double *values = NULL;
    if (r->normalize) {  /* -z: down to the first p / sum p below the floor */
        int64_t kept = 0;
        while (kept < n && !(probabilities[kept] < NORMALIZED_FLOOR))
            kept++;
        n = kept;
        values = probabilities;
    }
    int64_t size = render_fields_size(s, answers, values, n);
    char *at = size < 0 ? NULL : room(t, (size_t)size);
    if (at)
        t->len += (size_t)(render_write_fields(s, answers, values, n, at) - at);
    APPEND(t, "\n");
}

/* The position's r->draws draws into ``draws``: their number.  None without --sample (then
 * ``probabilities`` is not made: chunk.c), none where the position lists nothing, and none
 * where every listed score is -inf (log10 of 0): each p / sum p is then 0 (search.c), the
 * first, the best, too, so there is no mass to draw in proportion to
 * (docs/output-formats.md).  Each position's stream is seeded by the seed, its line and
 * its position (sample.h). */
static int64_t position_draws(const Rendering *r, const Place *place, const double *probabilities, int64_t n,
                              int64_t *draws, double *cumulative) {
    if (!r->draws || !n)
        return 0;
    if (!(probabilities[0] > 0.0))
        return 0;
    sample_draws(probabilities, n, r->seed, (uint64_t)place->line, (uint64_t)place->position, r->draws, draws,
                 cumulative);
    return r->draws;
}

static void render_samples(Text *t, const Store *s, const Rendering *r, const Place *place, const Scored *answers,
                           const double *probabilities, int64_t n, int64_t *draws, double *cumulative) {
    int64_t drawn = position_draws(r, place, probabilities, n, draws, cumulative);
    if (r->kind == RENDER_SAMPLE_JSON) {
        append_place(t, place);
        APPEND(t, ", \"samples\": [");
        for (int64_t d = 0; d < drawn; d++) {
            if (d)
                APPEND(t, ", ");
            append_word_string(t, s, answers[draws[d]].word);
        }
        APPEND(t, "]}\n");
        return;
    }
    for (int64_t d = 0; d < drawn; d++) {
        if (place->name && place->id) {
            render_text_append(t, place->name, place->name_len);
            APPEND(t, "\t");
            render_text_append(t, place->id, place->id_len);
            APPEND(t, "\t");
        }
        render_text_append(t, place->word, place->word_len);
        APPEND(t, "\t");
        append_word(t, s, answers[draws[d]].word);
        APPEND(t, "\n");
    }
}

/* ---------------------------------------------------------------- columns */

static void render_columns(Text *columns, const Rendering *r, const Place *place, const Scored *answers,
                           const double *probabilities, int64_t n, int64_t *draws, double *cumulative) {
    int64_t drawn = position_draws(r, place, probabilities, n, draws, cumulative);
    int targets = place->name && place->id;
    ColumnItem_PLACES row = {place->line, place->position, n, drawn, (int64_t)place->word_len,
                    targets ? (int64_t)place->name_len : 0, targets ? (int64_t)place->id_len : 0,
                    (int64_t)(!is_utf8(place->word, place->word_len)) |
                        (int64_t)(targets && !is_utf8(place->name, place->name_len)) << 1 |
                        (int64_t)(targets && !is_utf8(place->id, place->id_len)) << 2};
    render_text_append(&columns[COLUMN_PLACES], &row, sizeof(row));
    for (int64_t i = 0; i < n; i++) {
        ColumnItem_SCORES score = answers[i].score;
        ColumnItem_SUBSTITUTES word = answers[i].word;
        render_text_append(&columns[COLUMN_SCORES], &score, sizeof(score));
        render_text_append(&columns[COLUMN_SUBSTITUTES], &word, sizeof(word));
    }
    _Static_assert(_Generic((ColumnItem_PROBABILITIES)0, double: 1, default: 0), "p / sum p are appended whole");
    if (r->normalize)
        render_text_append(&columns[COLUMN_PROBABILITIES], probabilities, (size_t)n * sizeof(ColumnItem_PROBABILITIES));
    for (int64_t d = 0; d < drawn; d++) {
        ColumnItem_DRAWS word = answers[draws[d]].word;
        render_text_append(&columns[COLUMN_DRAWS], &word, sizeof(word));
    }
    _Static_assert(sizeof(ColumnItem_WORDS) == 1 && sizeof(ColumnItem_NAMES) == 1 && sizeof(ColumnItem_RECORD_IDS) == 1,
                   "the text columns hold bytes");
    render_text_append(&columns[COLUMN_WORDS], place->word, place->word_len);
    if (targets) {
        render_text_append(&columns[COLUMN_NAMES], place->name, place->name_len);
        render_text_append(&columns[COLUMN_RECORD_IDS], place->id, place->id_len);
    }
}

/* ---------------------------------------------------------------- a position */

/* A score in JSON: as Python's repr() writes it, or null for -inf (log10 of 0), which JSON
 * cannot write (Python's json.dumps writes -Infinity, which strict parsers refuse). */
static void append_json_score(Text *t, double value) {
    if (isfinite(value))
        render_text_repr(t, value);
    else
        APPEND(t, "null");
}

void render_position(Text *t, const Store *s, const Rendering *r, const Place *place, const Scored *answers,
                     const double *probabilities, int64_t n, int64_t *draws, double *cumulative) {
    switch (r->kind) {
    case RENDER_LINE:
        render_text_append(t, place->word, place->word_len);
        APPEND(t, "\t");
        render_fields(t, s, r, answers, probabilities, n);
        return;
    case RENDER_FIELDS:
        render_fields(t, s, r, answers, probabilities, n);
        return;
    case RENDER_JSON:
        append_place(t, place);
        APPEND(t, ", \"substitutes\": [");
        for (int64_t i = 0; i < n; i++) {
            if (i)
                APPEND(t, ", ");
            APPEND(t, "{\"word\": ");
            append_word_string(t, s, answers[i].word);
            APPEND(t, ", \"lp\": ");
            append_json_score(t, answers[i].score);
            APPEND(t, ", \"p\": ");
            render_text_repr(t, probabilities[i]);
            APPEND(t, "}");
        }
        APPEND(t, "]}\n");
        return;
    case RENDER_COLUMNS:
        render_columns(t, r, place, answers, probabilities, n, draws, cumulative);
        return;
    default:
        render_samples(t, s, r, place, answers, probabilities, n, draws, cumulative);
    }
}
