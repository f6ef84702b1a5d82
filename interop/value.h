/* value: the in-memory form of what a PyTorch snapshot holds (Python's
 * None/bool/int/float/str/bytes/list/tuple/dict), shared by the two
 * readers (jsonpull.c for JSON, pickle.c for the pickle subset) and the
 * importer (torch_import.c).
 *
 * Ownership: reference counted.  iv_unref frees a value when the last
 * reference goes; containers own a reference to each item.  Dicts keep
 * their items as alternating key, value in `a` (insertion order).
 *
 * Streaming: the readers do not build the big lists.  A list gets a *role*
 * from where it sits (the top-level "segments", each list inside the
 * top-level "device_traces", the top-level "memsnap" extension's "events"),
 * and every item added to a list with a streaming role goes to the sink's
 * item() callback instead, then is dropped.  So a 1M-entry trace never is
 * in memory at once: only the entry being read.
 */
#ifndef MEMSNAP_INTEROP_VALUE_H
#define MEMSNAP_INTEROP_VALUE_H

#include <stddef.h>
#include <stdint.h>

#include "interop.h" /* MSNAP_IMPORT_STEPS_PER_BYTE */

typedef enum iv_type {
    IV_NONE = 0, IV_BOOL, IV_INT, IV_FLOAT, IV_STR, IV_BYTES,
    IV_LIST, IV_TUPLE, IV_DICT, IV_MARK /* pickle's stack mark, never in a tree */
} iv_type;

/* Roles of containers (where they sit in the snapshot dict). */
enum {
    IV_ROLE_NONE = 0,
    IV_ROLE_SEGMENTS,   /* top["segments"]: items streamed */
    IV_ROLE_TRACES,     /* top["device_traces"]: holds the per-device lists */
    IV_ROLE_DEVICE,     /* top["device_traces"][d]: items streamed, index = d */
    IV_ROLE_EXT,        /* top["memsnap"]: our extension dict */
    IV_ROLE_EXT_EVENTS, /* top["memsnap"]["events"]: items streamed */
};

typedef struct ival {
    uint8_t type;      /* iv_type */
    uint8_t role;      /* IV_ROLE_* */
    uint8_t sealed;    /* pickle: already an item of another container, or
                          streamed: it may not change any more */
    uint8_t visited;   /* importer: a segment's blocks list already read */
    uint32_t refs;
    int64_t memo;      /* pickle memo slot holding it, -1 when none */
    uint32_t cache_id; /* importer's cache: frame id (frame dict) or stack id
                          (frames list) once converted; 0 = not yet */
    uint32_t index;    /* IV_ROLE_DEVICE: the device; IV_ROLE_TRACES: lists seen */
    union {
        __int128 i;                                   /* IV_INT, IV_BOOL */
        double f;                                     /* IV_FLOAT */
        struct { char *p; size_t n; } s;              /* IV_STR (UTF-8), IV_BYTES */
        struct { struct ival **v; size_t n, cap; } a; /* LIST, TUPLE, DICT (k,v,k,v) */
    } u;
} ival;

/* A sink for streamed items.  item() takes a borrowed reference; it returns
 * 0, or -1 after writing a one-line message into err (reading stops). */
typedef struct iv_sink {
    void *ctx;
    int (*item)(void *ctx, int role, unsigned index, ival *v, char *err, size_t errlen);
} iv_sink;

ival *iv_new(int type);                    /* NULL on host OOM */
ival *iv_new_str(int type, const char *p, size_t n);
static inline ival *iv_ref(ival *v) { if (v) v->refs++; return v; }
void iv_unref(ival *v);
int iv_push(ival *container, ival *item);  /* takes item's reference; -1 OOM */

/* Dict lookup by string key (borrowed; NULL when absent or not a dict); the
 * first of equal keys wins.  Adds the keys it compared to *steps (the work
 * budget above) when steps is not NULL. */
