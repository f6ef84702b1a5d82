/* docw: one writer for a tree of plain data (dicts, lists, strings, ints,
 * floats, bools, None) in two encodings, so that an exporter walks its data
 * once and gets JSON or a Python pickle from the same calls.
 *
 * Pickle: protocol 4, plain data only.  The opcodes written are PROTO,
 * EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS, APPENDS, SHORT_BINUNICODE,
 * BINUNICODE, BININT1, BININT2, BININT, LONG1, BINFLOAT, NONE, NEWTRUE,
 * NEWFALSE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET and STOP: what
 * Python's pickle.load reads and what PyTorch's MemoryViz.js unpickler
 * implements (it has no BINUNICODE8, no FRAME requirement, no MEMOIZE
 * counter beyond sequential ids).  Nothing that imports or calls code.
 *
 * Sharing: a value written once can be stored in the memo (docw_put) and
 * written again by reference (docw_get): 2 bytes for memo ids below 256
 * (BINGET), 5 bytes above (LONG_BINGET).  The caller picks the ids: small
 * ones for what repeats in every entry (key names, action names), large
 * ones for frames; docw_intern does it for strings.  In JSON docw_put is a
 * no-op and a shared value must be written again in full (the caller keeps
 * its text).
 *
 * Batching: a list or dict is written as EMPTY_x MARK items... APPENDS/
 * SETITEMS with at most 1000 items per batch, as Python's pickler does;
 * MemoryViz.js spreads each batch into a function call and a batch of a
 * million items would overflow its stack.
 *
 * Errors: writes go to a FILE; the caller checks ferror at the end.
 * Nesting is at most DOCW_MAX_DEPTH.
 */
#ifndef MEMSNAP_INTEROP_DOCW_H
#define MEMSNAP_INTEROP_DOCW_H

#include <stdint.h>
#include <stdio.h>

#include "util/u64map.h"

#define DOCW_MAX_DEPTH 32
#define DOCW_BATCH 1000

typedef enum docw_mode { DOCW_JSON = 0, DOCW_PICKLE = 1 } docw_mode;

typedef struct docw {
    FILE *f;
    docw_mode mode;
    int depth;                       /* open containers */
    uint8_t is_dict[DOCW_MAX_DEPTH];
    uint32_t n[DOCW_MAX_DEPTH];      /* values pushed since the last MARK */
    uint32_t total[DOCW_MAX_DEPTH];  /* JSON: values written in this container */
    /* interned strings (pickle): hash -> index in strs, memo id per string */
    u64map str_ix;
    char **strs;
    uint64_t *str_memo;
    size_t nstrs, capstrs;
    uint64_t next_small;             /* next free memo id below 256 */
    uint64_t next_big;               /* next free memo id from 256 */
    int failed;                      /* out of memory in a table */
} docw;

/* Starts a document on f (pickle: PROTO 4).  No allocation yet. */
void docw_init(docw *w, FILE *f, docw_mode mode);
/* Ends the document (pickle: STOP; JSON: newline) and frees the tables.
 * Returns 0, or -1 when a table ran out of memory (the output is then still
 * valid data but larger). */
int docw_finish(docw *w);

void docw_dict(docw *w);                 /* opens a dict */
void docw_list(docw *w);                 /* opens a list */
void docw_end(docw *w);                  /* closes the innermost container */
void docw_key(docw *w, const char *k);   /* a dict key (interned in pickle) */
void docw_str(docw *w, const char *s);   /* a string value, not interned */
void docw_istr(docw *w, const char *s);  /* a string value, interned */
void docw_int(docw *w, int64_t v);
void docw_uint(docw *w, uint64_t v);
void docw_float(docw *w, double v);
void docw_bool(docw *w, int v);
void docw_none(docw *w);
/* The JSON text of one value (an object from a snapshot header, say) as
 * data in the document's encoding; text that does not parse is written as
 * an empty dict.  Returns 0, or -1 when it did not parse. */
int docw_json(docw *w, const char *json_text);

/* JSON only: text that is already one JSON value, written as it is. */
void docw_raw(docw *w, const char *json_text);

/* Pickle: a fresh large memo id (from 256).  JSON: 0. */
uint64_t docw_new_id(docw *w);
/* Pickle: stores the value just written (or the container just opened, when
 * called right after docw_dict/docw_list) at memo id.  JSON: nothing. */
void docw_put(docw *w, uint64_t id);
/* Pickle: writes the value stored at memo id.  JSON: must not be called. */
void docw_get(docw *w, uint64_t id);

#endif
