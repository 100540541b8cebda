/* What the substitutes of one position look like in each output format of fastsubs-query,
 * written in C so that no format costs a Python call per substitute.
 *
 * * text (the original tool's, ai-ku/fastsubs, byte for byte): ``word<TAB>fields`` with the
 *   fields below (``-z``: p / sum p down to the first below NORMALIZED_FLOOR); a -t
 *   record's line gets the fields alone (its caller writes the record before them);
 * * JSON lines: one object per position, as Python's ``json.dumps(..., ensure_ascii=False)``
 *   writes it: ``sentence``, for -t ``name`` and ``id``, ``position``, ``word``, and
 *   ``substitutes`` (``word``, ``lp``, ``p``).  Text that is not UTF-8 follows the rule of
 *   fastsubs/jsonl.py: the field's string with each undecodable byte as ``\xHH``
 *   (Python's ``backslashreplace``), and ``<field>_bytes`` holding the bytes in base64;
 * * samples (--sample N): N draws (sample.h) as ``word<TAB>sub`` lines (``name<TAB>id<TAB>``
 *   before them for -t), or as one JSON object whose ``samples`` lists them; none at a
 *   position that lists nothing or whose every listed score is -inf (no mass to draw from);
 * * columns (Parquet, fastsubs/pipeline/parquet.py): no text at all but the numbers of each position
 *   appended to the columns below, which the chunk's caller packs (chunk.h) and Python
 *   hands to Apache Arrow without a loop per position.
 *
 * Numbers in JSON are written as Python's repr() writes them (the shortest digits that read
 * back as the number: Ryu, kernel/ryu/), so the JSON is Python's to the byte. */
#ifndef FASTSUBS_RENDER_H
#define FASTSUBS_RENDER_H

#include "render_layout.h"
#include "search.h"

/* The original tool's text: ``word score`` fields joined by tabs, each score as ``"%.8f"``
 * writes it, the words read in place from the index. */
/* Bytes render_write_fields needs at most for the fields of ``answers`` with ``values`` (NULL: their
 * scores); -1 if a word is outside the vocabulary. */
int64_t render_fields_size(const Store *s, const Scored *answers, const double *values, int64_t n);
/* Writes the fields at ``out`` (room: render_fields_size); returns the end of what it wrote. */
char *render_write_fields(const Store *s, const Scored *answers, const double *values, int64_t n, char *out);
/* -z lists substitutes down to the first whose p / Σp is below this (the original's rule). */
#define NORMALIZED_FLOOR 1e-8


/* A growing byte buffer. */
typedef struct {
    char *data;
    size_t len, cap;
    int failed;                 /* out of memory: what it holds is incomplete */
} Text;

void render_text_append(Text *t, const void *bytes, size_t n);
void render_text_free(Text *t);
/* Appends ``value`` (finite) as Python's repr(float) writes it. */
void render_text_repr(Text *t, double value);

/* Where one position's substitutes were asked for. */
typedef struct {
    int64_t line;               /* the input line, from 1 */
    int64_t position;           /* the token, from 0; the token count means </s> */
    const uint8_t *word;        /* the token there, as written */
    size_t word_len;
    const uint8_t *name, *id;   /* a -t record's name and id, or NULL */
    size_t name_len, id_len;
} Place;

typedef struct {
    int kind;
    int normalize;              /* text: p / sum p instead of scores (-z) */
    int64_t draws;              /* samples: draws per position */
    uint64_t seed;
} Rendering;

/* Appends the output of one position (its ``n`` substitutes, best first, with p / sum p in
 * ``probabilities``) to ``t``, for RENDER_COLUMNS to the COLUMN_COUNT texts at ``t``;
 * ``draws``/``cumulative``: room for r->draws and n items (samples). */
void render_position(Text *t, const Store *s, const Rendering *r, const Place *place, const Scored *answers,
                     const double *probabilities, int64_t n, int64_t *draws, double *cumulative);

#endif