ival *iv_get(const ival *dict, const char *key, uint64_t *steps);
/* Integer of a value: 0 and *ok = 1 for IV_NONE and a missing value (NULL),
 * the number for INT/BOOL (and a FLOAT with an integral value), *ok = 0 for
 * anything else or out of [lo, hi]. */
int64_t iv_int(const ival *v, int *ok);
uint64_t iv_u64(const ival *v, int *ok);   /* accepts negative int64 as two's complement */
double iv_num(const ival *v, int *ok);     /* int or float */
const char *iv_str(const ival *v);         /* NUL-terminated, NULL if not a str */
int iv_is_str(const ival *v, const char *s);

/* Opens a buffered byte reader used by both parsers. */
typedef struct iv_in {
    int fd;
    unsigned char *buf;
    size_t len, pos;
    uint64_t off;      /* bytes consumed before buf[0] */
    int eof, error;
    uint64_t total;    /* file size for progress reports; 0 = unknown */
    uint64_t steps;    /* work done on this input so far (the budget below) */
    char what[96];     /* "reading NAME" (msnap_progress) */
} iv_in;
int iv_in_open(iv_in *in, const char *path, char *err, size_t errlen);
void iv_in_close(iv_in *in);
int iv_in_fill(iv_in *in);                 /* 1 data, 0 eof, -1 error */
static inline int iv_in_peek(iv_in *in)
{
    if (in->pos == in->len && iv_in_fill(in) <= 0)
        return -1;
    return in->buf[in->pos];
}
static inline int iv_in_get(iv_in *in)
{
    if (in->pos == in->len && iv_in_fill(in) <= 0)
        return -1;
    return in->buf[in->pos++];
}
static inline uint64_t iv_in_offset(const iv_in *in) { return in->off + in->pos; }

/* The work budget.  Everything an import does per piece of input counts in
 * in->steps: a pickle opcode or a JSON value, a container made, a value
 * moved off the pickle stack into a container, a key compared by a dict
 * lookup, a block or table item the importer visits.  Reading is linear, so
 * a real snapshot takes a few steps a byte (docs/interop.md, Limits); an
 * input that would take more than IV_STEPS_PER_BYTE steps for each byte
 * read so far (plus IV_STEPS_BASE, so that small files never meet it) is
 * refused.  It bounds the time of an import by the size of its input
 * whatever shape the input has: the same lookups repeated on one shared
 * dict, or a scan that a future change makes quadratic, ends in a one-line
 * error in well under a second instead of minutes. */
#define IV_STEPS_PER_BYTE MSNAP_IMPORT_STEPS_PER_BYTE /* interop.h */
#define IV_STEPS_BASE (1u << 20)
static inline int iv_over_budget(const iv_in *in)
{
    return in->steps > (uint64_t)IV_STEPS_PER_BYTE * iv_in_offset(in) + IV_STEPS_BASE;
}
/* The budget's message without a position ("N steps of work for B bytes
 * ..."), for a reader to prefix with its own; returns buf. */
const char *iv_budget_why(const iv_in *in, char *buf, size_t len);
/* "byte N: " + iv_budget_why into err, for the importer; returns -1. */
int iv_budget_fail(const iv_in *in, char *err, size_t errlen);

/* The readers.  Both return the top-level value (with streamed lists
 * empty) or NULL with a message "byte N: ..." (JSON: "line L, byte N: ...")
 * in err. */
ival *iv_read_json(iv_in *in, const iv_sink *sink, char *err, size_t errlen);
ival *iv_read_pickle(iv_in *in, const iv_sink *sink, char *err, size_t errlen);

/* Serializes v as JSON text into a malloc'd string (for free-form settings);
 * NULL on host OOM or when the text (with the scratch text of non-string
 * keys) would pass max bytes: the time it takes is bounded by max, however
 * v shares or nests its parts.  Bytes become strings of hex, non-finite
 * floats null, a non-string key the string of its JSON text. */
char *iv_to_json(const ival *v, size_t max);
#endif
