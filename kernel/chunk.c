/* Input lines into output: see chunk.h. */
#include "chunk.h"

#include <limits.h>
#include <stdio.h>

/* ---------------------------------------------------------------- scratch */

int chunk_scratch_init(Scratch *scratch, const Rendering *r) {
    memset(scratch, 0, sizeof(*scratch));
    return r->draws > 0 && !(scratch->draws = malloc((size_t)r->draws * sizeof(int64_t))) ? -1 : 0;
}

void chunk_scratch_free(Scratch *scratch) {
    free(scratch->tokens);
    free(scratch->ids);
    free(scratch->probabilities);
    free(scratch->cumulative);
    free(scratch->draws);
    memset(scratch, 0, sizeof(*scratch));
}

/* ---------------------------------------------------------------- tokens */

/* ASCII whitespace, as bytes.split() and int() take it (CPython's Py_ISSPACE). */
static int is_space(uint8_t c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

static int is_marker(const uint8_t *token, size_t n) {
    return (n == 3 && !memcmp(token, "<s>", 3)) || (n == 4 && !memcmp(token, "</s>", 4));
}

/* The tokens of ``text`` into scratch->tokens: their number, or -1 when out of memory. */
static int64_t tokenize(Span text, Scratch *scratch) {
    int64_t n = 0;
    for (size_t i = 0; i < text.len;) {
        while (i < text.len && is_space(text.text[i]))
            i++;
        size_t start = i;
        while (i < text.len && !is_space(text.text[i]))
            i++;
        if (i == start || is_marker(text.text + start, i - start))
            continue;
        if (GROW64(scratch->tokens, scratch->cap_tokens, n + 1) < 0)
            return -1;
        scratch->tokens[n++] = (Span){text.text + start, i - start};
    }
    return n;
}

/* ---------------------------------------------------------------- -t records */

typedef struct {
    Span name, id;
    int64_t position;           /* the target token, from 0 */
    int64_t n_tokens;           /* the text's tokens, in scratch->tokens */
} TargetRecord;

/* Digits Python's int() reads at most (sys.int_info.default_max_str_digits): a longer
 * number is a ValueError there, so no whole number here either. */
#define MAX_STR_DIGITS 4300

/* Whether ``field`` is a whole number as Python's ``int(field)`` reads bytes: ASCII
 * whitespace around it, a sign, decimal digits with single underscores between them.
 * If so, its digits without underscores and leading zeros go to ``digits`` (at least
 * "0") and ``*negative`` says whether it is below zero. */
static int whole_number(Span field, Text *digits, int *negative) {
    size_t i = 0, end = field.len, count = 0;
    const uint8_t *c = field.text;
    while (i < end && is_space(c[i]))
        i++;
    while (end > i && is_space(c[end - 1]))
        end--;
    *negative = i < end && c[i] == '-';
    if (i < end && (c[i] == '-' || c[i] == '+'))
        i++;
    if (i == end || c[i] < '0' || c[i] > '9')
        return 0;
    for (; i < end; i++) {
        if (c[i] == '_' && i + 1 < end && c[i + 1] >= '0' && c[i + 1] <= '9')
            continue;
        if (c[i] < '0' || c[i] > '9')
            return 0;
        count++;
        if (c[i] != '0' || digits->len)
            render_text_append(digits, c + i, 1);
    }
    if (!digits->len)
        render_text_append(digits, "0", 1);
    *negative = *negative && !(digits->len == 1 && digits->data[0] == '0');
    return count <= MAX_STR_DIGITS;
}

/* What a message quotes of an offending field at most: a field may be a whole line of any
 * length, and the message one line to read. */
#define QUOTED_BYTES 40

/* Appends `` (N bytes)`` after a quoted field cut to its first QUOTED_BYTES. */
static void append_cut_length(Text *t, size_t len, const char *unit) {
    char note[64];
    snprintf(note, sizeof(note), "\xe2\x80\xa6 (%zu %s)", len, unit);
    render_text_append(t, note, strlen(note));
}

/* Appends ``field`` (its first QUOTED_BYTES, then its length) as Python's repr(bytes)
 * writes it: b'...' (b"..." when it holds a ' and no "), \\ \t \n \r and the quote
 * escaped, other bytes outside ' ' ... '~' as \xhh. */
static void append_bytes_repr(Text *t, Span whole) {
    static const char hex[] = "0123456789abcdef";
    Span field = {whole.text, whole.len > QUOTED_BYTES ? QUOTED_BYTES : whole.len};
    char quote = memchr(field.text, '\'', field.len) && !memchr(field.text, '"', field.len) ? '"' : '\'';
    char opening[2] = {'b', quote};
    render_text_append(t, opening, 2);
    for (size_t i = 0; i < field.len; i++) {
        uint8_t c = field.text[i];
        const char *escape = c == '\t' ? "\\t" : c == '\n' ? "\\n" : c == '\r' ? "\\r" : NULL;
        if (escape) {
            render_text_append(t, escape, 2);
        } else if (c < ' ' || c >= 0x7f) {
            char code[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
            render_text_append(t, code, 4);
        } else {
            if (c == (uint8_t)quote || c == '\\')
                render_text_append(t, "\\", 1);
            render_text_append(t, &c, 1);
        }
    }
    render_text_append(t, &quote, 1);
    if (whole.len > field.len)
        append_cut_length(t, whole.len, "bytes");
}

static void append_text(Text *t, const char *text) {
    render_text_append(t, text, strlen(text));
}

/* Reads the -t record ``line`` (its tokens into scratch->tokens), whose text has ``outside``
 * tokens more than the line holds (a RecordWindow's): 1, 0 with what is wrong in
 * ``problem``, or -1 when out of memory. */
static int read_record(Span line, int64_t outside, TargetRecord *record, Scratch *scratch, Text *problem) {
    size_t len = line.len;
    while (len && (line.text[len - 1] == '\r' || line.text[len - 1] == '\n'))
        len--;
    Span fields[4];
    int n_fields = 0;
    size_t start = 0;
    for (size_t i = 0; i < len && n_fields < 3; i++)
        if (line.text[i] == '\t') {
            fields[n_fields++] = (Span){line.text + start, i - start};
            start = i + 1;
        }
    fields[n_fields++] = (Span){line.text + start, len - start};
    char number[80];
    if (n_fields != 4) {
        snprintf(number, sizeof(number), "%d", n_fields);
        append_text(problem, "expected 'name<TAB>id<TAB>index<TAB>text', found ");
        append_text(problem, number);
        append_text(problem, " field(s)");
        return problem->failed ? -1 : 0;
    }
    if ((record->n_tokens = tokenize(fields[3], scratch)) < 0)
        return -1;
    Text digits = {0};
    int negative, ok = whole_number(fields[2], &digits, &negative);
    render_text_append(&digits, "", 1);  /* a C string from here */
    if (digits.failed) {
        render_text_free(&digits);
        return -1;
    }
    if (!ok) {
        append_text(problem, "expected a whole-number token index, found ");
        append_bytes_repr(problem, fields[2]);
    } else {
        /* 18 digits fit an int64_t; a longer number is outside anyway */
        record->position = strlen(digits.data) <= 18 ? strtoll(digits.data, NULL, 10) : INT64_MAX;
        if (negative || record->position > record->n_tokens + outside) {
            snprintf(number, sizeof(number), " is outside 0 \xe2\x80\xa6 %lld for this text",
                     (long long)(record->n_tokens + outside));
            size_t shown = strlen(digits.data);
            append_text(problem, negative ? "token index -" : "token index ");
            render_text_append(problem, digits.data, shown > QUOTED_BYTES ? QUOTED_BYTES : shown);
            if (shown > QUOTED_BYTES)
                append_cut_length(problem, shown, "digits");
            append_text(problem, number);
            ok = 0;
        }
    }
    render_text_free(&digits);
    if (problem->failed)
        return -1;
    record->name = fields[0];
    record->id = fields[1];
    return ok;
}

/* ---------------------------------------------------------------- positions */

int chunk_render_positions(Searcher *searcher, const ChunkRequest *request, Place *place, const uint32_t *sentence,
                           int n, int first, int last, const Span *words, Scratch *scratch, Text *out,
                           Failure *failure) {
    const Rendering *r = &request->rendering;
    /* p / sum p only where the output shows or draws from it */
    int probabilities = r->normalize || r->kind == RENDER_JSON || r->draws > 0;
    int64_t first_position = place->position;
    for (int target = first; target < last; target++) {
        if (request->interrupted && (target - first) % CHECK_POSITIONS == CHECK_POSITIONS - 1 &&
            request->interrupted()) {
            common_fail(failure, FS_EINTERRUPTED, "interrupted");
            return -1;
        }
        if (search_position(searcher, sentence, n, target, &request->limits) < 0) {
            *failure = searcher->reader.failure;
            return -1;
        }
        int64_t listed = searcher->n_listed;
        if (probabilities && (GROW64(scratch->probabilities, scratch->cap_probabilities, listed) < 0 ||
                              (r->draws && GROW64(scratch->cumulative, scratch->cap_cumulative, listed) < 0))) {
            common_fail(failure, FS_ENOMEM, "out of memory");
            return -1;
        }
        if (probabilities)
            search_normalize_scored(searcher->listed, listed, scratch->probabilities);
        const Span *word = &words[target - first];
        place->position = first_position + (target - first);
        place->word = word->text;
        place->word_len = word->len;
        render_position(out, searcher->reader.store, r, place, searcher->listed, scratch->probabilities, listed,
                        scratch->draws, scratch->cumulative);
    }
    for (int i = 0; i < (r->kind == RENDER_COLUMNS ? COLUMN_COUNT : 1); i++)
        if (out[i].failed) {
            common_fail(failure, FS_ENOMEM, "out of memory");
            return -1;
        }
    return 0;
}

/* ---------------------------------------------------------------- lines */

/* Appends RENDER_COLUMNS's columns to ``out`` as chunk.h says, and empties them. */
static void pack_columns(Text *out, Text *columns) {
    for (int i = 0; i < COLUMN_COUNT; i++) {
        ColumnLength length = (ColumnLength)columns[i].len;
        render_text_append(out, &length, sizeof(length));
    }
    for (int i = 0; i < COLUMN_COUNT; i++) {
        render_text_append(out, columns[i].data, columns[i].len);
        render_text_free(&columns[i]);
    }
}

static const Span EOS = {(const uint8_t *)"</s>", 4};
/* A line searched whole: <s> before it, </s> after it. */
static const Window WHOLE_LINE = {0, 0, 0, 1, 1};
/* No tokens of a record's text outside its line. */
static const RecordWindow WHOLE_RECORD = {0, 0};

/* Whether the text of ``record`` (of ``n_tokens`` tokens, ``w`` outside them) holds its
 * target: one of its tokens, or the </s> after the whole text's last. */
static int holds_target(const RecordWindow *w, const TargetRecord *record) {
    int64_t at = record->position - w->before;
    return at >= 0 && (at < record->n_tokens || (at == record->n_tokens && !w->after));
}

int64_t chunk_render_lines(Searcher *searcher, const ChunkRequest *request, const Span *lines, int64_t n,
                           int64_t first_line, Text *out, Text *problem, Failure *failure) {
    const Store *s = searcher->reader.store;
    /* a word the vocabulary lacks is <unk>, or without it a word that matches no n-gram;
     * so are <s> and </s> in a model without them */
    uint32_t unknown = s->unk, bos = store_word_id(s, "<s>", 3), eos = store_word_id(s, "</s>", 4);
    bos = bos == FS_NO_WORD ? unknown : bos;
    eos = eos == FS_NO_WORD ? unknown : eos;
    Scratch scratch;
    Text columns[COLUMN_COUNT] = {{0}};
    Text *target = request->rendering.kind == RENDER_COLUMNS ? columns : out;
    int64_t done = 0;
    *failure = (Failure){0};
    if (chunk_scratch_init(&scratch, &request->rendering) < 0) {
        common_fail(failure, FS_ENOMEM, "out of memory");
        return -1;
    }
    for (; done < n; done++) {
        Span line = lines[done];
        Place place = {.line = first_line + done};
        int64_t n_tokens, first, last;
        const Window *window = request->window ? request->window : &WHOLE_LINE;
        Window record_edges;
        if (request->targets) {
            const RecordWindow *outside = request->record_window ? request->record_window : &WHOLE_RECORD;
            TargetRecord record;
            int read = read_record(line, outside->before + outside->after, &record, &scratch, problem);
            if (read <= 0) {
                if (read < 0)
                    common_fail(failure, FS_ENOMEM, "out of memory");
                break;
            }
            if (!holds_target(outside, &record)) {
                common_fail(failure, FS_EARGUMENT, "a record's window does not hold its target");
                break;
            }
            if (request->rendering.kind == RENDER_FIELDS && !request->record_window) {
                /* the record itself, then its fields */
                render_text_append(out, line.text, line.len);
                if (!line.len || line.text[line.len - 1] != '\n')
                    render_text_append(out, "\n", 1);
            }
            place.name = record.name.text;
            place.name_len = record.name.len;
            place.id = record.id.text;
            place.id_len = record.id.len;
            place.position = record.position;
            n_tokens = record.n_tokens;
            record_edges = (Window){0, 0, 0, outside->before == 0, outside->after == 0};
            window = &record_edges;
            first = window->at_start + record.position - outside->before;
            last = first + 1;
        } else {
            if ((n_tokens = tokenize(line, &scratch)) < 0) {
                common_fail(failure, FS_ENOMEM, "out of memory");
                break;
            }
            if (window->lead < 0 || window->trail < 0 || window->lead + window->trail > n_tokens) {
                common_fail(failure, FS_EARGUMENT, "a window's context is more than its tokens");
                break;
            }
            place.position = window->first_position;
            first = window->at_start + window->lead;
            last = window->at_start + n_tokens - window->trail + (window->at_end && request->eos);
        }
        if (n_tokens > INT_MAX - 2) {
            common_fail(failure, FS_EARGUMENT, "a line of more than INT_MAX - 2 tokens");
            break;
        }
        /* the sentence's ids (<s>, the tokens, </s>, as far as the window holds them), and
         * the words its positions show */
        if (GROW64(scratch.ids, scratch.cap_ids, n_tokens + 2) < 0 ||
            GROW64(scratch.tokens, scratch.cap_tokens, n_tokens + 1) < 0) {
            common_fail(failure, FS_ENOMEM, "out of memory");
            break;
        }
        int start = window->at_start, n_ids = start + (int)n_tokens + window->at_end;
        if (start)
            scratch.ids[0] = bos;
        for (int64_t i = 0; i < n_tokens; i++) {
            uint32_t id = store_word_id(s, (const char *)scratch.tokens[i].text, scratch.tokens[i].len);
            scratch.ids[start + i] = id == FS_NO_WORD ? unknown : id;
        }
        if (window->at_end)
            scratch.ids[start + n_tokens] = eos;
        scratch.tokens[n_tokens] = EOS;
        if (chunk_render_positions(searcher, request, &place, scratch.ids, n_ids, (int)first, (int)last,
                                   scratch.tokens + first - start, &scratch, target, failure) < 0)
            break;
    }
    chunk_scratch_free(&scratch);
    if (target == columns) {
        pack_columns(out, columns);
        if (out->failed && !failure->code)
            common_fail(failure, FS_ENOMEM, "out of memory");
    }
    return failure->code ? -1 : done;
}
