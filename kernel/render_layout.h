/* The layouts of render.h that Python reads as they are (fastsubs._kernel.RENDER,
 * module_format.c): the kinds of output, and the columns of RENDER_COLUMNS with their item
 * types, their framing and the row of each position in them, each in one list.  Apart from render.h, with nothing above <stdint.h>, so that the
 * glue that exports them reads them alone. */
#ifndef FASTSUBS_RENDER_LAYOUT_H
#define FASTSUBS_RENDER_LAYOUT_H

#include <stdint.h>

/* The kinds of output, in their order (fastsubs.core.Render takes names and values from here). */
#define RENDER_KINDS(X) \
    X(LINE)                     /* word<TAB>fields\n */ \
    X(FIELDS)                   /* fields\n (a -t record's line) */ \
    X(JSON)                     /* {...}\n */ \
    X(SAMPLE_LINES)             /* [name<TAB>id<TAB>]word<TAB>sub\n, once per draw */ \
    X(SAMPLE_JSON)              /* {..., "samples": [...]}\n */ \
    X(COLUMNS)                  /* the columns below; draws too when r->draws > 0 */

#define RENDER_KIND(name) RENDER_##name,
enum { RENDER_KINDS(RENDER_KIND) };

/* A position in COLUMN_PLACES (int64 fields: numpy reads them as one structured array). */
typedef struct {
    int64_t line, position;
    int64_t listed, drawn;      /* its items in COLUMN_SUBSTITUTES and COLUMN_DRAWS */
    int64_t word_len, name_len, id_len;  /* its bytes in COLUMN_WORDS, COLUMN_NAMES, COLUMN_RECORD_IDS */
    int64_t not_utf8;           /* bit 0: the word is not UTF-8, bit 1: the name, bit 2: the id */
} PlaceRow;

/* The columns of RENDER_COLUMNS, in the order they are packed (8-byte items first, so each
 * starts aligned): name, the type of its items (ColumnItem_<name>, what render.c writes),
 * and their kind as numpy names it ('f' float, 'u' unsigned, 'V' a PlaceRow).  A chunk of
 * them is framed as COLUMN_COUNT lengths in bytes (ColumnLength each), then each column's
 * bytes in this order; fastsubs/pipeline/parquet.py reads them so. */
#define RENDER_COLUMN_LIST(X) \
    X(PLACES, PlaceRow, 'V')            /* one row per position */ \
    X(SCORES, double, 'f')              /* its substitutes' scores */ \
    X(PROBABILITIES, double, 'f')       /* their p / sum p (-z only) */ \
    X(SUBSTITUTES, uint32_t, 'u')       /* their word ids */ \
    X(DRAWS, uint32_t, 'u')             /* the word ids of its draws */ \
    X(WORDS, uint8_t, 'u')              /* the bytes of its word */ \
    X(NAMES, uint8_t, 'u')              /* of a -t record's name */ \
    X(RECORD_IDS, uint8_t, 'u')         /* and of its id */

#define RENDER_COLUMN(name, type, kind) COLUMN_##name,
enum { RENDER_COLUMN_LIST(RENDER_COLUMN) COLUMN_COUNT };
#define RENDER_COLUMN_ITEM(name, type, kind) typedef type ColumnItem_##name;
RENDER_COLUMN_LIST(RENDER_COLUMN_ITEM)

/* The length of a column in a chunk's frame, in bytes. */
typedef int64_t ColumnLength;

#endif
