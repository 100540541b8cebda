/* fastsubs-query's input lines made into its output in C, a chunk of lines at a time, so
 * that a query crosses from Python into C once per chunk, not once or twice per line.
 *
 * A plain line is a sentence: its tokens are split as ``bytes.split()`` splits (on ASCII
 * whitespace), ``<s>`` and ``</s>`` tokens dropped (fastsubs/tokens.py ``tokenize``, the
 * original tool's rule), and every token has a position, plus the closing ``</s>``
 * unless left out (--no-eos).  A -t record ``name<TAB>id<TAB>index<TAB>text`` has one
 * position, its token ``index`` (from 0; the token count means ``</s>``); the rule that
 * reads it, and the message that names what is wrong with a bad one, live here alone.
 * Each position is searched (search.h) and written (render.h). */
#ifndef FASTSUBS_CHUNK_H
#define FASTSUBS_CHUNK_H

#include "render.h"

/* Bytes held elsewhere (a line, a token, a word). */
typedef struct {
    const uint8_t *text;
    size_t len;
} Span;

/* A window of one long plain line (chunk.h's chunk_render_lines with a single line): its text is
 * ``lead`` tokens of context, the tokens whose positions it writes, then ``trail`` tokens
 * of context (the order - 1 on each side that a position's terms read, docs/algorithm.md),
 * so that a line of any length is searched in bounded memory, with the same output as
 * the whole line's.  ``at_start``: the line's <s> comes before the text (no lead then but
 * what the caller gives); ``at_end``: its </s> comes after it (a position too, with eos). */
typedef struct {
    int64_t first_position;     /* the number of the window's first position in its line */
    int64_t lead, trail;
    int at_start, at_end;
} Window;

/* A -t record too long to hold whole (fastsubs/pipeline/long_lines.py): its text field holds
 * only the tokens around its target (the order - 1 on each side that the target's terms
 * read, as far as the text has them), and ``before`` and ``after`` count the tokens of the
 * whole text before and after those, so that its token count, the number of its target
 * and the <s> and </s> around its text are those of the whole record.  Its line is not
 * written before its fields (RENDER_FIELDS): the caller writes the whole record. */
typedef struct {
    int64_t before, after;
} RecordWindow;

/* How a chunk's lines are made into output. */
typedef struct {
    SearchLimits limits;
    Rendering rendering;        /* RENDER_FIELDS: each -t record's line is written before its fields */
    int targets;                /* the lines are -t records */
    int eos;                    /* a sentence's closing </s> is a position too */
    const Window *window;       /* the one line is a window of a longer line; NULL: whole lines */
    const RecordWindow *record_window;  /* the one -t record holds a window of its text; NULL: whole */
    /* Asked every CHECK_POSITIONS positions, if given: nonzero stops the work (FS_EINTERRUPTED),
     * so that a signal is acted on within a second even in the middle of a long line. */
    int (*interrupted)(void);
} ChunkRequest;

/* Positions searched between two calls of ChunkRequest.interrupted. */
#define CHECK_POSITIONS 64

/* What the positions of one line need besides the searcher, kept from line to line. */
typedef struct {
    Span *tokens;
    int64_t cap_tokens;
    uint32_t *ids;
    int64_t cap_ids;
    double *probabilities;      /* p / sum p of a position's substitutes */
    int64_t cap_probabilities;
    double *cumulative;         /* room for sampling */
    int64_t cap_cumulative;
    int64_t *draws;             /* room for the rendering's draws */
} Scratch;

/* 0, or -1 when out of memory. */
int chunk_scratch_init(Scratch *scratch, const Rendering *r);
void chunk_scratch_free(Scratch *scratch);

/* Appends the output of positions first ... last - 1 of ``sentence`` (n ids, <s> and </s>
 * included; 1 <= first <= last <= n - 1 ... n), the one at ``first`` shown as words[0] and
 * numbered place->position (from 0), and so on: 0, or -1 with ``failure`` set. */
int chunk_render_positions(Searcher *searcher, const ChunkRequest *request, Place *place, const uint32_t *sentence,
                           int n, int first, int last, const Span *words, Scratch *scratch, Text *out,
                           Failure *failure);

/* Appends the output of lines[0 .. n), numbered first_line ...: the number of lines done,
 * (for RENDER_COLUMNS: COLUMN_COUNT int64 lengths, then the columns of render.h, each that
 * long, of the lines done),
 * which is n, or that of the lines before a -t record that cannot be read (its message,
 * naming what was expected, in ``problem``, and no output of it in ``out``); or -1 with
 * ``failure`` set. */
int64_t chunk_render_lines(Searcher *searcher, const ChunkRequest *request, const Span *lines, int64_t n,
                           int64_t first_line, Text *out, Text *problem, Failure *failure);

#endif
