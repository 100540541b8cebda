/* The layouts of render.h that Python reads as they are (fastsubs._kernel.RENDER,
 * module_format.c): the kinds of output, and the columns of RENDER_COLUMNS with the row of
 * each position in them.  Apart from render.h, with nothing above <stdint.h>, so that the
 * glue that exports them reads them alone. */
#ifndef FASTSUBS_RENDER_LAYOUT_H
#define FASTSUBS_RENDER_LAYOUT_H

#include <stdint.h>

enum {
    RENDER_LINE,                /* word<TAB>fields\n */
    RENDER_FIELDS,              /* fields\n (a -t record's line) */
    RENDER_JSON,                /* {...}\n */
    RENDER_SAMPLE_LINES,        /* [name<TAB>id<TAB>]word<TAB>sub\n, once per draw */
    RENDER_SAMPLE_JSON,         /* {..., "samples": [...]}\n */
    RENDER_COLUMNS,             /* the columns below; draws too when r->draws > 0 */
};

/* The columns of RENDER_COLUMNS, in the order they are packed (8-byte items first, so
 * each starts aligned): one PlaceRow per position; its substitutes' scores, their
 * p / sum p (-z only) and their word ids; the word ids of its draws; the bytes of its
 * word, and of a -t record's name and id.  fastsubs/parquet.py reads them in this order. */
enum {
    COLUMN_PLACES, COLUMN_SCORES, COLUMN_PROBABILITIES, COLUMN_SUBSTITUTES, COLUMN_DRAWS, COLUMN_WORDS,
    COLUMN_NAMES, COLUMN_RECORD_IDS, COLUMN_COUNT
};

/* A position in COLUMN_PLACES (int64 fields: numpy reads them as one structured array). */
typedef struct {
    int64_t line, position;
    int64_t listed, drawn;      /* its items in COLUMN_SUBSTITUTES and COLUMN_DRAWS */
    int64_t word_len, name_len, id_len;  /* its bytes in COLUMN_WORDS, COLUMN_NAMES, COLUMN_RECORD_IDS */
    int64_t not_utf8;           /* bit 0: the word is not UTF-8, bit 1: the name, bit 2: the id */
} PlaceRow;

#endif
